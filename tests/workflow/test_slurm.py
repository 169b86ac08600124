"""profiles/slurm on a real single-node SLURM: the model jobs go through sbatch with their
resources, and the outputs equal a local run's.

The cluster (munged, slurmctld, slurmd) is started here, as root, on free ports with its own
munge socket and state folder, from a slurm.conf written for this machine's cores and memory; its
node declares one GPU in gres.conf (a fake device file, so SLURM hands it out and sets
CUDA_VISIBLE_DEVICES, while the jobs themselves run on CPU). The configuration goes where SLURM
looks by default, /etc/slurm, for the length of the test: the SLURM plugin's job step removes
SLURM_* variables, SLURM_CONF among them, before its srun. The workflow runs through a profile
derived from profiles/slurm that changes only cluster-specific settings, and is checked against a
local run.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import re  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from icl_gd.activations import cache  # noqa: E402
from tests.workflow.test_profiles import CONFIG, CPU_RULES, GPU_RULES, write_estimate  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
CONF_DIR = Path("/etc/slurm")
MARKER = "# written by icl-gd's tests/workflow/test_slurm.py for the length of the test, pid "
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo")
CPU_PARTITION, GPU_PARTITION = "testcpu", "testgpu"
JOB_MEM_MB = 1000  # make_variant's fallback request (8 GB) may exceed a CI machine
# The cluster run's cost estimate (as `snakemake cost_estimate` writes it): each extraction asks
# for its peak x 1.5 (at least 1000 MB) and its time x 2 + 5 min
PEAKS, SECONDS = {"zsl": 500, "icl": 600, "gd": 800}, {"zsl": 60, "icl": 150, "gd": 300}


def run(cmd, cwd, env=None, timeout_s=None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout_s)
    if proc.returncode != 0:
        raise AssertionError(f"{cmd[:6]} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _slurm_conf(root: Path, host: str) -> str:
    cpus = len(os.sched_getaffinity(0))
    mem_kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal")).split()[1])
    ctld_port, d_port = _free_ports(2)
    # RealMemory below the total, as slurmd measures a little less than /proc/meminfo says and
    # drains a node configured with more memory than it has.
    return f"""{MARKER}{os.getpid()}
