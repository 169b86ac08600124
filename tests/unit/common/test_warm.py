"""The warm worker (icl_gd.common.warm): real servers on Unix sockets, real client processes.

Most servers here preload only ``json``, so that they are ready at once; the tests of the
default preload and of torch in a forked job import the heavy libraries (several seconds each).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from icl_gd.common import warm

SRC = Path(warm.__file__).resolve().parents[2]


def wait_until(condition, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def start(tmp_path, preload=("json",), parent=None, timeout=30.0) -> str:
    path = warm.start_server(str(tmp_path / "worker.log"), preload=list(preload), parent=parent)
    ready = lambda: os.path.exists(os.path.join(os.path.dirname(path), "identity.json"))  # noqa: E731
    try:
        wait_until(ready, timeout, "the worker")
    except AssertionError:
        raise AssertionError((tmp_path / "worker.log").read_text()) from None
    return path


@pytest.fixture
def server(tmp_path):
    path = start(tmp_path)
    yield path
    warm.stop_server(path)
    assert not os.path.exists(os.path.dirname(path))


def script(tmp_path, body: str, name: str = "job.py", wait_s: float = 0.0) -> Path:
    """A script that starts as the workflow's do: the package on sys.path, then delegate."""
    path = tmp_path / name
    path.write_text(
        f"import os, sys\nsys.path.insert(0, {str(SRC)!r})\nfrom icl_gd.common import warm\n\n"
        f"warm.delegate(wait_s={wait_s})\n"
        "IN_WORKER = os.environ.get('ICL_GD_WARM_CHILD') == '1'\n" + textwrap.dedent(body)
    )
    return path


def client(path, job: Path, *args: str, cwd=None, env=None, **kwargs):
    env = {**os.environ, warm.SOCKET_ENV: path or "", **(env or {})}
    return subprocess.run(
        [sys.executable, str(job), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, **kwargs
    )


def test_output_and_exit_codes_are_the_scripts(server, tmp_path):
    job = script(
        tmp_path,
        """
        print("out", IN_WORKER)
        print("err", file=sys.stderr)
        what = sys.argv[1]
        if what == "exit3":
            sys.exit(3)
        if what == "message":
            sys.exit("a message")
        if what == "raise":
            raise ValueError("boom")
    """,
    )
    done = client(server, job, "ok")
    assert (done.returncode, done.stdout, done.stderr) == (0, "out True\n", "err\n")
    assert client(server, job, "exit3").returncode == 3
    done = client(server, job, "message")
    assert done.returncode == 1 and done.stderr.endswith("a message\n")
    done = client(server, job, "raise")
    assert done.returncode == 1 and done.stdout == "out True\n"
    assert "Traceback (most recent call last)" in done.stderr and done.stderr.endswith("ValueError: boom\n")


def test_the_job_gets_the_clients_cwd_argv_environment_and_stdin(server, tmp_path):
    job = script(
        tmp_path,
        """
        import json, tempfile
        print(json.dumps([IN_WORKER, os.getcwd(), sys.argv[1:], os.environ.get("MY_VAR"), sys.stdin.read(),
                          tempfile.gettempdir(), __name__]))
    """,
    )
    workdir = tmp_path / "work"
    (workdir / "tmp").mkdir(parents=True)
    done = client(
        server, job, "a", "b c", cwd=workdir, env={"MY_VAR": "42", "TMPDIR": str(workdir / "tmp")}, input="from stdin"
    )
    assert json.loads(done.stdout) == [
        True,
        str(workdir),
        ["a", "b c"],
        "42",
        "from stdin",
        str(workdir / "tmp"),
        "__main__",
    ]


@pytest.mark.parametrize("ignores_sigterm", [False, True])
def test_a_job_whose_client_is_killed_is_killed(server, tmp_path, ignores_sigterm):
    pid_file = tmp_path / "pid"
    job = script(
        tmp_path,
        f"""
        import signal, time
        if {ignores_sigterm}:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # then the worker's SIGKILL ends it
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
    """,
    )
    proc = subprocess.Popen([sys.executable, str(job)], env={**os.environ, warm.SOCKET_ENV: server})
    wait_until(pid_file.exists, what="the job")
    time.sleep(0.1)
    pid = int(pid_file.read_text())
    assert pid != proc.pid  # it runs in the worker, not in the client
    proc.send_signal(signal.SIGTERM)  # as Snakemake stops a job
    proc.wait(timeout=10)
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), timeout=warm.KILL_GRACE_S + 5, what="the job to end")


