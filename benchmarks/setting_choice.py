"""A setting picked on held-out examples, then the premise read there (docs/tasks.md, "A setting
picked on held-out examples"): the workflow's own caches, read by the rule of ``metrics.setting_choice``
and the premise's own test (``metrics.claim_testing``).

    python benchmarks/setting_choice.py --targets                       # development caches to ask for
    python benchmarks/setting_choice.py --choose eos=DIR newline=DIR [--out choice.csv]
    python benchmarks/setting_choice.py --premise-targets choice.csv eos # evaluation caches, one separator
    python benchmarks/setting_choice.py --premise choice.csv eos=DIR newline=DIR [--out premise.csv]

The config (``configs/setting-choice.yaml`` by default) names the models, the tasks and their ten seeds.
Development: per model, task and separator, ZSL (the first seed's cache: it uses no demonstrations) and
ICL at k = 4, 8, 16 and 32 with the config's ``n_seeds`` seeds, on the held-out train rows
(``evaluate_on: development``); each folder holds one separator's caches, and every cache is checked
to be of that separator and of the development set. ``--choose`` prints every candidate's gain (mean
over the seeds of ICL's accuracy minus ZSL's) and the choice per model and task. The premise: at the
chosen separator and k, ZSL, ICL and ICL on consistently permuted labels with all the task's seeds on
the evaluation examples, read as the workflow reads its premise (per task ICL above ZSL and above the
majority class, label-following above the permuted gold's majority class, every interval at
1 - 0.05 / (tasks x 3) on the crossed seeds x examples design), and again with calibrated predictions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import icl_k_sweep as sweep  # noqa: E402  (beside this file)

from icl_gd.activations.cache import read_cache  # noqa: E402
from icl_gd.config import resolve as cfg  # noqa: E402
from icl_gd.metrics import claim_testing, setting_choice  # noqa: E402
from icl_gd.metrics.scoring import RunExamples, calibrated_predictions  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO / "configs/setting-choice.yaml"
KS = sweep.KS
SEPARATORS = ("eos", "newline")
CACHE = sweep.CACHE


def load_config(path) -> dict:
    config = yaml.safe_load(Path(path).read_text())
    config.setdefault("k", 32)
    return config


def setting(k: int, config_k: int, labels: str = "") -> str:
    """The workflow's ICL setting at k demonstrations, on gold or on permuted labels."""
    base = f"icl_{labels}" if labels else "icl"
    return base if k == config_k else f"{base}_k{k}"


def _read(folder: Path, row: dict, separator: str, split: str):
    run = read_cache(folder / CACHE.format(**row))
    found = (run.meta.get("demo_separator", "eos"), (run.meta.get("queries") or {"split": "evaluation"})["split"])
    if found != (separator, split):
        raise ValueError(
            f"{folder / CACHE.format(**row)}: a {found} cache where ({separator!r}, {split!r}) was asked for"
        )
    return run


def development_table(config: dict, folders: dict[str, Path]) -> pd.DataFrame:
    """One row per (model, task, separator, k, seed): ICL's and ZSL's accuracy on the development set."""
    rows = []
    for separator, folder in folders.items():
        for model in config["models"]:
            for task in config["tasks"]:
                seeds = cfg.task_seeds(config, task)
                zsl = _read(
                    folder, dict(model=model, task=task, seed=seeds[0], setting="zsl"), separator, "development"
                )
                for seed in seeds:
                    for k in KS:
                        where = dict(model=model, task=task, seed=seed, setting=setting(k, config["k"]))
                        icl = _read(folder, where, separator, "development")
                        if list(icl.example_id) != list(zsl.example_id):
                            raise ValueError(f"{model} {task} seed {seed} k={k}: ICL and ZSL read different examples")
                        rows.append(
                            dict(
                                model=model,
                                task=task,
                                separator=separator,
                                k=k,
                                seed=seed,
                                n=len(icl.gold),
                                icl=float((icl.pred == icl.gold).mean()),
                                zsl=float((zsl.pred == zsl.gold).mean()),
                            )
                        )
    return pd.DataFrame(rows)


def premise_targets(config: dict, choice: pd.DataFrame, separator: str) -> list[str]:
    """The evaluation caches of the premise at the chosen settings of one separator, all ten seeds."""
    paths = []
    for r in choice[choice["separator"] == separator].itertuples(index=False):
        seeds = cfg.task_spec(config, r.task).seeds
        paths.append(CACHE.format(model=r.model, task=r.task, seed=seeds[0], setting="zsl"))
        for seed in seeds:
            for labels in ("", "permuted"):
                paths.append(
                    CACHE.format(model=r.model, task=r.task, seed=seed, setting=setting(r.k, config["k"], labels))
                )
    return paths


