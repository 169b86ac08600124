"""The cost estimate against what the run took: per rule and setting, the predicted and the measured
wall time (summed over the jobs) and peak memory (the largest job's), and their ratio.

    snakemake --cores all --configfile <config>                 # the run: every job's record
    snakemake cost_estimate --cores all --configfile <config>   # results/cost_estimate.tsv
    python benchmarks/cost_check.py [--workdir .] [--markdown]

Reads results/cost_estimate.tsv and each of its jobs' benchmark records
(results/benchmarks/<rule>/...tsv, common/benchmark.py); a job without a record is counted as
missing and left out of both sums.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from icl_gd.common import benchmark


def record_path(workdir: Path, row) -> Path:
    """Where the job of an estimate row wrote its record (the rules' log: benchmark= paths)."""
    base = workdir / "results/benchmarks"
    if row.rule == "build_builtin_model":
        return base / f"build_builtin_model/{row.model}.tsv"
    if row.rule == "choose_finetuning":  # one job per (model, task), no seed
        return base / f"choose_finetuning/{row.model}/{row.task}.tsv"
    run = f"extract/{row.model}/{row.variant}/{row.task}/seed{int(row.seed)}"
    order = int(row.order) if pd.notna(row.order) else 0
    return base / (f"{run}/order{order}/{row.setting}.tsv" if order else f"{run}/{row.setting}.tsv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", default=".", help="the run's folder")
    parser.add_argument(
        "--markdown", action="store_true", help="the table in Markdown, as docs/performance.md shows it"
    )
    args = parser.parse_args()
    workdir = Path(args.workdir)
    estimate = pd.read_csv(workdir / "results/cost_estimate.tsv", sep="\t", keep_default_na=True)
    measured_s, measured_mb = [], []
    for row in estimate.itertuples():
        path = record_path(workdir, row)
        record = benchmark.read(path) if path.exists() else {}
        measured_s.append(record.get("s"))
        measured_mb.append(record.get("max_rss"))
    estimate["measured_s"] = pd.to_numeric(pd.Series(measured_s), errors="coerce")
    estimate["measured_mb"] = pd.to_numeric(pd.Series(measured_mb), errors="coerce")
    estimate["setting"] = estimate["setting"].fillna("-")
    both = estimate.dropna(subset=["measured_s"])
    print(f"{len(both)} of {len(estimate)} estimated jobs have a record\n")
    rows = [
        (
            rule,
            setting,
            len(jobs),
            jobs["seconds"].sum(),
            jobs["measured_s"].sum(),
            jobs["peak_mb"].max(),
            jobs["measured_mb"].max(),
        )
        for (rule, setting), jobs in both.groupby(["rule", "setting"], sort=False)
    ]
    rows.append(("all", "", len(both), both["seconds"].sum(), both["measured_s"].sum(), None, None))
    if args.markdown:
        print("| rule | setting | jobs | predicted | measured | ratio | peak predicted | peak measured |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for rule, setting, n, p, m, pmb, mmb in rows:
            peaks = f"{pmb:,.0f} MB | {mmb:,.0f} MB" if pmb is not None else " | "
            print(
                f"| {rule} | {setting if setting != '-' else ''} | {n} | {p:.1f} s | {m:.1f} s | {p / m:.2f} | {peaks} |"
            )
        return
    print(
        f"{'rule':22s} {'setting':14s} {'jobs':>5s} {'predicted':>10s} {'measured':>10s} {'ratio':>6s} {'peak pred.':>11s} {'peak meas.':>11s}"
    )
    for rule, setting, n, p, m, pmb, mmb in rows:
        peaks = f" {pmb:9,.0f}MB {mmb:9,.0f}MB" if pmb is not None else ""
        print(f"{rule:22s} {setting:14s} {n:5d} {p:9.1f}s {m:9.1f}s {p / m:6.2f}{peaks}")


if __name__ == "__main__":
    main()
