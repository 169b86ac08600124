"""Apply the metrics to a run's caches, and aggregate runs over seeds.

A *run* is (model, variant, task, seed, method): its ZSL, ICL and finetuned (method) caches.
Its metrics come out tidy: one row per (metric, layer), plus a row with ``layer`` missing that
holds the run-level value (the mean over layers for a per-layer metric).
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pandas as pd

from . import metrics
from .cache import RunCache, atomic_write_frame

log = logging.getLogger(__name__)

RUN_KEYS = ["model", "variant", "task", "seed", "method"]
GROUP_KEYS = ["model", "variant", "task", "method", "metric", "layer"]


def _check_aligned(zsl: RunCache, *others: RunCache) -> None:
    for other in others:
        if not np.array_equal(zsl.example_id, other.example_id):
            raise ValueError(
                f"caches of setting {zsl.meta['setting']!r} and {other.meta['setting']!r} hold different "
                "evaluation examples; rerun their extraction with one config"
            )


SIMILARITIES = ("simaou", "simaou_norm", "simam_before", "simam_after", "simam_delta")


def _similarities(zsl: RunCache, icl: RunCache, ft: RunCache, keep) -> dict[str, np.ndarray]:
    """The per-layer similarity metrics of the examples selected by ``keep``."""
    h_zsl, h_icl, h_ft = zsl.attn_out[keep], icl.attn_out[keep], ft.attn_out[keep]
    m_zsl, m_icl, m_ft = zsl.attn_scores[keep], icl.attn_scores[keep], ft.attn_scores[keep]
    return {
        "simaou": metrics.simaou(h_zsl, h_icl, h_ft, normalize=False),
        "simaou_norm": metrics.simaou(h_zsl, h_icl, h_ft, normalize=True),
        "simam_before": metrics.simam(m_icl, m_zsl),
        "simam_after": metrics.simam(m_icl, m_ft),
        "simam_delta": metrics.simam_delta(m_zsl, m_icl, m_ft),
    }


def score_run(zsl: RunCache, icl: RunCache, ft: RunCache, *, random_seed: int = 0) -> pd.DataFrame:
    """Every metric of one run, per layer and as the layer mean."""
    _check_aligned(zsl, icl, ft)
    gold = zsl.gold
    scalars = {
        "acc_zsl": metrics.accuracy(zsl.pred, gold),
        "acc_icl": metrics.accuracy(icl.pred, gold),
        "acc_ft": metrics.accuracy(ft.pred, gold),
        "rec2ftp": metrics.rec2ftp(zsl.pred, icl.pred, ft.pred, gold),
        "jaccard_all": metrics.jaccard(zsl.pred, icl.pred, ft.pred, gold, subset="all"),
        "jaccard_correct": metrics.jaccard(zsl.pred, icl.pred, ft.pred, gold, subset="correct"),
        "jaccard_incorrect": metrics.jaccard(zsl.pred, icl.pred, ft.pred, gold, subset="incorrect"),
    }
    rng = np.random.default_rng(random_seed)
    per_layer = {
        **_similarities(zsl, icl, ft, slice(None)),
        "simaou_random": metrics.simaou_random(zsl.attn_out, icl.attn_out, rng, kind="uniform"),
        "simaou_random_gaussian": metrics.simaou_random(zsl.attn_out, icl.attn_out, rng, kind="gaussian"),
    }
    # f2t: the examples ZSL gets wrong and both ICL and finetuning get right (PROTOCOL.md)
    f2t = metrics.f2t_mask(zsl.pred, icl.pred, ft.pred, gold)
    scalars["n_f2t"] = float(f2t.sum())
    if f2t.any():
        per_layer.update({f"{name}_f2t": values for name, values in _similarities(zsl, icl, ft, f2t).items()})
    else:
        log.warning("no f2t example (ZSL wrong, ICL and FT right): the f2t similarities are NaN")
        n_layers = zsl.attn_out.shape[1]
        per_layer.update({f"{name}_f2t": np.full(n_layers, np.nan) for name in SIMILARITIES})
    rows = [{"metric": name, "layer": pd.NA, "value": float(value)} for name, value in scalars.items()]
    for name, values in per_layer.items():
        rows.extend({"metric": name, "layer": layer, "value": float(v)} for layer, v in enumerate(values))
        mean = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
        rows.append({"metric": name, "layer": pd.NA, "value": mean})
    table = pd.DataFrame(rows)
    meta = ft.meta
    for key, value in reversed(list(zip(RUN_KEYS, [meta["model"], meta["variant"], meta["task"], meta["seed"], meta["setting"]]))):
        table.insert(0, key, value)
    return tidy(table)


def tidy(table: pd.DataFrame) -> pd.DataFrame:
    """Fix the column types, so that parquet and CSV round-trips agree."""
    table = table.astype({"model": str, "variant": str, "task": str, "seed": "int64", "method": str, "metric": str})
    table["layer"] = table["layer"].astype("Int64")
    table["value"] = table["value"].astype("float64")
    return table.reset_index(drop=True)


def aggregate(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample standard deviation (ddof=1; NaN for one seed) and number of seeds."""
    grouped = runs.groupby(GROUP_KEYS, dropna=False, sort=True)["value"]
    summary = grouped.agg(mean="mean", std=lambda v: v.std(ddof=1), n="count").reset_index()
    summary["n"] = summary["n"].astype("int64")
    summary["layer"] = summary["layer"].astype("Int64")
    return summary


def write_aggregates(run_paths: list[str], runs_path: str, summary_path: str, csv_path: str) -> pd.DataFrame:
    """All runs in one tidy table, and their aggregate over seeds as parquet and CSV."""

    runs = tidy(pd.concat([pd.read_parquet(p) for p in run_paths], ignore_index=True))
    summary = aggregate(runs)
    atomic_write_frame(runs, runs_path)
    atomic_write_frame(summary, summary_path)
    tmp = f"{csv_path}.tmp"
    summary.to_csv(tmp, index=False)
    os.replace(tmp, csv_path)
    log.info("%d runs, %d summary rows", runs[RUN_KEYS].drop_duplicates().shape[0], len(summary))
    return summary
