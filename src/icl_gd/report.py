"""Which tables and figures the report holds, built from the aggregated metrics files.

The layouts themselves live in ``tables`` and ``figures``; this module decides what goes where.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from . import figures, tables

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


def write_figures(runs_path: str, summary_path: str, outputs: list[str], *, model: str, methods: list[str], variant: str) -> None:
    runs, summary = pd.read_parquet(runs_path), pd.read_parquet(summary_path)
    builders = {
        "per_layer": lambda: figures.per_layer_figure(runs, model, variant=variant, methods=methods),
        "accuracy": lambda: figures.accuracy_figure(summary, model, variant=variant, method=methods[0]),
    }
    for name, stem in _stems(outputs).items():
        figures.write_figure(builders[name](), stem)
        log.info("wrote figure %s", stem)
