"""Which tables and figures the report holds, built from the aggregated metrics files.

The layouts themselves live in ``tables`` and ``figures``; this module decides what goes where.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import pandas as pd

from . import cache, figures, labels, tables

log = logging.getLogger(__name__)

CAPTIONS = {
    "accuracy": "ZSL / FT / ICL accuracy and Jaccard index of prediction changes (%), after paper 003 Table 1.",
    "methods": "Similarity of ICL and finetuning per method, layer mean, mean ± std over seeds, after paper 001 Table 2.",
    "variants": "SimAOU and SimAM_delta of GD for trained and untrained models, after paper 001 Table 1.",
}


def _stems(outputs: list[str]) -> dict[str, Path]:
    """Output files -> {name: path without extension}, in output order."""
    stems: dict[str, Path] = {}
    for out in map(Path, outputs):
        stems.setdefault(out.stem, out.with_suffix(""))
    return stems


def write_tables(summary_path: str, outputs: list[str], *, model: str, methods: list[str], variant: str, n_seeds: int) -> None:
    summary = pd.read_parquet(summary_path)
    first = methods[0]
    builders = {
        "accuracy": lambda: tables.accuracy_table(summary, model, variant=variant, method=first, n_seeds_expected=n_seeds),
        "methods": lambda: tables.methods_table(summary, model, variant=variant, methods=methods, n_seeds_expected=n_seeds),
        "variants": lambda: tables.variants_table(summary, model, method=first, n_seeds_expected=n_seeds),
    }
    for name, stem in _stems(outputs).items():
        tables.write_table(builders[name](), stem, CAPTIONS[name] + f" Model: {model}.")
        log.info("wrote table %s", stem)


def _grad_norm_figure(train_logs: list[str], *, model: str, variant: str):
    """Paper 001 Fig. 4: the logs of one task and seed, one panel per method in the given order;
    a layer-causal method (kind ``lcgd``) on a log colour scale, as in the paper."""
    norms, log_scale, runs = {}, set(), set()
    for path in train_logs:
        meta, log_ = cache.read_train_log(path)
        norms[meta["setting"]] = log_["grad_norm"]
        if meta["method"] == "lcgd":
            log_scale.add(meta["setting"])
        runs.add((meta["task"], meta["seed"]))
    if len(runs) > 1:
        raise ValueError(f"gradient-norm logs of several runs given: {sorted(runs)}; expected one task and seed")
    which = ", ".join(f"task {labels.task_label(task)}, seed {seed}" for task, seed in runs) or "no training log given"
    title = f"{model} ({variant}): $\\ell_2$ norm of each layer's K/V gradient per training step\n{which}"
    return figures.grad_norm_figure(norms, log_scale=log_scale, title=title)


def write_figures(
    runs_path: str | None,
    summary_path: str | None,
    outputs: list[str],
    *,
    model: str,
    variant: str,
    methods: list[str],
    ci_level: float = 0.95,
    baseline: str | None = "gd",
    train_logs: list[str] = (),
    lr_sweep: list[dict] = (),
    models: list[str] = (),
) -> None:
    """Each output stem names its figure. ``methods`` are the report variant's; alpha shows those
    compared with ``baseline``; the gradient norms come from ``train_logs`` (one task and seed);
    ``lr_sweep`` rows are (group, method, task, lr); ``models`` is the models figure's order.
    The metrics tables are read only by the figures that need them (the gradient-norm job has no
    metrics among its inputs)."""
    runs = functools.cache(lambda: pd.read_parquet(runs_path))
    summary = functools.cache(lambda: pd.read_parquet(summary_path))
    builders = {
        "per_layer": lambda: figures.per_layer_figure(runs(), model, variant=variant, methods=methods, ci_level=ci_level),
        "accuracy": lambda: figures.accuracy_figure(summary(), model, variant=variant, method=methods[0], ci_level=ci_level),
        "alpha": lambda: figures.alpha_figure(
            summary(), model, variant=variant, methods=[m for m in methods if m != baseline],
            baseline=baseline, ci_level=ci_level),
        "grad_norms": lambda: _grad_norm_figure(list(train_logs), model=model, variant=variant),
        "prediction_changes": lambda: figures.prediction_changes_figure(summary(), model, variant=variant, methods=methods),
        "lr_sweep": lambda: figures.lr_sweep_figure(
            summary(), model, pd.DataFrame(list(lr_sweep), columns=["group", "method", "task", "lr"]),
            variant=variant, ci_level=ci_level),
        "models": lambda: figures.models_figure(runs(), models, variant=variant, methods=methods, ci_level=ci_level),
    }
    for name, stem in _stems(outputs).items():
        figures.write_figure(builders[name](), stem)
        log.info("wrote figure %s", stem)
