"""Entry points send everything a job prints, from Python or from C, to the rule's log; each GPU
job gets a slot of the least busy device, up to jobs_per_gpu jobs per device (tested with fake
device counts and environments: no GPU needed)."""

import os
import subprocess
import sys
import time

import pytest

from icl_gd.common import runtime


def test_log_to_captures_logging_print_and_c_level_output(tmp_path):
    log = tmp_path / "logs" / "job.log"
    code = (
        "import logging, os, sys\n"
        "from icl_gd.common.runtime import log_to\n"
        f"log_to({str(log)!r}, threads=1)\n"
        "print('from print')\n"
        "logging.getLogger('x').info('from logging')\n"
        "os.write(2, b'from fd 2\\n')\n"
        "assert os.environ['OMP_NUM_THREADS'] == '1'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = log.read_text()
    assert "from print" in text and "from logging" in text and "from fd 2" in text
    assert proc.stdout == "" and proc.stderr == ""


def test_log_to_removes_what_a_killed_job_left_of_its_outputs(tmp_path):
    out = tmp_path / "results" / "figure.png"
    out.parent.mkdir()
    stale, other = out.with_name(".figure.png.0a1b2c3d.tmp"), out.with_name(".table.md.0a1b2c3d.tmp")
    stale.write_text("half")
    other.write_text("someone else's")
    code = f"from icl_gd.common.runtime import log_to\nlog_to({str(tmp_path / 'job.log')!r}, outputs=[{str(out)!r}])\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert not stale.exists() and other.exists()
    assert "left by a job that was killed" in (tmp_path / "job.log").read_text()


def test_visible_gpus_honour_cuda_visible_devices_and_count_otherwise():
    assert runtime.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}, count=8) == ["2", "3"]
    assert runtime.visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-5d3c,1"}) == ["GPU-5d3c", "1"]
    assert runtime.visible_gpus({"CUDA_VISIBLE_DEVICES": "1,-1,2"}) == ["1"]  # CUDA stops at -1
    assert runtime.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, count=8) == []
    assert runtime.visible_gpus({}, count=3) == ["0", "1", "2"]
    assert runtime.visible_gpus({}, count=0) == []


def test_only_cuda_devices_want_a_gpu():
    assert runtime.wants_gpu("auto", {}, count=2) and runtime.wants_gpu("cuda:1", {}, count=0)
    assert not runtime.wants_gpu("auto", {}, count=0) and not runtime.wants_gpu("cpu", {}, count=2)
    assert not runtime.wants_gpu("auto", {"CUDA_VISIBLE_DEVICES": ""}, count=2)


def test_each_lock_takes_a_device_no_other_holds(tmp_path):
    first = runtime.try_lock(["0", "1"], tmp_path)
    second = runtime.try_lock(["0", "1"], tmp_path)
    assert first[0] == "0" and second[0] == "1"
    assert runtime.try_lock(["0", "1"], tmp_path) is None
    os.close(first[1])  # the job ended
    third = runtime.try_lock(["0", "1"], tmp_path)
    assert third[0] == "0"
    for _, fd in (second, third):
        os.close(fd)


def test_claims_give_jobs_distinct_devices_and_set_cuda_visible_devices(tmp_path):
    jobs = [{}, {}, {}]
    got = [runtime.claim_gpu("auto", environ=env, count=3, lock_root=tmp_path) for env in jobs]
    assert sorted(got) == ["0", "1", "2"]
    assert [env["CUDA_VISIBLE_DEVICES"] for env in jobs] == got
    with pytest.raises(TimeoutError, match="held by other jobs"):
        runtime.claim_gpu("cuda", environ={}, count=3, lock_root=tmp_path, poll_s=0.01, timeout_s=0.05)


def test_a_slurm_allocation_keeps_its_devices_and_its_own_locks(tmp_path):
    # SLURM numbers each allocation's GPUs from 0: two jobs on one node may both see "0"
    one, other = (
        {"CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_ID": "11"},
        {"CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_ID": "12"},
    )
    assert runtime.claim_gpu("auto", environ=one, count=4, lock_root=tmp_path) == "0"
    assert runtime.claim_gpu("auto", environ=other, count=4, lock_root=tmp_path) == "0"
    same_allocation = {"CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_ID": "11"}
    with pytest.raises(TimeoutError):
        runtime.claim_gpu("auto", environ=same_allocation, count=4, lock_root=tmp_path, poll_s=0.01, timeout_s=0.05)


