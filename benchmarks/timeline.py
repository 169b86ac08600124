"""Where a finished run's time went, from its jobs' own records: per rule, when its first job
started and its last ended, and the job- and CPU-seconds of its jobs.

    snakemake --cores all --quiet       # a run from scratch: every job writes its record
    python benchmarks/timeline.py [--workdir .] [--cores N]

Reads every record under results/benchmarks (common/benchmark.py): a job's ``started`` and ``s``
say where it lay in the run (a record without ``started``, written before the column existed,
is placed by its file's modification time, written as the job exited). Times are seconds after
the first job started. The rules are listed in the order they started, so that the phases of the
run read top to bottom; a rule whose span overlaps the next ran beside it.

The total under the table sets the jobs' CPU-seconds against what ``--cores`` cores could give
over the span: the rest of a run's CPU is Snakemake itself, the process each job starts (with the
warm worker, the client that hands it the job) and the worker's imports, none of which writes a
record. Records of earlier runs in the same folder would stretch the span: time a run from
scratch (``rm -rf results resources/synthetic resources/models .snakemake``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import NamedTuple

from icl_gd.common import benchmark


class Phase(NamedTuple):
    rule: str
    jobs: int
    first_start: float
    last_end: float
    job_s: float
    cpu_s: float


def rule_of(path: Path, root: Path) -> str:
    """The rule a record belongs to: its first folder under ``root``, or its name for a rule
    with one job (results/benchmarks/<rule>.tsv)."""
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else path.stem


def span_of(path: Path, record: dict) -> tuple[float, float]:
    """(start, end) of a job in seconds since the epoch."""
    seconds = float(record["s"])
    started = record.get("started")
    if isinstance(started, float):
        return started, started + seconds
    end = path.stat().st_mtime
    return end - seconds, end


def phases(root: Path) -> list[Phase]:
    """One phase per rule, in the order the rules started, times relative to the first job's start."""
    spans: dict[str, list[tuple[float, float, float]]] = {}  # rule: (start, end, CPU) per job
    for path in sorted(root.rglob("*.tsv")):
        record = benchmark.read(path)
        spans.setdefault(rule_of(path, root), []).append((*span_of(path, record), float(record["cpu_time"])))
    if not spans:
        raise SystemExit(f"no job records under {root}: run the workflow first")
    t0 = min(start for jobs in spans.values() for start, *_ in jobs)
    out = [
        Phase(
            rule=rule,
            jobs=len(jobs),
            first_start=min(j[0] for j in jobs) - t0,
            last_end=max(j[1] for j in jobs) - t0,
            job_s=sum(end - start for start, end, _ in jobs),
            cpu_s=sum(j[2] for j in jobs),
        )
        for rule, jobs in spans.items()
    ]
    return sorted(out, key=lambda p: (p.first_start, p.rule))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("."), help="the run's folder")
    parser.add_argument("--cores", type=int, default=os.cpu_count(), help="cores the run had (default: this machine's)")
    args = parser.parse_args()
    table = phases(args.workdir / "results/benchmarks")
    print(f"{'rule':24s} {'jobs':>5s} {'first start':>12s} {'last end':>9s} {'job-s':>8s} {'CPU-s':>8s}")
    for p in table:
        print(f"{p.rule:24s} {p.jobs:5d} {p.first_start:12.1f} {p.last_end:9.1f} {p.job_s:8.1f} {p.cpu_s:8.1f}")
    span = max(p.last_end for p in table)
    cpu = sum(p.cpu_s for p in table)
    print(
        f"\n{sum(p.jobs for p in table)} jobs over {span:.1f} s; their CPU {cpu:.1f} s, "
        f"{100 * cpu / (span * args.cores):.0f}% of {args.cores} cores over that span"
    )


if __name__ == "__main__":
    main()
