"""A warm worker for local runs: one process that imports torch, transformers, pandas, pyarrow,
matplotlib and the package once, then forks a copy of itself to run each job.

Why: a model job of the default run spends ~8-9 s importing torch and transformers before ~0.5 s
of work, an analysis job 1-3 s importing pandas, pyarrow and matplotlib; on a few cores that
start-up is most of the run. Snakemake still runs one job per setting (so a new method reruns
only what it changes), but the job's own process (the client, ``delegate``) hands its script and
its stdin, stdout and stderr to the worker and waits for the exit code. The Snakefile starts the
worker in ``onstart``, announces its socket in ICL_GD_WARM_SOCKET, which the jobs inherit, and
stops it in ``onsuccess``/``onerror``; it also exits when the Snakemake process is gone.

Why forking is safe: the worker is single-threaded when it forks (checked after its imports; it
refuses to serve otherwise). numpy's OpenBLAS and pyarrow's jemalloc would each start a thread at
import, so it sets OPENBLAS_NUM_THREADS=1 and jemalloc's background_thread:false first: numpy's
BLAS then runs one thread in the worker's jobs (the rules' ``threads``; torch's own pool follows
runtime.log_to's torch.set_num_threads as before). It runs no torch op, so there is no OpenMP pool
for fork to break, and never touches CUDA (not even torch.cuda.is_available()), so a job's
runtime.claim_gpu can still choose its device through CUDA_VISIBLE_DEVICES.

A job uses the worker only where it would run the same code the same way: same host, user and
Python (sys.executable, sys.prefix: a --sdm conda job runs a Python of its own), the same package
folder, the same SLURM_JOB_ID or none (a job inside a SLURM allocation never runs in a worker
outside it) and the same values of the environment variables that the preloaded libraries read at
import. The Snakefile starts none for dry runs and lints (Snakemake runs no onstart there), for
executors other than the local one (the SLURM executor's local rules run in place, as before) or
with a software deployment method. Otherwise (no worker yet, as for the jobs that start during
its imports, or a worker that died) the script runs in place; a model job (``delegate(wait_s=)``)
first waits for a worker that is still importing, since its own imports would be the same ones.
The worker also builds what transformers builds once per process at a first from_pretrained (its
table of checkpoint conversions), so that no job builds its own. The jobs run the package as the
worker imported it at the start of the run, as the run's code_version params were computed then;
once a file of the package changes (an edit during a long run), every later job runs in place, on
the new code alone: a forked job would otherwise run the modules the worker imported before the
edit beside those it imports itself after it (a new function called from an old module).
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

from icl_gd.common.atomic import write_text
from icl_gd.common.benchmark import stamp_start

SOCKET_ENV = "ICL_GD_WARM_SOCKET"  # the worker's socket, set by the Snakefile for the jobs
SWITCH_ENV = "ICL_GD_WARM_WORKER"  # 0: start no worker and use none
CHILD_ENV = "ICL_GD_WARM_CHILD"  # set in the jobs the worker runs: run in place, never delegate again
# read by the preloaded libraries at import: a job that sees other values must not use their copy
IMPORT_TIME_ENV = ("HF_HUB_OFFLINE", "HF_HOME", "HF_HUB_CACHE", "TRANSFORMERS_OFFLINE")
DEFAULT_PRELOAD = (
    "torch",
    "transformers",
    "transformers:GPT2LMHeadModel",
    "transformers:AutoModelForCausalLM",
    "transformers:AutoTokenizer",
    "transformers:PreTrainedTokenizerFast",
    "transformers.models.gpt2.modeling_gpt2",
    "transformers.models.qwen2.modeling_qwen2",  # the default model's
    "transformers.models.llama.modeling_llama",  # SmolLM2's
    "pandas",
    "pyarrow",
    "pyarrow.parquet",
    "pyarrow.dataset",
    "matplotlib.pyplot",
    "snakemake.io",
    "snakemake.iocontainers",
    "snakemake.logging",
    "icl_gd.common.runtime",
    "icl_gd.activations.extract",
    "icl_gd.models.builtin",
    "icl_gd.models.loading",
    "icl_gd.metrics.scoring",
    "icl_gd.report.outputs",
    "icl_gd.report.tables",
    "icl_gd.report.figures",
    "icl_gd.activations.cache",
    "icl_gd.data.splits",
    "icl_gd.data.twins",
    "icl_gd.config.resolve",
)
KILL_GRACE_S = 3.0
# How long a model job waits for a worker that is still importing; past it (a machine so loaded
# that the imports take longer), the job runs in place.
MODEL_JOB_WAIT_S = 120.0
_HEADER = struct.Struct("!I")
_STATUS = struct.Struct("!i")


def enabled() -> bool:
    return os.environ.get(SWITCH_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def identity() -> dict:
    """What a job and the worker must share for the worker to run the job."""
    package = _package()
    return {
        "host": socket.gethostname(),
        "uid": os.getuid(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "package": package,
        "env": {name: os.environ.get(name) for name in IMPORT_TIME_ENV},
        "code": code_stamp(package),
    }


def _package() -> str:
    return os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))  # the folder icl_gd


def code_stamp(folder: str) -> str:
    """The state of every file under ``folder`` (name, size, modification time; bytecode caches
    left out) as one digest: cheap enough for every job (~70 files: 2 ms), and it moves
    with any edit, a new file or a removed one."""
    import hashlib

    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                st = os.stat(path)
            except OSError:  # removed while walking: the next job sees the folder without it
                continue
            digest.update(f"{os.path.relpath(path, folder)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------
# Client: the job's own process.


def delegate(wait_s: float = 0.0) -> None:
    """Run this script (sys.argv[0]) in the warm worker and exit with its exit code; return at
    once where there is no usable worker, or inside the worker, and the script runs in place.

    ``wait_s``: how long to wait for a worker that is still importing. A model job passes it: its
    own imports are the worker's (torch, transformers), which the worker, started first, finishes
    sooner than the job would on the same cores. A light job runs in place at once."""
    stamp_start()  # the job's clock (common/benchmark.py): a warm job's includes its hand-over
    path = os.environ.get(SOCKET_ENV)
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if not path or os.environ.get(CHILD_ENV) or not enabled() or not os.path.isfile(script):
        return
    folder = os.path.dirname(path)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with open(os.path.join(folder, "identity.json")) as f:
                announced = json.load(f)
            break
        except (OSError, ValueError):  # not ready yet (it writes the file once it listens), or gone
            if time.monotonic() >= deadline or not _starting(folder):
                return
            time.sleep(0.05)
    pid = announced.pop("pid", None)
    ours = identity()
    if announced != ours:
        if {**announced, "code": ours["code"]} == ours:
            print(
                f"icl_gd.common.warm: the package's files ({ours['package']}) changed after the worker started;"
                " running in place, on the new code",
                file=sys.stderr,
            )
        return  # another host, Python, package or SLURM job: by design, not an error
    request = json.dumps({"script": script, "argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    sys.stdout.flush()
    sys.stderr.flush()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        peer_pid, peer_uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if (peer_pid, peer_uid) != (pid, os.getuid()):
            raise OSError(f"the socket is served by process {peer_pid} of user {peer_uid}, not by the worker")
        socket.send_fds(sock, [_HEADER.pack(len(request))], [0, 1, 2])
        sock.sendall(request)
    except OSError as e:
        sock.close()
        print(f"icl_gd.common.warm: the worker at {path} is unusable ({e}); running in place", file=sys.stderr)
        return
    # From here the script runs in the worker. A SIGTERM or Ctrl-C that ends this process closes
    # the connection, and the worker then kills the job.
    try:
        status = _recv_exactly(sock, _STATUS.size)
    except OSError:  # reset: the worker was killed
        status = None
    if status is None:
        sys.exit(f"icl_gd.common.warm: the worker at {path} ended before the job did")
    sys.exit(_STATUS.unpack(status)[0])


def _starting(folder: str) -> bool:
    """Whether the worker of this folder is alive (and so, without its identity.json, importing)."""
    try:
        with open(os.path.join(folder, "pid")) as f:
            pid = int(f.read())
    except (OSError, ValueError):
        return False
    return _alive(pid)


def peer_is_us(conn: socket.socket) -> tuple[bool, int, int]:
    """Whether the process at the other end of a Unix socket runs as this process's user (the
    kernel's SO_PEERCRED, which the peer cannot forge), and its pid and uid. The worker runs any
    script a connection hands it, so it serves its own user alone, as ``delegate`` checks that the
    socket it talks to is the worker's."""
    peer_pid, peer_uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return peer_uid == os.getuid(), peer_pid, peer_uid


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