def test_without_a_usable_worker_the_script_runs_in_place(tmp_path):
    job = script(
        tmp_path,
        """
        print(IN_WORKER)
        sys.exit(4)
    """,
    )
    # announced, but nothing there; switched off; not announced
    for path, env in [(str(tmp_path / "none" / "socket"), {}), ("", {}), (str(tmp_path / "x"), {warm.SWITCH_ENV: "0"})]:
        done = client(path, job, env=env)
        assert (done.returncode, done.stdout, done.stderr) == (4, "False\n", "")

    # a stale socket: its worker was killed and left its folder behind
    folder = tmp_path / "stale"
    folder.mkdir()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(folder / "socket"))
    dead.close()
    (folder / "identity.json").write_text(json.dumps({**warm.identity(), "pid": 1}))
    done = client(str(folder / "socket"), job)
    assert (done.returncode, done.stdout) == (4, "False\n")
    assert done.stderr.count("\n") == 1 and "running in place" in done.stderr


def test_a_model_job_waits_for_a_worker_that_is_importing_and_a_light_job_does_not(tmp_path, monkeypatch):
    """The default run's pretraining starts while the worker still imports torch: it waits for it
    (its own imports would be the same, on the same cores); a data job runs in place at once. A
    worker that dies while importing sends the waiting job back in place, not after its wait."""
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(3)\n")
    (tmp_path / "failing_import.py").write_text("import time\ntime.sleep(1)\nraise ImportError('no')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    model_job = script(tmp_path, "print(IN_WORKER)\n", name="model.py", wait_s=30)
    data_job = script(tmp_path, "print(IN_WORKER)\n", name="data.py")

    path = warm.start_server(str(tmp_path / "worker.log"), preload=["slow_import"])
    try:
        started = time.monotonic()
        assert client(path, data_job).stdout == "False\n"
        assert time.monotonic() - started < 2.5
        assert client(path, model_job).stdout == "True\n"
    finally:
        warm.stop_server(path)

    path = warm.start_server(str(tmp_path / "dead.log"), preload=["failing_import"])
    started = time.monotonic()
    done = client(path, model_job)
    assert (done.returncode, done.stdout) == (0, "False\n") and time.monotonic() - started < 15
    warm.stop_server(path)


def test_a_job_of_another_slurm_allocation_or_python_runs_in_place(server, tmp_path):
    job = script(tmp_path, "print(IN_WORKER)\n")
    assert client(server, job).stdout == "True\n"
    done = client(server, job, env={"SLURM_JOB_ID": "1234"})  # a job inside an allocation
    assert (done.returncode, done.stdout, done.stderr) == (0, "False\n", "")
    identity = Path(server).parent / "identity.json"
    identity.write_text(json.dumps({**json.loads(identity.read_text()), "prefix": "/some/conda/env"}))
    done = client(server, job)
    assert (done.returncode, done.stdout, done.stderr) == (0, "False\n", "")


def test_after_the_package_changes_every_job_runs_in_place(server, tmp_path):
    """An edit during a run: a forked job would run the modules the worker imported before it
    beside those it imports after it, so it runs in place, on the new code alone, and says why."""
    job = script(tmp_path, "print(IN_WORKER)\n")
    assert client(server, job).stdout == "True\n"
    identity = Path(server).parent / "identity.json"
    identity.write_text(json.dumps({**json.loads(identity.read_text()), "code": "0" * 16}))  # as before an edit
    done = client(server, job)
    assert (done.returncode, done.stdout) == (0, "False\n")
    assert "changed after the worker started; running in place" in done.stderr


def test_the_code_stamp_moves_with_an_edit_a_new_file_or_a_removed_one(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "b.py").write_text("y = 2\n")
    stamps = [warm.code_stamp(str(package))]
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")  # Python's own caches do not count
    assert warm.code_stamp(str(package)) == stamps[0]
    os.utime(package / "sub" / "b.py", ns=(0, 10**18))  # saved again, same size
    stamps.append(warm.code_stamp(str(package)))
    (package / "c.py").write_text("")
    stamps.append(warm.code_stamp(str(package)))
    (package / "a.py").unlink()
    stamps.append(warm.code_stamp(str(package)))
    assert len(set(stamps)) == 4


def test_concurrent_jobs_each_get_their_own_result(server, tmp_path):
    job = script(
        tmp_path,
        """
        import time
        time.sleep(0.5)
        print(sys.argv[1], IN_WORKER)
        sys.exit(int(sys.argv[1]))
    """,
    )
    env = {**os.environ, warm.SOCKET_ENV: server}
    procs = [
        subprocess.Popen([sys.executable, str(job), str(i)], env=env, stdout=subprocess.PIPE, text=True)
        for i in (5, 6, 7)
    ]
    results = [(p.communicate(timeout=30)[0], p.returncode) for p in procs]
    assert results == [("5 True\n", 5), ("6 True\n", 6), ("7 True\n", 7)]


def test_the_worker_exits_when_its_parent_is_gone(tmp_path):
    parent = subprocess.Popen(["sleep", "60"])
    path = start(tmp_path, parent=parent.pid)
    worker = warm._servers[path]
    parent.kill()
    parent.wait()
    assert worker.wait(timeout=10) == 0
    assert not os.path.exists(os.path.dirname(path))
    warm.stop_server(path)  # a worker that is gone already: nothing to do


def test_a_stopped_worker_finishes_its_running_jobs(tmp_path):
    path = start(tmp_path)
    started = tmp_path / "started"
    job = script(
        tmp_path,
        f"""
        import time
        open({str(started)!r}, "w").close()
        time.sleep(1)
        print("finished", IN_WORKER)
    """,
    )
    proc = subprocess.Popen(
        [sys.executable, str(job)], env={**os.environ, warm.SOCKET_ENV: path}, stdout=subprocess.PIPE, text=True
    )
    wait_until(started.exists, what="the job")
    warm.stop_server(path)
    assert proc.communicate(timeout=30)[0] == "finished True\n" and proc.returncode == 0
    assert not os.path.exists(os.path.dirname(path))


def test_torch_runs_threads_in_a_forked_job(tmp_path):
    """libgomp and transformers after fork: a server that imported them, a job that computes with
    two threads. A worker that had started an OpenMP pool would hang here."""
    path = start(tmp_path, preload=("torch", "transformers:GPT2LMHeadModel"), timeout=120)
    try:
        job = script(
            tmp_path,
            """
            import torch
            from transformers import GPT2Config, GPT2LMHeadModel
            torch.set_num_threads(2)
            torch.manual_seed(0)
            a = torch.randn(300, 300)
            model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64))
            logits = model(torch.randint(0, 100, (4, 16))).logits
            print(IN_WORKER, torch.get_num_threads(), tuple(logits.shape), bool(torch.isfinite(a @ a).all()))
        """,
        )
        done = client(path, job)
        assert (done.returncode, done.stdout) == (0, "True 2 (4, 16, 100) True\n"), done.stderr[-3000:]
    finally:
        warm.stop_server(path)


def test_the_default_preload_leaves_one_thread_and_cuda_untouched():
    # every torch.cuda entry that can start CUDA is watched, as in test_runtime: a job's claim_gpu
    # must still be able to choose its device through CUDA_VISIBLE_DEVICES
    code = textwrap.dedent("""
        from icl_gd.common import warm
        warm.preload(["torch", "torch.cuda"])  # as the worker starts: its thread settings first
        import torch
        called = []
        entries = [(torch.cuda, n) for n in ("is_available", "device_count", "init", "_lazy_init")]
        entries += [(torch._C, n) for n in ("_cuda_getDeviceCount", "_cuda_init") if hasattr(torch._C, n)]
        for module, name in entries:
            def watch(*a, _name=name, _orig=getattr(module, name), **k):
                called.append(_name)
                return _orig(*a, **k)
            setattr(module, name, watch)
        warm.preload(list(warm.DEFAULT_PRELOAD))
        assert not called and not torch.cuda.is_initialized(), called
        assert len(warm._threads()) == 1, warm._threads()
        # built once here, not in every job's first from_pretrained
        from transformers import conversion_mapping
        assert conversion_mapping._checkpoint_conversion_mapping_cache is not None
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout == "ok\n", done.stderr[-3000:]


def test_the_worker_serves_its_own_user_alone(tmp_path, monkeypatch, capsys):
    """A connection from another user (the kernel's SO_PEERCRED) is refused and logged before the
    worker reads its request; its own user's is served."""
    path = str(tmp_path / "socket")
    server = warm._Server(path, os.getpid())
    try:

        def connect_and_accept(hang_up=False):
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(path)
            if hang_up:
                client.close()
            server.accept()
            return client

        monkeypatch.setattr(warm.os, "getuid", lambda: os.geteuid() + 4242)  # as if the worker were another user's
        client = connect_and_accept()
        assert client.recv(1) == b""  # closed unread: no job started
        assert not server.jobs
        out = capsys.readouterr().out
        assert f"refused a connection from process {os.getpid()} of user {os.geteuid()}" in out
        monkeypatch.undo()
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        assert warm.peer_is_us(a) == (True, os.getpid(), os.getuid())
        a.close()
        b.close()
        connect_and_accept(hang_up=True)  # our own user's connection gets to the request (here: none)
        assert "bad request" in capsys.readouterr().out
    finally:
        server.listener.close()
        signal.set_wakeup_fd(-1)
