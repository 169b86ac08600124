"""Resampling over a run's evaluation examples: bootstrap counts shared by every statistic of a
run, resampled means and ratios, percentile intervals, the ranges a score can take, and a paired
sign-flip test. Pure numpy, no I/O, nothing else of the package; the crossed seeds x examples
design built on these is ``metrics.inference``.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

log = logging.getLogger(__name__)


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


# --------------------------------------------------------------------------------------------
# uncertainty


def bootstrap_counts(n: int, n_boot: int, rng) -> np.ndarray:
    """How often each of ``n`` examples is drawn in each of ``n_boot`` resamples with replacement:
    a float64 (n_boot, n) matrix whose rows sum to n. Every bootstrap statistic below is a
    product with it, so several statistics of one run can share the same resamples."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    if n == 0:
        return np.zeros((n_boot, 0))
    idx = rng.integers(0, n, size=(n_boot, n))
    counts = np.bincount((idx + n * np.arange(n_boot)[:, None]).ravel(), minlength=n_boot * n)
    return counts.reshape(n_boot, n).astype(np.float64)


def bootstrap_means(values, counts: np.ndarray) -> np.ndarray:
    """Nan-aware mean over examples (axis 0) of every resample: (n, ...) → (n_boot, ...).
    A resample that drew no defined value gives NaN."""
    v = _f64(values)
    n, rest = v.shape[0], v.shape[1:]
    flat = v.reshape(n, -1)
    valid = ~np.isnan(flat)
    sums = counts @ np.where(valid, flat, 0.0)
    num = counts @ valid.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(num > 0, sums / num, np.nan)
    return means.reshape((counts.shape[0],) + rest)


def bootstrap_standard_errors(values, counts: np.ndarray) -> np.ndarray:
    """Nan-aware standard error of the mean over examples (axis 0) of every resample, sqrt(var / m)
    with the resample's own (population) variance of its m defined values: (n, ...) → (n_boot, ...).
    What a studentized (bootstrap-t) interval divides each replicate's deviation by; a row of ones
    gives the sample's own."""
    v = _f64(values)
    drawn = (counts @ (~np.isnan(v)).reshape(v.shape[0], -1).astype(np.float64)).reshape(
        (counts.shape[0],) + v.shape[1:]
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.maximum(bootstrap_means(v * v, counts) - bootstrap_means(v, counts) ** 2, 0.0)
        return np.sqrt(variance / drawn)


def bootstrap_ratios(num, den, counts: np.ndarray) -> np.ndarray:
    """Σ num / Σ den of every resample, (n,) terms → (n_boot,); NaN where Σ den = 0. Accuracy,
    Rec2FTP and Jaccard are such ratios (:func:`rec2ftp_terms`, :func:`jaccard_terms`)."""
    top, bottom = counts @ _f64(num), counts @ _f64(den)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / bottom, np.nan)


def within_range(replicates, low: float, high: float) -> np.ndarray:
    """Bootstrap replicates clipped to [low, high] (NaN stays NaN): a percentile interval of them
    is then the unclipped one cut to the values the score can take."""
    return np.clip(_f64(replicates), low, high)


def percentile_interval(replicates, level: float = 0.95):
    """The ((1−level)/2, (1+level)/2) percentiles of bootstrap replicates along axis 0 (Efron's
    percentile method), ignoring NaN replicates; (NaN, NaN) where none is defined."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    reps = _f64(replicates)
    tail = 100.0 * (1.0 - level) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN column → NaN, by design
        low, high = np.nanpercentile(reps, [tail, 100.0 - tail], axis=0)
    return low, high


def endpoint_unsettled(replicates, level: float, z: float = 3.0) -> tuple[bool, bool]:
    """Whether the sign of each end of the percentile interval at ``level`` lies within the
    bootstrap's own Monte Carlo error: (low, high). An end is settled where the fraction of the
    R defined replicates beyond zero on its side differs from the tail (1 - level) / 2 by more
    than ``z`` binomial standard errors; otherwise another draw of as many replicates could put
    it on the other side of zero."""
    reps = _f64(replicates).reshape(-1)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return False, False
    tail = (1.0 - level) / 2.0
    margin = z * np.sqrt(tail * (1.0 - tail) / reps.size)

    def near(*fractions):
        return any(abs(f - tail) <= margin for f in fractions)

    return (near(np.mean(reps < 0), np.mean(reps <= 0)), near(np.mean(reps > 0), np.mean(reps >= 0)))


def bootstrap_ci(values, n_boot: int = 1000, seed=0, level: float = 0.95):
    """Percentile bootstrap confidence interval of the nan-aware mean over examples (axis 0).

    Draw ``n_boot`` resamples of the n examples with replacement (``np.random.default_rng(seed)``);
    each replicate's statistic is the mean of its non-NaN values; the interval is the
    ((1−level)/2, (1+level)/2) percentiles of the replicates (Efron's percentile method).
    ``values`` (n,) gives two floats; (n, ...) gives two arrays of shape (...) (e.g. per layer).
    Vectorised: the replicates are a (n_boot, n) count matrix times the values. Replicates that
    drew no defined value are skipped; with no defined value at all the interval is (NaN, NaN).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    v = _f64(values)
    if v.ndim == 0:
        raise ValueError("values must have at least one dimension (examples first)")
    n, rest = v.shape[0], v.shape[1:]
    if n == 0:
        log.warning("bootstrap_ci: no examples; returning NaN")
        nan = np.full(rest, np.nan)
        return (float("nan"), float("nan")) if not rest else (nan, nan.copy())
    counts = bootstrap_counts(n, n_boot, np.random.default_rng(seed))
    low, high = percentile_interval(bootstrap_means(v, counts), level)
    if np.isnan(low).any():
        log.warning("bootstrap_ci: %d outputs have no defined value; their interval is NaN", int(np.isnan(low).sum()))
    if not rest:
        return float(low), float(high)
    return low, high


def sign_flip_test(diffs, n_perm: int = 10000, seed=0) -> float:
    """Two-sided paired permutation test of mean(diffs) = 0, by random sign flips.

    ``diffs`` (n,) are paired differences (method A − method B per example; NaN entries are
    dropped). Under the null the sign of each difference is exchangeable, so the p-value is
    (1 + #{flips with |mean(s·d)| >= |mean(d)|}) / (1 + n_perm), s uniform on {−1, +1}^n
    (the +1 counts the observed assignment, so p is never 0). NaN with a warning when no
    difference is defined; 1.0 when every difference is 0.
    """
    d = _f64(diffs).reshape(-1)
    d = d[~np.isnan(d)]
    if d.size == 0:
        log.warning("sign_flip_test: no defined paired difference; p-value is NaN")
        return float("nan")
    rng = np.random.default_rng(seed)
    observed = abs(d.mean())
    tolerance = 1e-12 * max(1.0, float(np.abs(d).max()))  # flips tying with the observed mean count
    extreme = 0
    for start in range(0, n_perm, 1024):  # bounded memory: (chunk, n) signs at a time
        signs = rng.integers(0, 2, size=(min(1024, n_perm - start), d.size)) * 2.0 - 1.0
        extreme += int(np.count_nonzero(np.abs(signs @ d) / d.size >= observed - tolerance))
    return (1 + extreme) / (1 + n_perm)