# ------------------------------------------------------------------------------------------------
# Starting and stopping, from the Snakemake main process.


_servers: dict[str, subprocess.Popen] = {}  # socket -> the worker this process started


def start_server(log_path: str, preload: list[str] | None = None, parent: int | None = None) -> str:
    """Start a worker in the background and return its socket path (it becomes usable once its
    identity.json appears, after the imports). It exits when stopped or when ``parent`` (this
    process by default) is gone."""
    folder = tempfile.mkdtemp(prefix="icl-gd-warm-", dir="/tmp" if os.path.isdir("/tmp") else None)  # 0700
    path = os.path.join(folder, "socket")
    src = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))  # the folder holding icl_gd/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    cmd = [
        sys.executable,
        "-m",
        "icl_gd.common.warm",
        "serve",
        "--socket",
        path,
        "--parent",
        str(parent or os.getpid()),
    ]
    if preload is not None:
        cmd += ["--preload", ",".join(preload)]
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    with open(log_path, "w") as log:
        _servers[path] = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    write_text(os.path.join(folder, "pid"), str(_servers[path].pid))  # for the jobs that wait for it
    return path


def stop_server(path: str) -> None:
    """Ask the worker to exit once its running jobs end; nothing if it is already gone."""
    request = json.dumps({"stop": True}).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            sock.sendall(_HEADER.pack(len(request)) + request)
    except OSError:
        pass
    server = _servers.pop(path, None)
    if server is not None:  # started here: wait for it, leaving no zombie behind
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


