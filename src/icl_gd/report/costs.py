"""What the run cost: the jobs' benchmark records (common/benchmark.py), by rule and setting.

The report's ``costs`` table: per rule (the model jobs, extraction and finetuning by setting, the
scoring and the analyses that read every run) how many jobs ran, how many left a record, their
mean and total wall time, their CPU time, and the largest resident set and GPU memory of any of
them. A job that left no record (a run finished before the workflow wrote them; a job killed by
the kernel) is counted and said to be missing, never guessed. ``flops`` (a column per setting) is
the run's count of floating-point operations per setting where the caller has one.
"""

from __future__ import annotations

import os

import pandas as pd

from icl_gd.common import benchmark
from icl_gd.report.tables import MISSING

COLUMNS = ["rule", "setting", "path"]


def read_records(entries: list[dict]) -> pd.DataFrame:
    """One row per planned job (``entries``: rule, setting, path of its record), with the record's
    numbers where the job left one (NaN where not)."""
    rows = []
    for entry in entries:
        row = {key: entry[key] for key in COLUMNS}
        if os.path.exists(entry["path"]):
            record = benchmark.read(entry["path"])
            row.update(
                seconds=record["s"],
                cpu_seconds=record["cpu_time"],
                peak_mb=record["max_rss"],
                gpu_peak_mb=record.get("gpu_max_mb", 0.0),
                warm=record.get("warm", 0.0),
                gflop=record.get("gflop"),
            )
        rows.append(row)
    numbers = ("seconds", "cpu_seconds", "peak_mb", "gpu_peak_mb", "warm", "gflop")
    return pd.DataFrame(rows, columns=[*COLUMNS, *numbers]).astype({c: float for c in numbers})


def _duration(seconds: float) -> str:
    if pd.isna(seconds):
        return MISSING
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _mb(value: float) -> str:
    return MISSING if pd.isna(value) or value == 0 else f"{value:,.0f}"


def costs_table(records: pd.DataFrame) -> pd.DataFrame:
    """The report's ``costs`` table from :func:`read_records`' frame: one row per (rule, setting) in
    the order the rows first appear, then a total; the FLOPs that the jobs counted of their own
    work where they did (extraction, finetuning, pretraining)."""
    body, index = [], []
    for (rule, setting), jobs in records.groupby(["rule", "setting"], sort=False, dropna=False):
        measured = jobs.dropna(subset=["seconds"])
        index.append((rule, setting if isinstance(setting, str) and setting else "—"))
        body.append(_cells(jobs, measured))
    measured = records.dropna(subset=["seconds"])
    index.append(("all", "—"))
    body.append(_cells(records, measured))
    table = pd.DataFrame(
        body,
        index=pd.MultiIndex.from_tuples(index, names=["Rule", "Setting"]),
        columns=["Jobs", "Recorded", "Mean wall", "Total wall", "Total CPU", "Peak RSS (MB)", "Peak GPU (MB)", "TFLOP"],
        dtype=object,
    )
    warm = int(measured["warm"].sum())
    notes = [
        "Wall time from each job's start to its exit, CPU time of all its threads, peak resident set "
        "(the kernel's high-water mark) and GPU memory torch reserved: each job's own record "
        "(results/benchmarks/<rule>/...tsv, Snakemake's benchmark columns)."
    ]
    if warm:
        notes.append(
            f"{warm} of {len(measured)} jobs ran in the warm worker: their imports (torch, transformers: "
            "~9 s a job on 2 CPU cores) were paid once for the run, before they started."
        )
    missing = len(records) - len(measured)
    if missing:
        notes.append(
            f"{missing} of {len(records)} jobs left no record (run before the workflow wrote them, or killed): "
            "their time is not in the totals."
        )
    if measured["gflop"].notna().any():
        notes.append("TFLOP: the jobs' own count of their work (activations/work.py), as the cost estimate counts it.")
    else:
        table = table.drop(columns="TFLOP")
    table.attrs.update(best=[], footnotes=notes, table="costs")
    return table


def _cells(jobs: pd.DataFrame, measured: pd.DataFrame) -> list[str]:
    n = len(measured)
    counted = measured["gflop"].dropna()
    return [
        f"{len(jobs):,}",
        f"{n:,}",
        _duration(measured["seconds"].mean()) if n else MISSING,
        _duration(measured["seconds"].sum()) if n else MISSING,
        _duration(measured["cpu_seconds"].sum()) if n else MISSING,
        _mb(measured["peak_mb"].max()) if n else MISSING,
        _mb(measured["gpu_peak_mb"].max()) if n else MISSING,
        f"{counted.sum() / 1e3:,.3g}" if len(counted) else MISSING,
    ]