ClusterName=iclgd
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.sock
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MinJobAge=3600
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={int(mem_kb / 1024 * 0.9)} Gres=gpu:1 State=UNKNOWN
PartitionName={CPU_PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP
PartitionName={GPU_PARTITION} Nodes={host} MaxTime=INFINITE State=UP
"""


def _writer(conf: Path) -> int | None:
    """The pid of the test run that wrote ``conf``; 0 if someone else did; None if it is absent."""
    if not conf.exists():
        return None
    first = conf.read_text().split("\n", 1)[0]
    return int(first[len(MARKER) :]) if first.startswith(MARKER) else 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Slurm:
    """munged, slurmctld and slurmd of a one-node cluster, in the foreground, as children."""

    def __init__(self):
        # the munge socket's folder must be open to all, so not under pytest's private tmp
        self.root = Path(tempfile.mkdtemp(prefix="icl-gd-slurm-"))
        self.root.chmod(0o755)
        self.host = socket.gethostname().split(".")[0]
        # the clients read /etc/slurm, never a real cluster's configuration named in SLURM_CONF
        self.env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
        self.confs = [CONF_DIR / "slurm.conf", CONF_DIR / "gres.conf"]
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        root = self.root
        for conf in self.confs:
            owner = _writer(conf)
            if owner == 0:
                raise RuntimeError(f"this machine has a SLURM configuration of its own, {conf}; it stays untouched")
            if owner and _alive(owner):
                raise RuntimeError(f"another run of this test (pid {owner}) is using {conf}")
            # else absent, or left by an interrupted run
        for folder in ("state", "spool"):
            (root / folder).mkdir()
        CONF_DIR.mkdir(parents=True, exist_ok=True)
        self.confs[0].write_text(_slurm_conf(root, self.host))
        # AutoDetect=off: no NVML here; File= must be a device, and the jobs never open it
        self.confs[1].write_text(
            f"{MARKER}{os.getpid()}\nAutoDetect=off\nNodeName={self.host} Name=gpu File=/dev/null\n"
        )
        subprocess.run(["mungekey", "--create", f"--keyfile={root}/munge.key"], check=True, capture_output=True)
        self._spawn(
            "munged",
            "-F",
            f"--key-file={root}/munge.key",
            f"--socket={root}/munge.sock",
            f"--pid-file={root}/munged.pid",
            f"--seed-file={root}/munged.seed",
        )
        self._wait(lambda: (root / "munge.sock").exists(), "munged")
        self._spawn("slurmctld", "-D", "-i")
        self._spawn("slurmd", "-D", "-N", self.host)
        self._wait(lambda: self.sinfo() == {"idle"}, "the node to be idle")

    def sinfo(self) -> set[str]:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True).stdout
        return set(out.split())

    def _spawn(self, *cmd: str) -> None:
        log = open(self.root / f"{cmd[0]}.out", "w")
        self.procs.append(subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def _wait(self, ready, what: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"waiting for {what}: {', '.join(dead) or 'timed out'}\n{self.logs()}")
            time.sleep(0.5)

    def logs(self) -> str:
        tails = []
        for name in ("munged.out", "slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out"):
            path = self.root / name
            if path.exists():
                tails.append(f"--- {name}\n" + "\n".join(path.read_text().splitlines()[-15:]))
        return "\n".join(tails)

    def job(self, jobid: str) -> dict[str, str]:
        """A job's record, which slurmctld keeps for MinJobAge after it ends (no accounting)."""
        line = run(["scontrol", "show", "job", "-o", "-d", jobid], cwd=self.root, env=self.env).stdout
        return dict(re.findall(r"(\w[\w/:]*)=(\S*)", line))

    def stop(self) -> None:
        if any(p.args[0] == "slurmctld" for p in self.procs):  # this cluster's jobs, no other's
            subprocess.run(["scancel", "--user", "root"], env=self.env, capture_output=True)
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:  # slurmd ignores SIGTERM while it retries to register
                proc.kill()
                proc.wait()
        for conf in self.confs:
            if _writer(conf) == os.getpid():
                conf.unlink()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def slurm():
    missing = [cmd for cmd in DAEMONS if shutil.which(cmd) is None]
    if missing:
        pytest.skip(f"SLURM cannot start here: {', '.join(missing)} not installed (apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        pytest.skip("SLURM cannot start here: slurmctld and slurmd run as root, and this is not root")
    if len(os.sched_getaffinity(0)) < 2:  # build_builtin_model would pend for ever
        pytest.skip("SLURM cannot run the workflow here: build_builtin_model needs 2 cores, this machine has 1")
    cluster = Slurm()
    try:
        cluster.start()
    except RuntimeError as err:
        cluster.stop()
        pytest.skip(f"SLURM cannot start here: {err}")
    yield cluster
    cluster.stop()


def cluster_profile(tmp_path: Path) -> Path:
    """profiles/slurm with this cluster's partition, memory that fits the node, and squeue for
    job status (no accounting here, as the profile's notes say)."""
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    for rule in GPU_RULES | CPU_RULES:
        resources = profile["set-resources"].setdefault(rule, {})
        if rule in GPU_RULES:  # their memory and time: the estimate's
            resources["slurm_partition"] = GPU_PARTITION
        else:
            resources["mem_mb"] = JOB_MEM_MB
    profile["slurm-status-command"] = "squeue"
    profile["slurm-init-seconds-before-status-checks"] = 2
    profile["latency-wait"] = 5
    folder = tmp_path / "profile"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump(profile))
    return folder


@pytest.fixture(scope="module")
def runs(slurm, tmp_path_factory):
    """The same tiny config run locally and through SLURM: (local dir, cluster dir, cluster output)."""
    local, cluster = tmp_path_factory.mktemp("local"), tmp_path_factory.mktemp("cluster")
    for workdir in (local, cluster):
        (workdir / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    common = ["--configfile", "config.yaml", "--directory"]
    # the local run alongside the cluster's, which spends most of its time waiting on SLURM's queue
    beside = subprocess.Popen(
        [*SNAKEMAKE, *common, str(local), "--cores", "2"],
        cwd=local,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        profile = cluster_profile(tmp_path_factory.mktemp("profile"))
        write_estimate(cluster, PEAKS, SECONDS)
        # a job that pends for ever (resources no node has) fails the test instead of hanging it
        proc = run(
            [*SNAKEMAKE, *common, str(cluster), "--workflow-profile", str(profile)],
            cwd=cluster,
            env=slurm.env,
            timeout_s=900,
        )
    finally:
        local_output, _ = beside.communicate(timeout=900)
    assert beside.returncode == 0, f"the local run failed ({beside.returncode}):\n{local_output[-6000:]}"
    return local, cluster, proc.stdout + proc.stderr


@pytest.mark.slurm
@pytest.mark.slow
def test_model_jobs_go_through_sbatch_with_their_resources(slurm, runs):
    _, cluster, output = runs
    jobids = re.findall(r"submitted with SLURM jobid (\d+)", output)
    records = [slurm.job(jobid) for jobid in jobids]
    by_comment = {r["Comment"]: r for r in records}
    assert all(r["JobState"] == "COMPLETED" for r in records), records
    # one SLURM job per CPU model job, and one per variant for its three extractions (a group job's
    # comment is its group and its rules); none for a local rule
    groups = {c for c in by_comment if c.startswith("rule_extract_")}
    assert groups == {
        f"rule_extract_tiny_{v}_extract_base_extract_zsl_finetune_and_extract" for v in ("trained", "untrained")
    }
    assert {c.split("_wildcards_")[0] for c in by_comment} - groups == {f"rule_{r}" for r in CPU_RULES}
    for comment, record in by_comment.items():
        if comment in groups:
            assert record["Partition"] == GPU_PARTITION
            assert record["TresPerJob"] == "gres:gpu:1" and record["CpusPerTres"] == "gres:gpu:1"
            # from the estimate: zsl 1000 MB (the least), icl 1000, gd 1200; 7, 10 and 15 min, in turn
            assert record["MinMemoryNode"] == "1200M"
            assert record["TimeLimit"] == "00:32:00"
        else:
            assert record["Partition"] == CPU_PARTITION and "gpu" not in record.get("TresPerJob", "")
    assert by_comment["rule_build_builtin_model_wildcards_tiny"]["NumCPUs"] == "2"  # its threads
    # each extraction took the GPU SLURM gave its job (CUDA_VISIBLE_DEVICES=0)
    logs = sorted((cluster / "results/logs/extract/tiny").rglob("*.log"))
    assert len(logs) == 6
    for log in logs:
        assert "using GPU 0 of ['0']" in log.read_text(), log


@pytest.mark.slurm
@pytest.mark.slow
def test_cluster_outputs_equal_a_local_run(runs):
    local, cluster, _ = runs
    caches = sorted(p.relative_to(local) for p in (local / "results/activations").rglob("*.arrow"))
    assert len(caches) == 6
    assert caches == sorted(p.relative_to(cluster) for p in (cluster / "results/activations").rglob("*.arrow"))
    for path in caches:
        a, b = cache.read_cache(local / path), cache.read_cache(cluster / path)
        for column in (
            "example_id",
            "pred",
            "label_logprobs",
            "attn_out",
            "attn_scores",
            "context_scores",
            "attn_out_scale",
            "attn_scores_scale",
            "context_scores_scale",
        ):
            np.testing.assert_array_equal(getattr(a, column), getattr(b, column), err_msg=f"{path}: {column}")
        np.testing.assert_array_equal(a.outputs(), b.outputs(), err_msg=f"{path}: outputs")
    pd.testing.assert_frame_equal(
        pd.read_parquet(local / "results/metrics/summary.parquet"),
        pd.read_parquet(cluster / "results/metrics/summary.parquet"),
    )
    assert (local / "results/reports/tables/methods.md").read_text() == (
        cluster / "results/reports/tables/methods.md"
    ).read_text()
