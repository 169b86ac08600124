"""What each model job asks its scheduler for (``mem_mb``, ``runtime``), from the cost estimate.

``snakemake cost_estimate`` writes every model job's predicted wall time and peak memory on the
machine it ran on (``icl_gd.planning.cost``; run it where the jobs will run: as a SLURM job
through the profile, it calibrates on a compute node). The rules' resource callables read that table: a
job asks for its predicted peak memory times ``MEM_SAFETY`` and its predicted time times
``TIME_SAFETY`` plus ``TIME_MARGIN_MIN`` (a queue's job start, a cold page cache), and each retry
(``attempt``, the profile's ``retries``) asks for that again times the attempt, so that a job
killed for memory or time is retried larger. A job the table does not list (no estimate yet, or
one of another config) asks for its rule's fallback, also grown by attempt.

``check_limits`` refuses a plan, before anything is submitted, where a job's first request
exceeds the limits of the partition it goes to (config key ``partition_limits``, which the SLURM
profile sets), naming the jobs and the numbers. A retry's request is capped at the limits.

Reads the table with the csv module: the Snakefile imports this when it is parsed.
"""

from __future__ import annotations

import csv
import math
import os

MEM_SAFETY = 1.5
TIME_SAFETY = 2.0
TIME_MARGIN_MIN = 5
MIN_MEM_MB = 1000
ESTIMATE = "results/cost_estimate.tsv"
KEYS = ("model", "variant", "task", "seed", "order", "setting")  # unique among the model jobs


def _key(values: dict) -> tuple:
    """A job's key in the estimate: its wildcards, numbers as plain integers (a rule that
    ``use rule``s another shares its resource callables, so the rule's name is no part of it)."""
    out = []
    for k in KEYS:
        v = values.get(k)
        if v in (None, ""):
            out.append("")
        elif k in ("seed", "order"):
            out.append(str(int(float(v))))
        else:
            out.append(str(v))
    if out[KEYS.index("order")] == "":
        out[KEYS.index("order")] = "0"
    if out[KEYS.index("variant")] and not out[KEYS.index("setting")]:
        out[KEYS.index("setting")] = "zsl"  # extract_zsl's path has no setting
    return tuple(out)


def read_estimate(path: str | os.PathLike = ESTIMATE) -> dict[tuple, tuple[str, float, float]]:
    """The estimate's jobs: key -> (rule, seconds, peak MB); empty where there is none."""
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return {
        _key(row): (row["rule"], float(row["seconds"]), float(row["peak_mb"])) for row in rows if row.get("seconds")
    }


def lookup(estimate: dict, wildcards) -> tuple[float, float] | None:
    """A planned job's (seconds, peak MB) from its wildcards; None where the estimate has none."""
    found = estimate.get(_key(dict(wildcards.items())))
    return None if found is None else found[1:]


def _limits(limits: dict) -> dict:
    """The set limits as integers (``--config`` hands them over as text)."""
    return {k: int(v) for k, v in (limits or {}).items() if v not in (None, "")}


def request(estimate: tuple[float, float] | None, fallback: tuple[int, int], attempt: int, limits: dict) -> dict:
    """``{"mem_mb", "runtime"}`` (MB, minutes) for a job's ``attempt``-th try: from its estimate
    (seconds, peak MB), else the rule's fallback (MB, minutes); capped at ``limits``."""
    limits = _limits(limits)
    if estimate is None:
        mem_mb, runtime = fallback[0] * attempt, fallback[1] * attempt
    else:
        seconds, peak = estimate
        mem_mb = max(MIN_MEM_MB, math.ceil(peak * MEM_SAFETY * attempt))
        runtime = math.ceil(seconds * TIME_SAFETY * attempt / 60) + TIME_MARGIN_MIN
    if limits.get("mem_mb"):
        mem_mb = min(mem_mb, int(limits["mem_mb"]))
    if limits.get("runtime"):
        runtime = min(runtime, int(limits["runtime"]))
    return {"mem_mb": int(mem_mb), "runtime": int(runtime)}


def check_limits(estimate: dict[tuple, tuple[str, float, float]], limits: dict) -> None:
    """Stop with the numbers where a job's first request exceeds ``limits`` (mem_mb, runtime)."""
    limits = _limits(limits)
    if not estimate or not (limits.get("mem_mb") or limits.get("runtime")):
        return
    over = []
    for key, (rule, seconds, peak) in estimate.items():
        mem_mb = max(MIN_MEM_MB, math.ceil(peak * MEM_SAFETY))
        runtime = math.ceil(seconds * TIME_SAFETY / 60) + TIME_MARGIN_MIN
        reasons = []
        if limits.get("mem_mb") and mem_mb > limits["mem_mb"]:
            reasons.append(f"{mem_mb:,} MB of memory (peak {peak:,.0f} MB x {MEM_SAFETY})")
        if limits.get("runtime") and runtime > limits["runtime"]:
            reasons.append(f"{runtime:,} min (predicted {seconds / 60:,.1f} min x {TIME_SAFETY} + {TIME_MARGIN_MIN})")
        if reasons:
            name = "/".join(f"{k}={v}" for k, v in zip(KEYS, key) if v not in ("", "0") or k == "seed")
            over.append(f"{rule} {name}: asks for {' and '.join(reasons)}")
    if over:
        shown = "\n  ".join(over[:10]) + (f"\n  ... and {len(over) - 10} more" if len(over) > 10 else "")
        raise ValueError(
            f"{len(over)} job(s) would exceed the partition's limits (config partition_limits: "
            f"{ {k: v for k, v in limits.items() if v} }), by the cost estimate in {ESTIMATE}:\n  {shown}\n"
            "Use a partition with more memory or time (the profile's slurm_partition and partition_limits), "
            "a smaller batch_size or dtype, or split the work (fewer examples: max_eval)"
        )