# ------------------------------------------------------------------------------------------------
# Server.


def preload(names: list[str]) -> None:
    # numpy's OpenBLAS and pyarrow's jemalloc start a thread each at import without these; the
    # worker's own environment, not the jobs' (they get their client's)
    os.environ.update(OPENBLAS_NUM_THREADS="1", JE_ARROW_MALLOC_CONF="background_thread:false", MPLBACKEND="Agg")
    import importlib

    for name in names:
        module, _, attr = name.partition(":")
        imported = importlib.import_module(module)
        if attr:
            getattr(imported, attr)  # transformers' lazy classes import their modules on access
    if "transformers" in sys.modules:
        _build_conversion_table()


def _build_conversion_table() -> None:
    """transformers builds its table of checkpoint conversions (~1000 regular expressions, ~0.1 s)
    at a process's first from_pretrained or save_pretrained and keeps it in a module global: built
    here, every job inherits it instead of building its own. Pure Python: no torch op, no thread."""
    try:
        from transformers import conversion_mapping

        conversion_mapping.get_checkpoint_conversion_mapping("llama")
    except (ImportError, AttributeError):  # another transformers version: the jobs build their own
        pass


def _threads() -> list[str]:
    tasks = os.listdir("/proc/self/task")
    return [open(f"/proc/self/task/{task}/comm").read().strip() for task in tasks]


class _Server:
    def __init__(self, path: str, parent: int):
        self.path, self.parent = path, parent
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        # A job's end wakes the loop at once: SIGCHLD through a self-pipe.
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ)
        self.sel.register(self.wake_r, selectors.EVENT_READ)
        self.jobs: dict[int, list] = {}  # pid -> [client connection (None once gone), script, start]
        self.dying: dict[int, float] = {}  # pid -> when to SIGKILL its process group
        self.stopping = False

    def loop(self) -> None:
        try:
            while self.jobs or not self.stopping:
                for key, _ in self.sel.select(timeout=0.5):
                    if key.fileobj is self.listener:
                        self.accept()
                    elif key.fileobj is self.wake_r:
                        while len(os.read(self.wake_r, 512)) == 512:
                            pass
                    else:  # a client's connection turns readable only when it hangs up
                        self.client_gone(key.data)
                self.reap()
                for pid, deadline in list(self.dying.items()):
                    if time.monotonic() > deadline:
                        _killpg(pid, signal.SIGKILL)
                        del self.dying[pid]
                if not self.stopping and not _alive(self.parent):
                    print(f"icl_gd.common.warm: parent process {self.parent} is gone", flush=True)
                    self.stopping = True
                if self.stopping and self.listener.fileno() >= 0:  # no new jobs; the running ones finish
                    self.sel.unregister(self.listener)
                    self.listener.close()
                    shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)
        finally:  # the worker itself killed: nobody would hear of its jobs, so they go too
            for pid in self.jobs:
                _killpg(pid, signal.SIGKILL)

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        allowed, peer_pid, peer_uid = peer_is_us(conn)
        if not allowed:  # the 0700 folder keeps others out; this holds should it ever not
            print(
                f"icl_gd.common.warm: refused a connection from process {peer_pid} of user {peer_uid} "
                f"(this worker runs jobs for user {os.getuid()} only)",
                flush=True,
            )
            conn.close()
            return
        conn.settimeout(5)  # a request comes at once; a client that stalls must not stall the server
        fds = []
        try:
            header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
            header += _recv_exactly(conn, _HEADER.size - len(header)) or b""
            request = json.loads(_recv_exactly(conn, _HEADER.unpack(header)[0]) or b"")
            if request.get("stop"):
                self.stopping = True
            elif len(fds) != 3:
                raise ValueError(f"{len(fds)} file descriptors, not stdin, stdout and stderr")
        except (OSError, ValueError, AttributeError, struct.error) as e:
            print(f"icl_gd.common.warm: bad request ({e!r})", flush=True)
            request = {}
        if not request or self.stopping:
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.sel.close()
            for sock in (self.listener, conn, *(job[0] for job in self.jobs.values() if job[0])):
                sock.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            _run_job(request, fds)
        try:
            os.setpgid(pid, pid)  # here too, so that killing its group cannot race with its setpgid
        except OSError:
            pass
        for fd in fds:
            os.close(fd)
        conn.setblocking(False)
        self.sel.register(conn, selectors.EVENT_READ, pid)
        self.jobs[pid] = [conn, os.path.basename(request["script"]), time.monotonic()]

    def client_gone(self, pid: int) -> None:
        conn = self.jobs[pid][0]
        self.sel.unregister(conn)
        conn.close()
        self.jobs[pid][0] = None
        print(f"icl_gd.common.warm: the client of job {pid} is gone; killing the job", flush=True)
        _killpg(pid, signal.SIGTERM)
        self.dying[pid] = time.monotonic() + KILL_GRACE_S

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # death by a signal, as a shell reports it
            self.dying.pop(pid, None)
            conn, script, start = self.jobs.pop(pid)
            print(
                f"icl_gd.common.warm: job {pid} ({script}) exited {code} after {time.monotonic() - start:.2f} s",
                flush=True,
            )
            if conn is not None:
                self.sel.unregister(conn)
                try:
                    conn.setblocking(True)
                    conn.sendall(_STATUS.pack(code))
                except OSError:
                    pass
                conn.close()