def premise_examples(config: dict, choice: pd.DataFrame, folders: dict[str, Path]) -> list[RunExamples]:
    """Per (model, task, seed) at its chosen setting, what the premise reads of the run: ZSL's, ICL's
    and ICL-on-permuted-labels' predictions, the permuted gold and the calibrated predictions."""
    out = []
    for r in choice.itertuples(index=False):
        folder = folders[r.separator]
        seeds = cfg.task_spec(config, r.task).seeds
        where = dict(model=r.model, task=r.task)
        zsl = _read(folder, dict(where, seed=seeds[0], setting="zsl"), r.separator, "evaluation")
        for seed in seeds:
            icl = _read(folder, dict(where, seed=seed, setting=setting(r.k, config["k"])), r.separator, "evaluation")
            permuted = _read(
                folder, dict(where, seed=seed, setting=setting(r.k, config["k"], "permuted")), r.separator, "evaluation"
            )
            if not (list(icl.example_id) == list(zsl.example_id) == list(permuted.example_id)):
                raise ValueError(f"{r.model} {r.task} seed {seed}: ZSL, ICL and permuted ICL read different examples")
            out.append(
                RunExamples(
                    meta=dict(model=r.model, variant="trained", task=r.task, seed=int(seed), method="gd"),
                    example_id=np.asarray(zsl.example_id, dtype=np.int64),
                    gold=np.asarray(zsl.gold),
                    pred_zsl=np.asarray(zsl.pred),
                    pred_icl=np.asarray(icl.pred),
                    pred_ft=np.asarray(icl.pred),  # no finetuning here: the premise reads none
                    similarities={},
                    pred_icl_permuted=np.asarray(permuted.pred),
                    gold_permuted=np.asarray(permuted.gold),
                    pred_zsl_calibrated=calibrated_predictions(zsl),
                    pred_icl_calibrated=calibrated_predictions(icl),
                )
            )
    return out


def premise_reading(config: dict, choice: pd.DataFrame, folders: dict[str, Path]) -> pd.DataFrame:
    """The premise's table (``metrics.premise.COLUMNS``) at the chosen settings, with the chosen ones beside."""
    statistics = config.get("statistics") or {}
    labels = {t: list(cfg.task_spec(config, t).label_words) for t in config["tasks"]}
    _, table = claim_testing.evaluate(
        premise_examples(config, choice, folders),
        {"gd": "gd"},
        claims=(),
        n_boot=int(statistics.get("n_boot", 1000)),
        level=float(statistics.get("ci_level", 0.95)),
        seed=int(statistics.get("seed", 0)),
        labels=labels,
    )
    return choice[["model", "task", "separator", "k", "gain", "gains"]].merge(table, on=["model", "task"])


def _folders(pairs: list[str]) -> dict[str, Path]:
    folders = {}
    for pair in pairs:
        separator, _, folder = pair.partition("=")
        if separator not in SEPARATORS or not folder:
            raise SystemExit(f"{pair!r}: give SEPARATOR=FOLDER, the separator one of {SEPARATORS}")
        folders[separator] = Path(folder)
    return folders


def points(x: float) -> str:
    """The premise's table is in points already (metrics.premise)."""
    return f"{x:.1f}"


def choice_markdown(dev: pd.DataFrame, choice: pd.DataFrame) -> str:
    gains = setting_choice.candidate_gains(dev)
    head = "| model | task | " + " | ".join(f"{s} k = {k}" for s in SEPARATORS for k in KS) + " | chosen |"
    lines = [head, "|---|---|" + "---:|" * (len(SEPARATORS) * len(KS)) + "---|"]
    for r in choice.itertuples(index=False):
        mine = gains[(gains["model"] == r.model) & (gains["task"] == r.task)].set_index(["separator", "k"])["gain"]
        cells = [f"{100 * mine.get((s, k), np.nan):+.1f}" for s in SEPARATORS for k in KS]
        chosen = f"{r.separator}, k = {r.k}" + ("" if r.gains else " (no gain: the protocol's)")
        lines.append(f"| {r.model} | {r.task} | " + " | ".join(cells) + f" | {chosen} |")
    return "\n".join(lines)


def premise_markdown(table: pd.DataFrame) -> str:
    def interval(r, name):
        return f"{getattr(r, name):+.1f} [{getattr(r, name + '_low'):+.1f}, {getattr(r, name + '_high'):+.1f}]"

    lines = [
        "| model | task | setting | seeds | ZSL | ICL | majority | ICL - ZSL | ICL - majority | ICL permuted | "
        "label-following | learns | learns, calibrated |",
        "|---|---|---|---:|---:|---:|---:|---|---|---:|---|---|---|",
    ]
    for r in table.itertuples(index=False):
        lines.append(
            f"| {r.model} | {r.task} | {r.separator}, k = {r.k} | {r.n_seeds} | {points(r.zsl)} | {points(r.icl)} | "
            f"{points(r.majority)} | {interval(r, 'icl_zsl')} | {interval(r, 'icl_majority')} | {points(r.icl_permuted)} | "
            f"{interval(r, 'icl_permuted_majority')} | {'yes' if r.learns else 'no'} | "
            f"{'yes' if r.learns_calibrated else 'no'} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(DEFAULT_CONFIG))
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--targets", action="store_true", help="the development caches of one separator")
    what.add_argument("--choose", nargs="+", metavar="SEPARATOR=FOLDER", help="the development runs' folders")
    what.add_argument("--premise-targets", nargs=2, metavar=("CHOICE", "SEPARATOR"))
    what.add_argument("--premise", nargs="+", metavar="CHOICE SEPARATOR=FOLDER")
    parser.add_argument("--out", help="also write the choice (--choose) or the premise (--premise) to this CSV")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    if args.targets:
        print(" ".join(r["path"] for r in sweep.cache_paths(config, KS)))
        return
    if args.premise_targets:
        choice_path, separator = args.premise_targets
        print(" ".join(premise_targets(config, pd.read_csv(choice_path), separator)))
        return
    if args.choose:
        dev = development_table(config, _folders(args.choose))
        choice = setting_choice.choose(dev, protocol_k=int(config["k"]))
        print(choice_markdown(dev, choice))
        if args.out:
            choice.to_csv(args.out, index=False)
        return
    choice = pd.read_csv(args.premise[0])
    table = premise_reading(config, choice, _folders(args.premise[1:]))
    print(premise_markdown(table))
    if args.out:
        table.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
