"""Paired comparisons of two methods (the comparisons table): per model, variant and task, a
method's per-example values against the baseline's on the same examples and seeds, the mean
difference with a bootstrap interval and a sign-flip test.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd

from icl_gd.common.frames import atomic_write_frame, write_csv
from icl_gd.metrics import catalog, resampling
from icl_gd.metrics.scoring import RunExamples, group_key, layer_mean, positions_of, read_examples, runs_provenance

log = logging.getLogger(__name__)


def _per_example(ex: RunExamples, metric: str) -> np.ndarray:
    """One value per example: a similarity's layer mean; a score's own value otherwise (an
    accuracy's correctness: its numerator over a denominator of one)."""
    if catalog.get(metric).computed == "similarity":
        return layer_mean(ex.similarities[metric])
    num, den = ex.ratio_terms(metric)
    return num / den


def _paired_differences(method_runs: dict[int, RunExamples], base_runs: dict[int, RunExamples], metric: str):
    """Per example, the mean over seeds of (method − baseline), and the two means, on the
    examples every seed of both methods evaluated."""
    seeds = sorted(set(method_runs) & set(base_runs))
    common = None
    for s in seeds:
        for ex in (method_runs[s], base_runs[s]):
            common = set(ex.example_id) if common is None else common & set(ex.example_id)
    ids = np.array(sorted(common or ()), dtype=np.int64)

    def aligned(ex):
        return _per_example(ex, metric)[positions_of(ex.example_id, ids)]

    a = np.stack([aligned(method_runs[s]) for s in seeds]) if seeds else np.empty((0, 0))
    b = np.stack([aligned(base_runs[s]) for s in seeds]) if seeds else np.empty((0, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an example undefined in every seed: NaN
        diffs = np.nanmean(a - b, axis=0) if seeds else np.empty(0)
        return diffs, float(np.nanmean(a)) if a.size else np.nan, float(np.nanmean(b)) if b.size else np.nan, seeds


def compare_methods(
    examples: list[RunExamples],
    baseline: str | None,
    *,
    n_boot: int = 1000,
    n_perm: int = 10000,
    level: float = 0.95,
    significance: float = 0.05,
    seed: int = 0,
) -> pd.DataFrame:
    """Every method against ``baseline`` on the same model, variant and task, paired by example.

    Per example, the difference (method − baseline) of each metric the catalog lists as
    ``compared`` is averaged over the seeds both ran; the examples are the independent units.
    ``diff`` is their mean, with a percentile bootstrap interval over examples and a two-sided
    sign-flip permutation p-value (:func:`resampling.sign_flip_test`); ``significant`` is p <
    ``significance``.
    """
    runs: dict[tuple, dict[int, RunExamples]] = {}
    for ex in examples:
        runs.setdefault(group_key(ex.meta), {})[int(ex.meta["seed"])] = ex
    rows = []
    for (model, variant, task, method), by_seed in sorted(runs.items()):
        base = runs.get((model, variant, task, baseline))
        if method == baseline or base is None:
            continue
        for metric in catalog.shown_in("compared"):
            diffs, mean_a, mean_b, seeds = _paired_differences(by_seed, base, metric)
            defined = diffs[~np.isnan(diffs)]
            if defined.size:
                counts = resampling.bootstrap_counts(defined.size, n_boot, np.random.default_rng([seed, 1]))
                low, high = resampling.percentile_interval(resampling.bootstrap_means(defined, counts), level)
                p = resampling.sign_flip_test(defined, n_perm=n_perm, seed=seed)
            else:
                log.warning(
                    "%s vs %s on %s/%s/%s: no example with a defined %s difference",
                    method,
                    baseline,
                    model,
                    variant,
                    task,
                    metric,
                )
                low = high = p = np.nan
            rows.append(
                dict(
                    model=model,
                    variant=variant,
                    task=task,
                    method=method,
                    baseline=baseline,
                    metric=metric,
                    mean_method=mean_a,
                    mean_baseline=mean_b,
                    diff=float(defined.mean()) if defined.size else np.nan,
                    ci_low=float(low),
                    ci_high=float(high),
                    p_value=p,
                    significant=bool(p < significance),
                    n_examples=int(defined.size),
                    n_seeds=len(seeds),
                )
            )
    columns = [
        "model",
        "variant",
        "task",
        "method",
        "baseline",
        "metric",
        "mean_method",
        "mean_baseline",
        "diff",
        "ci_low",
        "ci_high",
        "p_value",
        "significant",
        "n_examples",
        "n_seeds",
    ]
    return pd.DataFrame(rows, columns=columns)


def write_comparisons(
    example_paths: list[str], parquet_path: str, csv_path: str, baseline: str | None, **kwargs
) -> pd.DataFrame:
    """The paired comparisons of every method with the baseline, as parquet and CSV."""
    examples = [read_examples(p) for p in example_paths] if baseline else []
    table = compare_methods(examples, baseline, **kwargs)
    atomic_write_frame(table, parquet_path, runs_provenance(examples))
    write_csv(table, csv_path)
    log.info("%d comparisons (%d significant)", len(table), int(table["significant"].sum()))
    return table