def _run_job(request: dict, fds: list[int]) -> None:
    """In the forked child: become the job's process, as ``python script`` would be, and exit."""
    code = 1
    try:
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        for sig, handler in (
            (signal.SIGCHLD, signal.SIG_DFL),
            (signal.SIGTERM, signal.SIG_DFL),
            (signal.SIGINT, signal.default_int_handler),
        ):
            signal.signal(sig, handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"], **{CHILD_ENV: "1"})
        tempfile.tempdir = None  # TMPDIR is the job's (Snakemake's tmpdir resource), not the worker's
        if "numpy.random" in sys.modules:  # a process of its own would have drawn a fresh seed
            sys.modules["numpy.random"].seed()
        sys.stdin = sys.__stdin__ = open(0, closefd=False)
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))  # as for `python -u`, near enough
        sys.stdout = sys.__stdout__ = open(1, "w", buffering=1 if unbuffered else -1, closefd=False)
        sys.stderr = sys.__stderr__ = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(request["script"])  # as `python script` sets it
        import atexit
        import logging
        import runpy

        atexit._clear()  # the worker's exit handlers are not the job's; logging's flushes the job's logs
        atexit.register(logging.shutdown)
        try:
            runpy.run_path(request["script"], run_name="__main__")
            code = 0
        except SystemExit as e:  # as the interpreter turns its argument into an exit status
            code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:
            sys.excepthook(*sys.exc_info())
        atexit._run_exitfuncs()
    except BaseException:  # the set-up failed: say so where the job's stderr goes
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)  # never back into the server's loop or its clean-up


def _killpg(pid: int, sig: int) -> None:
    for kill in (os.killpg, os.kill):  # os.kill: the child may not lead its group yet
        try:
            return kill(pid, sig)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def serve(path: str, parent: int, modules: list[str]) -> int:
    started = time.monotonic()
    # before the imports: a file edited while they run may or may not be in the worker's copy
    announced = {**identity(), "pid": os.getpid()}
    try:
        preload(modules)
        if len(threads := _threads()) > 1:
            print(
                f"icl_gd.common.warm: not serving: the imports left {len(threads)} threads {threads}, and forking"
                " a process with threads is unsafe",
                flush=True,
            )
            return 1
        server = _Server(path, parent)
        folder = os.path.dirname(path)
        # written whole or not at all: the jobs take its presence for a usable worker
        write_text(os.path.join(folder, "identity.json"), json.dumps(announced))
        print(
            f"icl_gd.common.warm: {len(sys.modules)} modules imported in {time.monotonic() - started:.1f} s;"
            f" serving on {path}",
            flush=True,
        )
        server.loop()
        print("icl_gd.common.warm: stopped", flush=True)
        return 0
    finally:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m icl_gd.common.warm", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--socket", required=True, help="where to listen (in a folder of its own)")
    parser.add_argument("--parent", type=int, required=True, help="exit when this process is gone")
    parser.add_argument("--preload", help="comma-separated modules (module:attribute too); default: the jobs'")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    modules = list(DEFAULT_PRELOAD) if args.preload is None else [n for n in args.preload.split(",") if n]
    return serve(args.socket, args.parent, modules)


if __name__ == "__main__":
    from icl_gd.common.warm import main as _main  # the module's own copy, not this __main__ one

    sys.exit(_main())
