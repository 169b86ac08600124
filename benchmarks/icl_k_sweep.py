"""Where ICL works: ZSL and ICL accuracy at each k, per model and task, from the workflow's own caches.

    python benchmarks/icl_k_sweep.py --targets                       # the caches to ask snakemake for
    python benchmarks/icl_k_sweep.py --dir /work/ksweep [--out table.csv] [--wide]

The config (``configs/icl-k-sweep.yaml`` by default) names the models and tasks; each task runs with its
protocol seeds (the config's ``n_seeds`` honoured). ICL at k demonstrations is the setting ``icl_k<k>``,
at the config's ``k`` plain ``icl``; ZSL's cache is the task's first seed's ``zsl.arrow`` (it uses no
demonstrations). For every model, task and k this prints the accuracy of ZSL and of ICL (mean ± sample
sd over the seeds, and each seed's), ICL's collapse share (per seed, the share of the evaluation
examples given ICL's most-predicted class, and that class), and the majority rate (the share of the
evaluation examples in their most frequent gold class). ICL *learns in context* at a k where every
seed is above both ZSL and the majority rate and the mean gain over the higher of the two is beyond
the seeds' noise: a one-sided t-test over the seeds (t = gain / (sd / sqrt(n)) above the 95% quantile
of Student's t with n - 1 degrees of freedom; 2.92 for three seeds).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from collections import Counter
from pathlib import Path

import yaml
from scipy import stats

from icl_gd.activations.cache import read_cache
from icl_gd.config import resolve as cfg

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO / "configs/icl-k-sweep.yaml"
KS = (4, 8, 16, 32)
CACHE = "results/activations/{model}/trained/{task}/seed{seed}/{setting}.arrow"


def icl_setting(k: int, config_k: int) -> str:
    """The workflow's name of ICL at k demonstrations (plan: the config's k is plain icl)."""
    return "icl" if k == config_k else f"icl_k{k}"


def cache_paths(config: dict, ks=KS) -> list[dict]:
    """Every cache the sweep reads: (model, task, seed, setting, k, path); ZSL has k None."""
    rows = []
    for model in config["models"]:
        for task in config["tasks"]:
            seeds = cfg.task_seeds(config, task)
            rows.append(dict(model=model, task=task, seed=seeds[0], setting="zsl", k=None))
            for seed in seeds:
                for k in ks:
                    rows.append(dict(model=model, task=task, seed=seed, setting=icl_setting(k, config["k"]), k=k))
    for row in rows:
        row["path"] = CACHE.format(**row)
    return rows


def collapse(pred) -> tuple[int, float]:
    """The most-predicted class and the share of the examples given it."""
    label, count = Counter(int(p) for p in pred).most_common(1)[0]
    return label, count / len(pred)


def learns(icl: list[float], baseline: float, alpha: float = 0.05) -> tuple[float, float, bool]:
    """ICL's mean gain over ``baseline`` (the higher of ZSL and the majority rate), the t of that gain
    over the seeds, and whether every seed is above the baseline and t beyond the one-sided quantile."""
    gains = [a - baseline for a in icl]
    gain = statistics.fmean(gains)
    sd = statistics.stdev(gains) if len(gains) > 1 else 0.0
    t = math.inf if sd == 0 and gain > 0 else (gain / (sd / math.sqrt(len(gains))) if sd > 0 else 0.0)
    critical = stats.t.ppf(1 - alpha, len(gains) - 1) if len(gains) > 1 else math.inf
    return gain, t, bool(min(gains) > 0 and t > critical)


def measure(config: dict, folder: Path, ks=KS) -> list[dict]:
    """One row per (model, task, setting, seed) with its accuracy and prediction distribution."""
    out = []
    for row in cache_paths(config, ks):
        run = read_cache(folder / row["path"])
        gold = run.gold.astype(int)
        label, share = collapse(run.pred)
        out.append(
            {
                **{key: row[key] for key in ("model", "task", "seed", "setting", "k")},
                "n": len(gold),
                "accuracy": float((run.pred == run.gold).mean()),
                "top_class": label,
                "collapse_share": share,
                "majority_rate": Counter(gold.tolist()).most_common(1)[0][1] / len(gold),
                "true_k": run.meta.get("true_k"),
                "separator": run.meta.get("demo_separator", "eos"),  # caches from before the key: eos
                "example_ids": tuple(int(x) for x in run.example_id),
            }
        )
    return out


def summarise(rows: list[dict], ks=KS) -> list[dict]:
    """Per model, task and k: ZSL, the majority rate, ICL over the seeds, collapse, the verdict."""
    table = []
    for model, task in dict.fromkeys((r["model"], r["task"]) for r in rows):
        runs = [r for r in rows if r["model"] == model and r["task"] == task]
        zsl = next(r for r in runs if r["setting"] == "zsl")
        separators = {r["separator"] for r in runs}
        if len(separators) > 1:
            raise ValueError(f"{model} {task}: caches made with different separators {sorted(separators)}")
        for k in ks:
            icl = sorted((r for r in runs if r["k"] == k), key=lambda r: r["seed"])
            if any(r["example_ids"] != zsl["example_ids"] for r in icl):
                raise ValueError(f"{model} {task} k={k}: ICL and ZSL evaluated different examples")
            acc = [r["accuracy"] for r in icl]
            baseline = max(zsl["accuracy"], zsl["majority_rate"])
            gain, t, verdict = learns(acc, baseline)
            table.append(
                {
                    "model": model,
                    "separator": zsl["separator"],
                    "task": task,
                    "k": k,
                    "n": zsl["n"],
                    "zsl": zsl["accuracy"],
                    "majority": zsl["majority_rate"],
                    "icl_mean": statistics.fmean(acc),
                    "icl_sd": statistics.stdev(acc) if len(acc) > 1 else 0.0,
                    "icl_seeds": acc,
                    "seeds": [r["seed"] for r in icl],
                    "true_k": [r["true_k"] for r in icl],
                    "collapse": [(r["top_class"], r["collapse_share"]) for r in icl],
                    "gain": gain,
                    "t": t,
                    "learns": verdict,
                }
            )
    return table


def pct(x: float) -> str:
    return f"{100 * x:.0f}"


def markdown(table: list[dict]) -> str:
    lines = [
        "| model | task | k | ZSL | majority | ICL mean ± sd | ICL per seed | collapse (class: share) | true k | gain | learns |",
        "|---|---|---:|---:|---:|---:|---|---|---|---:|---|",
    ]
    for r in table:
        seeds = ", ".join(f"{pct(a)}" for a in r["icl_seeds"])
        shares = ", ".join(f"{c}: {s:.2f}" for c, s in r["collapse"])
        lines.append(
            f"| {r['model']} | {r['task']} | {r['k']} | {pct(r['zsl'])} | {pct(r['majority'])} | "
            f"{100 * r['icl_mean']:.1f} ± {100 * r['icl_sd']:.1f} | {seeds} | {shares} | "
            f"{', '.join(str(k) for k in r['true_k'])} | {100 * r['gain']:+.1f} | {'yes' if r['learns'] else 'no'} |"
        )
    return "\n".join(lines)


def wide(table: list[dict], ks=KS) -> str:
    """One row per model and task: ZSL, the majority rate and ICL at each k, as mean ± sd over the
    seeds with the range of the collapse share in brackets; bold where ICL learns in context."""
    head = "| model | separator | task | ZSL | majority | " + " | ".join(f"ICL k = {k}" for k in ks) + " |"
    lines = [head, "|---|---|---|---:|---:|" + "---:|" * len(ks)]
    for model, task in dict.fromkeys((r["model"], r["task"]) for r in table):
        rows = {r["k"]: r for r in table if r["model"] == model and r["task"] == task}
        first = rows[ks[0]]
        cells = []
        for k in ks:
            r = rows[k]
            shares = [s for _, s in r["collapse"]]
            cell = f"{100 * r['icl_mean']:.1f} ± {100 * r['icl_sd']:.1f} ({min(shares):.2f}-{max(shares):.2f})"
            cells.append(f"**{cell}**" if r["learns"] else cell)
        lines.append(
            f"| {model} | {first['separator']} | {task} | {pct(first['zsl'])} | {pct(first['majority'])} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def write_csv(table: list[dict], path: Path) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["model", "task", "k", "seed", "true_k", "n", "zsl", "majority", "icl", "top_class", "collapse_share"]
        )
        for r in table:
            for seed, true_k, acc, (label, share) in zip(r["seeds"], r["true_k"], r["icl_seeds"], r["collapse"]):
                writer.writerow(
                    [r["model"], r["task"], r["k"], seed, true_k, r["n"], r["zsl"], r["majority"], acc, label, share]
                )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(DEFAULT_CONFIG))
    parser.add_argument("--dir", default=".", help="the folder the workflow ran in (snakemake --directory)")
    parser.add_argument("--ks", default=",".join(map(str, KS)), help="comma-separated k (default 4,8,16,32)")
    parser.add_argument("--targets", action="store_true", help="print the cache paths to ask snakemake for")
    parser.add_argument("--out", help="also write one row per model, task, k and seed to this CSV")
    parser.add_argument("--wide", action="store_true", help="print one row per model and task instead")
    args = parser.parse_args(argv)
    config = yaml.safe_load(Path(args.config).read_text())
    config.setdefault("k", 32)
    ks = tuple(int(k) for k in args.ks.split(","))
    if args.targets:
        print(" ".join(r["path"] for r in cache_paths(config, ks)))
        return
    table = summarise(measure(config, Path(args.dir), ks), ks)
    print(wide(table, ks) if args.wide else markdown(table))
    if args.out:
        write_csv(table, Path(args.out))


if __name__ == "__main__":
    main()
