"""Process set-up shared by the workflow's entry points: logging into the rule's log file, and a
CUDA device for a job, shared with at most a set number of other jobs.

Imports nothing else of the package, and not torch: the Snakefile asks it whether model jobs need
a GPU.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, MutableMapping

from icl_gd.common.atomic import remove_stale
from icl_gd.common.benchmark import record_at_exit

log = logging.getLogger(__name__)

# Lock files live here, not in $TMPDIR: Snakemake points a job's TMPDIR at its `tmpdir` resource,
# which may differ between jobs of one machine, and the locks must be seen by all of them.
LOCK_ROOT = Path("/tmp")
_held_locks: list[int] = []  # kept open (and so locked) until the process ends


def log_to(path: str, threads: int | None = None, benchmark: str | None = None, outputs: Iterable[str] = ()) -> None:
    """Send stdout, stderr (tqdm, warnings, library messages) and logging to ``path``.

    The file descriptors themselves are redirected, so output from C extensions lands there too.
    ``threads`` caps the BLAS/OpenMP threads of this process before torch is imported.
    ``benchmark``: where the job writes its benchmark record when it exits (common/benchmark.py).
    ``outputs``: the job's outputs, whose temporary files a killed earlier job left are removed.
    """
    record_at_exit(benchmark, threads)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr, force=True
    )
    logging.captureWarnings(True)
    for stale in remove_stale(*outputs):
        log.info("removed %s, left by a job that was killed while writing it", stale)
    if threads:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)


def visible_gpus(environ: MutableMapping[str, str] | None = None, count: int | None = None) -> list[str]:
    """The CUDA devices a job may use, named as CUDA_VISIBLE_DEVICES names them.

    A CUDA_VISIBLE_DEVICES already set is honoured: SLURM sets it to a job's allocated GPUs, and
    users set it to fence GPUs off; like CUDA, it is read up to its first negative entry.
    Otherwise the machine's GPUs are counted (``count``, or ``nvidia-smi``), not with
    ``torch.cuda.device_count()``, which initialises CUDA, after which setting the variable has
    no effect.
    """
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in environ:
        gpus = []
        for entry in environ["CUDA_VISIBLE_DEVICES"].split(","):
            entry = entry.strip()
            if not entry or entry.startswith("-"):
                break
            gpus.append(entry)
        return gpus
    if count is None:
        count = _nvidia_smi_count()
    return [str(i) for i in range(count)]


def _nvidia_smi_count() -> int:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0  # no driver, no GPU
    return sum(1 for line in out.splitlines() if line.strip())


def wants_gpu(device: str, environ: MutableMapping[str, str] | None = None, count: int | None = None) -> bool:
    """Whether a model job with the config's ``device`` runs on CUDA: asked for by name, or
    ``auto`` with a GPU in sight."""
    return device.startswith("cuda") or (device == "auto" and bool(visible_gpus(environ, count)))


def lock_dir(environ: MutableMapping[str, str] | None = None, root: Path | str | None = None) -> Path:
    """Where a job's GPU locks live: one folder per user and machine, or per SLURM allocation.

    Jobs of two SLURM allocations on one node may both see their own, different, GPU as device
    0; their locks must not meet.
    """
    environ = os.environ if environ is None else environ
    name = f"icl-gd-gpu-locks-uid{os.getuid()}"
    if environ.get("SLURM_JOB_ID"):
        name += f"-slurm{environ['SLURM_JOB_ID']}"
    return Path(root or LOCK_ROOT) / name


def jobs_per_gpu(cap: int | None, n_gpus: int) -> int:
    """How many model jobs share one GPU: the gpu cap (model jobs on GPUs at once, over all
    GPUs) spread over ``n_gpus``, rounded up.

    Without a cap, or without a GPU, 1: a device per job and the other jobs wait, as no one
    asked for jobs to share a GPU's memory.
    """
    if cap is None or n_gpus < 1:
        return 1
    return max(1, math.ceil(cap / n_gpus))


def _slot_path(folder: Path, gpu: str, slot: int) -> Path:
    return folder / f"cuda-{re.sub(r'[^A-Za-z0-9_.-]', '_', gpu)}.slot{slot}.lock"


def _flock(path: Path, flags: int) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, flags)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def try_lock(gpus: list[str], folder: Path, jobs_per_gpu: int = 1) -> tuple[str, int] | None:
    """Lock a free slot of the device among ``gpus`` with the fewest slots held: (device, open
    lock fd), or None when every slot of every device is held. Ties go to the first device.

    flock locks go with the open file, so a crashed job never leaves a stale lock behind.
    """
    folder.mkdir(parents=True, exist_ok=True)
    # Counting held slots means taking every free one for a moment; one claim at a time, so that
    # a job starting alongside neither miscounts nor finds all slots taken by the counting.
    guard = _flock(folder / "claim.lock", fcntl.LOCK_EX)
    try:
        free = {gpu: [] for gpu in gpus}
        for gpu in gpus:
            for slot in range(jobs_per_gpu):
                fd = _flock(_slot_path(folder, gpu, slot), fcntl.LOCK_EX | fcntl.LOCK_NB)
                if fd is not None:
                    free[gpu].append(fd)
        best = max(gpus, key=lambda gpu: len(free[gpu]))  # the first of the least held
        claim = (best, free[best].pop(0)) if free[best] else None
        for fds in free.values():
            for fd in fds:
                os.close(fd)
        return claim
    finally:
        os.close(guard)


def claim_gpu(
    device: str = "auto",
    *,
    jobs_per_gpu: int = 1,
    environ: MutableMapping[str, str] | None = None,
    count: int | None = None,
    lock_root: Path | str | None = None,
    poll_s: float = 5.0,
    timeout_s: float | None = None,
) -> str | None:
    """Give this job a CUDA device that at most ``jobs_per_gpu - 1`` other jobs hold, for the
    life of the process.

    Snakemake counts GPUs (``resources: gpu``) but does not say which one a job gets, and CUDA
    gives every process device 0: the jobs of a several-GPU machine would pile onto it. A slot of
    the least busy device is locked and CUDA_VISIBLE_DEVICES set to that device alone, so
    ``auto`` and ``cuda`` mean that one; call this before CUDA is initialised. Where every slot
    is held, the job waits for one rather than crowd a device further. Returns the device, or
    None for a CPU job or an explicit ``cuda:<n>``, which is left as it is.
    """
    if not isinstance(jobs_per_gpu, int) or jobs_per_gpu < 1:
        raise ValueError(f"jobs_per_gpu must be a whole number of at least 1, not {jobs_per_gpu!r}")
    environ = os.environ if environ is None else environ
    if device not in ("auto", "cuda"):
        return None
    gpus = visible_gpus(environ, count)
    if not gpus:
        return None
    folder = lock_dir(environ, lock_root)
    started = time.monotonic()
    waiting = False
    while (claim := try_lock(gpus, folder, jobs_per_gpu)) is None:
        if timeout_s is not None and time.monotonic() - started >= timeout_s:
            raise TimeoutError(
                f"all {jobs_per_gpu} slot(s) of every GPU of {gpus} stayed held by other jobs for {timeout_s} s"
                f" (locks in {folder})"
            )
        if not waiting:
            log.info(
                "all %d slot(s) of every GPU of %s are held by other jobs (locks in %s); waiting for one",
                jobs_per_gpu,
                gpus,
                folder,
            )
            waiting = True
        time.sleep(poll_s)
    gpu, fd = claim
    _held_locks.append(fd)
    environ["CUDA_VISIBLE_DEVICES"] = gpu
    log.info("using GPU %s of %s, shared by up to %d jobs (CUDA_VISIBLE_DEVICES=%s)", gpu, gpus, jobs_per_gpu, gpu)
    return gpu
