"""Order sensitivity (config key ``orders``; Shen, Mishra and Khashabi 2023): does ICL depend on the
order of its demonstrations more than sequential GD does?

A run (model, variant, task, seed, method) with ``orders`` = P > 1 also runs ICL and the method on
P - 1 further orders of the same demonstrations (``data.demo_order``). Per example, whether the ICL
prediction differs between any two of the P orders (``order_changed_icl``, 0 or 1), the same for
the finetuned model (``order_changed_ft``), and their difference (``order_change_gap``): means of
one value per example, so that the run's score, the mean over seeds, its interval and
the claim "ICL is more order-sensitive than sequential GD" are those of every other score
(``scoring.means``). Per order, the run's SimAOU_norm and SimAM_delta (layer means; the catalog's
``orders_spread``): their spread over the orders (sample std) says how much the similarity itself
depends on the order.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from icl_gd.common.frames import atomic_write_frame, write_csv
from icl_gd.metrics import catalog, formulas
from icl_gd.metrics.scoring import (
    GROUP_KEYS,
    RunExamples,
    layer_mean,
    positions_of,
    read_examples,
    run_key,
    runs_provenance,
    seed_mean_intervals,
    write_examples,
)

COLUMNS = ["model", "variant", "task", "method", "metric", "mean", "std", "n", "ci_low", "ci_high", "n_orders"]


def _layer_mean_score(values: np.ndarray) -> float:
    """A similarity's run score: the layer mean of its per-layer means over examples."""
    with np.errstate(invalid="ignore"):
        per_layer = formulas.nan_mean0(np.asarray(values, dtype=np.float64))
    return float(layer_mean(per_layer)) if np.isfinite(per_layer).any() else float("nan")


def order_sensitivity(orders: list[RunExamples]) -> RunExamples:
    """The run of the first order (its own) with the order sensitivity of its examples added:
    ``orders`` are one run's per-example values in each order, the run's own first. Examples are
    paired by id; an order that lacks one of the first's examples is refused."""
    if len(orders) < 2:
        raise ValueError(f"order sensitivity needs the run in at least 2 orders, got {len(orders)}")
    first = orders[0]
    key = run_key(first.meta)
    icl, ft = [], []
    for run in orders:
        if run_key(run.meta) != key:
            raise ValueError(f"the orders of run {key} include another run's values, {run_key(run.meta)}")
        missing = np.setdiff1d(first.example_id, run.example_id)
        if missing.size:
            raise ValueError(
                f"run {key}: an order lacks {missing.size} of the run's evaluation examples "
                f"(e.g. id {int(missing[0])}); extract its caches again with the run's config"
            )
        rows = positions_of(run.example_id, first.example_id)
        icl.append(np.asarray(run.pred_icl)[rows])
        ft.append(np.asarray(run.pred_ft)[rows])
    icl, ft = np.stack(icl), np.stack(ft)  # (orders, n)
    changed_icl = (icl != icl[0]).any(axis=0).astype(np.float64)
    changed_ft = (ft != ft[0]).any(axis=0).astype(np.float64)
    per_example = {
        **first.per_example,
        "order_changed_icl": changed_icl,
        "order_changed_ft": changed_ft,
        "order_change_gap": changed_icl - changed_ft,
    }
    meta = {
        **first.meta,
        "orders": len(orders),
        "order_scores": {
            name: [_layer_mean_score(run.similarities[name]) for run in orders]
            for name in catalog.shown_in("orders_spread")
            if all(name in run.similarities for run in orders)
        },
    }
    return replace(first, meta=meta, per_example=per_example)


def write_order_sensitivity(order_paths: list[str], out_path: str) -> RunExamples:
    """:func:`order_sensitivity` of one run's per-example files (its own order first), written as
    a per-example file like the run's own."""
    run = order_sensitivity([read_examples(p) for p in order_paths])
    write_examples(run, out_path)
    return run


def order_table(runs: list[RunExamples], *, n_boot: int = 1000, level: float = 0.95, ci_seed: int = 0) -> pd.DataFrame:
    """Per (model, variant, task, method): the order metrics' mean over seeds with their intervals
    (seeds and examples crossed, as the summary's), and each similarity's spread
    over the orders (``<similarity>_order_sd``: the mean over seeds of its sample std over the
    orders; no interval)."""
    shown = catalog.shown_in("orders")
    light = [
        RunExamples(
            meta=r.meta,
            example_id=r.example_id,
            gold=r.gold,
            pred_zsl=r.pred_zsl,
            pred_icl=r.pred_icl,
            pred_ft=r.pred_ft,
            similarities={},
            per_example={m: r.per_example[m] for m in shown if m in r.per_example},
        )
        for r in runs
    ]
    intervals = seed_mean_intervals(light, n_boot=n_boot, level=level, ci_seed=ci_seed)
    intervals = intervals[intervals["metric"].isin(shown)].set_index(GROUP_KEYS[:-1])
    rows = []
    groups: dict[tuple, list[RunExamples]] = {}
    for run in runs:
        groups.setdefault(tuple(run.meta[k] for k in ("model", "variant", "task", "method")), []).append(run)
    for key, group in sorted(groups.items()):
        n_orders = int(min(r.meta["orders"] for r in group))
        for metric in shown:
            values = [float(np.mean(r.per_example[metric])) for r in group if metric in r.per_example]
            low, high = (
                intervals.loc[(*key, metric), ["ci_low", "ci_high"]].tolist()
                if (*key, metric) in intervals.index
                else (np.nan, np.nan)
            )
            rows.append(
                dict(
                    zip(("model", "variant", "task", "method"), key),
                    metric=metric,
                    **_stats(values),
                    ci_low=float(low),
                    ci_high=float(high),
                    n_orders=n_orders,
                )
            )
        for name in catalog.shown_in("orders_spread"):
            spreads = [
                float(np.std(r.meta["order_scores"][name], ddof=1))
                for r in group
                if name in r.meta.get("order_scores", {})
            ]
            rows.append(
                dict(
                    zip(("model", "variant", "task", "method"), key),
                    metric=f"{name}_order_sd",
                    **_stats(spreads),
                    ci_low=np.nan,
                    ci_high=np.nan,
                    n_orders=n_orders,
                )
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _stats(values: list[float]) -> dict:
    values = [v for v in values if np.isfinite(v)]
    return {
        "mean": float(np.mean(values)) if values else np.nan,
        "std": float(np.std(values, ddof=1)) if len(values) > 1 else np.nan,
        "n": len(values),
    }


def write_order_table(paths: list[str], parquet_path: str, csv_path: str, **kwargs) -> pd.DataFrame:
    runs = [read_examples(p) for p in paths]
    table = order_table(runs, **kwargs)
    atomic_write_frame(table, parquet_path, runs_provenance(runs))
    write_csv(table, csv_path)
    return table
