"""The papers' published numbers (``docs/published.csv``) beside a run's: which run cell answers
which published cell, and whether the published value lies inside the run's interval.

The CSV holds every number the papers print in a table (paper 001 Tables 1-3, paper 003 Tables
1-3; papers 000 and 002 print none), one row per cell, in the workflow's names: task, variant,
method (as ``configs/paper.yaml`` names its methods), metric. A printed "Average" column is task
:data:`AVERAGE`: the mean over the tasks the same row prints, compared with the run's mean over
those tasks. A config's methods are matched to the published ones by what they do
(``config.resolve.PROTOCOL_METHODS``), not by their names.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from icl_gd.config import resolve as cfg
from icl_gd.metrics import catalog
from icl_gd.report.selection import run_level

COLUMNS = ["paper", "table", "task", "variant", "method", "metric", "value", "spread", "unit", "model", "note"]
VARIANTS = ("trained", "trained_embeddings", "untrained")
# Data statistics (paper 001 Table 3): columns of data_statistics.parquet, described, not compared
# (the reference counted characters and listed the splits' full sizes).
DATA_STATISTICS = {"n_train": "n_train", "n_eval": "n_eval", "avg_tokens": "prompt_tokens"}
AVERAGE = "average"  # the task of a printed average over a row's tasks
UNITS = ("percent", "score", "examples", "characters")


def read_published(path: str | Path) -> pd.DataFrame:
    """The published numbers, checked: every row names a known task, variant, method and metric,
    a number, and no cell twice. A bad row raises ValueError naming its line and the fix."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    if list(table.columns) != COLUMNS:
        raise ValueError(f"{path}: columns must be {COLUMNS}, got {list(table.columns)}")
    allowed = {
        "task": set(cfg.TASK_PRESETS) | {AVERAGE},
        "variant": set(VARIANTS),
        "method": set(cfg.PROTOCOL_METHODS),
        "metric": catalog.published() | set(DATA_STATISTICS),
        "unit": set(UNITS),
    }
    for line, row in zip(range(2, len(table) + 2), table.itertuples(index=False)):
        for column, known in allowed.items():
            if getattr(row, column) not in known:
                raise ValueError(
                    f"{path}, line {line}: {column} {getattr(row, column)!r} is not one of "
                    f"{sorted(known)}; use the workflow's name for it"
                )
        for column in ("value", "spread"):
            text = getattr(row, column)
            try:
                float(text) if text or column == "value" else None
            except ValueError:
                raise ValueError(f"{path}, line {line}: {column} {text!r} is not a number") from None
    keys = ["paper", "table", "task", "variant", "method", "metric"]
    repeated = table[table.duplicated(keys, keep=False)]
    if len(repeated):
        raise ValueError(f"{path}: cells given twice: {repeated[keys].drop_duplicates().to_dict('records')}")
    table["spread"] = pd.to_numeric(table["spread"].replace("", math.nan))
    table["decimals"] = table["value"].map(lambda v: len(v.partition(".")[2]))
    table["value"] = pd.to_numeric(table["value"])
    return table


def n_results(published: pd.DataFrame) -> int:
    """How many published cells are results a run can answer (not data statistics)."""
    return int(published["metric"].isin(catalog.published()).sum())


def reproduction(published: pd.DataFrame, summary: pd.DataFrame, model: str, roles: dict[str, str]) -> pd.DataFrame:
    """Every published result cell that the run covers (same task, variant, method, metric), with
    the run's mean over seeds and its interval in the published unit (percent or score), the
    difference (run - published) and ``within``: whether the two agree given both uncertainties.

    A published average (task :data:`AVERAGE`) is covered where the run has every task its row
    prints; the run's value is then its mean over those tasks, and each side of its interval the
    tasks' half-widths on that side combined in quadrature, divided by their number (tasks are
    independent samples). ``within``: the distance |run - published| is at most the run's
    half-width on the published value's side and the published ± spread combined in quadrature,
    plus half the published value's last printed digit."""
    results = published[published["metric"].isin(catalog.published())]
    run = run_level(summary[summary["model"] == model])
    lookup = {(r.variant, r.task, r.method, r.metric): r for r in run.itertuples(index=False)}
    row_tasks = {}
    for cell in results[results["task"] != AVERAGE].itertuples(index=False):
        row_tasks.setdefault((cell.paper, cell.table, cell.variant, cell.method, cell.metric), []).append(cell.task)
    rows = []
    for cell in results.itertuples(index=False):
        method = roles.get(cell.method)
        if not method:
            continue
        tasks = (
            row_tasks.get((cell.paper, cell.table, cell.variant, cell.method, cell.metric), [])
            if cell.task == AVERAGE
            else [cell.task]
        )
        found = [lookup.get((cell.variant, task, method, cell.metric)) for task in tasks]
        if not found or any(f is None or math.isnan(f.mean) for f in found):
            continue
        scale = 100.0 if cell.unit == "percent" else 1.0
        means = np.array([f.mean for f in found], dtype=float)
        lows, highs = (
            np.array([f.ci_low for f in found], dtype=float),
            np.array([f.ci_high for f in found], dtype=float),
        )
        mean = scale * float(means.mean())
        if len(found) == 1:
            low, high = scale * lows[0], scale * highs[0]
        else:
            low = mean - scale * math.sqrt(float(np.sum((means - lows) ** 2))) / len(found)
            high = mean + scale * math.sqrt(float(np.sum((highs - means) ** 2))) / len(found)
        half_digit = 0.5 * 10.0**-cell.decimals
        spread = 0.0 if math.isnan(cell.spread) else float(cell.spread)
        toward = max(high - mean, 0.0) if cell.value >= mean else max(mean - low, 0.0)
        allowed = math.hypot(toward, spread) + half_digit
        rows.append(
            {
                "paper": cell.paper,
                "table": cell.table,
                "task": cell.task,
                "variant": cell.variant,
                "method": cell.method,
                "run_method": method,
                "metric": cell.metric,
                "unit": cell.unit,
                "published": cell.value,
                "published_spread": cell.spread,
                "published_decimals": cell.decimals,
                "published_model": cell.model,
                "mean": mean,
                "ci_low": low,
                "ci_high": high,
                "n_seeds": int(min(f.n for f in found)),
                "n_tasks": len(found),
                "difference": mean - cell.value,
                "allowed": allowed,
                "within": bool(abs(mean - cell.value) <= allowed + 1e-12),
            }
        )
    columns = [
        "paper",
        "table",
        "task",
        "variant",
        "method",
        "run_method",
        "metric",
        "unit",
        "published",
        "published_spread",
        "published_decimals",
        "published_model",
        "mean",
        "ci_low",
        "ci_high",
        "n_seeds",
        "n_tasks",
        "difference",
        "allowed",
        "within",
    ]
    return pd.DataFrame(rows, columns=columns)