def test_cpu_and_explicit_devices_are_left_alone(tmp_path):
    for device, env in [("cpu", {}), ("cuda:1", {}), ("auto", {"CUDA_VISIBLE_DEVICES": ""})]:
        before = dict(env)
        assert runtime.claim_gpu(device, environ=env, count=2, lock_root=tmp_path) is None
        assert env == before
    assert not list(tmp_path.iterdir())


def test_a_job_waits_for_the_device_another_process_holds(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from icl_gd.common import runtime\n"
            f"runtime.claim_gpu('auto', environ={{}}, count=1, lock_root={str(tmp_path)!r})\n"
            "print('held', flush=True); time.sleep(1.0)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    env = {}
    assert runtime.claim_gpu("auto", environ=env, count=1, lock_root=tmp_path, poll_s=0.05, timeout_s=30) == "0"
    assert time.monotonic() - started > 0.5  # it waited for the holder to exit
    assert holder.wait() == 0 and env["CUDA_VISIBLE_DEVICES"] == "0"


def test_the_gpu_cap_is_spread_over_the_gpus_rounding_up():
    assert runtime.jobs_per_gpu(4, 1) == 4 and runtime.jobs_per_gpu(4, 2) == 2
    assert runtime.jobs_per_gpu(5, 2) == 3 and runtime.jobs_per_gpu(1, 4) == 1
    # no cap, or no GPU: a device per job, as before sharing
    assert runtime.jobs_per_gpu(None, 2) == 1 and runtime.jobs_per_gpu(4, 0) == 1


def test_jobs_per_gpu_below_one_is_refused(tmp_path):
    for bad in (0, -1, "2", 1.5):
        with pytest.raises(ValueError, match="jobs_per_gpu must be a whole number of at least 1"):
            runtime.claim_gpu("cpu", jobs_per_gpu=bad, environ={}, count=2, lock_root=tmp_path)


def hold_gpu(tmp_path, **kwargs):
    """A job in a process of its own that claims a device and holds it until its stdin closes."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from icl_gd.common import runtime\n"
            f"print(runtime.claim_gpu('auto', environ={{}}, lock_root={str(tmp_path)!r}, **{kwargs!r}), flush=True)\n"
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return holder, holder.stdout.readline().strip()


def test_jobs_share_a_device_up_to_jobs_per_gpu_spread_over_the_devices(tmp_path):
    share = dict(count=2, jobs_per_gpu=2)
    holders = [hold_gpu(tmp_path, **share) for _ in range(4)]
    assert [gpu for _, gpu in holders] == ["0", "1", "0", "1"]
    with pytest.raises(TimeoutError, match="held by other jobs"):
        runtime.claim_gpu("auto", environ={}, lock_root=tmp_path, poll_s=0.01, timeout_s=0.05, **share)
    ended, _ = holders.pop(1)  # a job on device 1 ends; its slot goes to the next job
    ended.stdin.close()
    assert ended.wait() == 0
    env = {}
    assert runtime.claim_gpu("auto", environ=env, lock_root=tmp_path, poll_s=0.01, timeout_s=30, **share) == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "1"
    for holder, _ in holders:
        holder.stdin.close()
        assert holder.wait() == 0


def test_the_extraction_imports_leave_cuda_alone():
    # workflow/scripts/extract.py imports these before claim_gpu sets CUDA_VISIBLE_DEVICES, which
    # CUDA reads once, when it starts: every torch.cuda entry that can start it is watched.
    code = (
        "import torch, torch.cuda\n"
        "called = []\n"
        "entries = [(torch.cuda, n) for n in ('is_available', 'device_count', 'init', '_lazy_init')]\n"
        "entries += [(torch._C, n) for n in ('_cuda_getDeviceCount', '_cuda_init') if hasattr(torch._C, n)]\n"
        "for module, name in entries:\n"
        "    def watch(*a, _name=name, _orig=getattr(module, name), **k):\n"
        "        called.append(_name)\n"
        "        return _orig(*a, **k)\n"
        "    setattr(module, name, watch)\n"
        "import transformers\n"
        "from icl_gd.activations import extract\n"
        "assert not called and not torch.cuda.is_initialized(), called\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
