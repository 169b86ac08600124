"""What a job took: its benchmark record, written by the job itself when it exits.

One row in Snakemake's benchmark format (tab-separated, its column names where they mean the
same: ``s``, ``h:m:s``, ``max_rss``, ``io_in``, ``io_out`` in MB, ``mean_load`` in percent,
``cpu_time``), then what Snakemake's record lacks: ``gpu_max_mb`` (the most GPU memory torch held,
0 where the job used none), ``threads``, ``warm`` (1 where the job ran in the warm worker, so that
its imports were paid before it started), ``host`` and ``started`` (when its clock started, in
seconds since the epoch: with ``s``, where the job lay in the run, benchmarks/timeline.py); then
what the job noted of its own work (``note``: an extraction job's ``gflop``).

Why not Snakemake's own ``benchmark:`` directive: it samples the job's process tree with psutil,
at 30 s intervals after the first half second, and with the warm worker (common/warm.py) a job's
work runs in a process that the worker forks, outside that tree, so it would record the thin
client (tens of MB, no CPU). A job's own counts are exact instead: the kernel's high-water mark
of its resident set (``getrusage``'s ru_maxrss, not a sample; a forked job starts from the
worker's resident set, which its imports would have given it in a process of its own), the CPU
time of all its threads and the bytes it read and wrote (``/proc/self/io``).

The rules declare the record as a log (``log: benchmark=...``): Snakemake keeps it when a job
fails, where it says what the failed attempt took, and adding it to a finished run reruns nothing.
The clock starts where the job's script starts (``warm.delegate`` stamps it before handing the job
to the worker, so a warm job's time includes its wait for the fork); a record is written only by
a job that exits (not one killed by SIGKILL, as the kernel's out-of-memory killer does).
"""

from __future__ import annotations

import atexit
import csv
import datetime
import os
import resource
import socket
import sys
import time

from icl_gd.common.atomic import write_text

START_ENV = "ICL_GD_JOB_STARTED"  # epoch seconds at which the job's script started
COLUMNS = (
    "s",
    "h:m:s",
    "max_rss",
    "io_in",
    "io_out",
    "mean_load",
    "cpu_time",
    "gpu_max_mb",
    "threads",
    "warm",
    "host",
    "started",
)
MB = 2**20
_NOTES: dict[str, object] = {}  # what the job adds to its record (note), as further columns


def stamp_start() -> None:
    """Start the job's clock, once: the first call in a job's process (and its warm copy) wins."""
    os.environ.setdefault(START_ENV, repr(time.time()))


def started() -> float:
    stamp_start()
    return float(os.environ[START_ENV])


def _io_bytes() -> tuple[int, int]:
    """(read, written) bytes of storage I/O of this process; zeros where /proc has no io file."""
    try:
        with open("/proc/self/io") as f:
            fields = dict(line.split(": ") for line in f.read().splitlines())
        return int(fields["read_bytes"]), int(fields["write_bytes"])
    except (OSError, KeyError, ValueError):
        return 0, 0


def _gpu_max_mb() -> float:
    """The most memory torch's caching allocator reserved on any GPU this process used; 0 where
    it used none (torch never imported, or CUDA never initialised: asking must not start it)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return 0.0
    return max((torch.cuda.max_memory_reserved(i) for i in range(torch.cuda.device_count())), default=0) / MB


def measure(start: float, threads: int | None = None) -> dict:
    """This process's record so far, its clock started at ``start`` (epoch seconds)."""
    seconds = max(time.time() - start, 0.0)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    read, written = _io_bytes()
    return {
        "s": round(seconds, 4),
        "h:m:s": str(datetime.timedelta(seconds=round(seconds))),
        "max_rss": round(usage.ru_maxrss / 1024, 2),  # Linux reports kB
        "io_in": round(read / MB, 2),
        "io_out": round(written / MB, 2),
        "mean_load": round(100 * cpu / seconds, 2) if seconds else 0.0,
        "cpu_time": round(cpu, 2),
        "gpu_max_mb": round(_gpu_max_mb(), 2),
        "threads": threads or "",
        "warm": int(bool(os.environ.get("ICL_GD_WARM_CHILD"))),
        "host": socket.gethostname(),
        "started": round(start, 3),
    }


def note(**fields) -> None:
    """Add columns to this job's record, after Snakemake's and ours: what the job knows of its
    own work (an extraction job its FLOPs, ``gflop``)."""
    _NOTES.update(fields)


def write(path: str | os.PathLike, record: dict) -> None:
    columns = [*COLUMNS, *(key for key in record if key not in COLUMNS)]
    cells = ["\t".join(columns), "\t".join(str(record[c]) for c in columns)]
    write_text(path, "\n".join(cells) + "\n")


def record_at_exit(path: str | os.PathLike | None, threads: int | None = None) -> None:
    """Write this job's record to ``path`` when the process exits (a warm job: when its script
    ends, common/warm.py running the job's exit handlers). None: no record."""
    if not path:
        return
    start = started()
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    atexit.register(lambda: write(path, {**measure(start, threads), **_NOTES}))


def read(path: str | os.PathLike) -> dict:
    """A record as written (numbers as numbers); a Snakemake benchmark file reads too (its own
    columns, the first row)."""
    with open(path, newline="") as f:
        row = next(csv.DictReader(f, delimiter="\t"))
    out = {}
    for key, value in row.items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            out[key] = value
    return out
