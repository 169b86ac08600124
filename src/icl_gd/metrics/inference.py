"""Inference on a task's crossed seeds x examples design: the interval of a score's mean over seeds
(and of a paired difference), the smallest effect of interest of each score, and the number of
seeds or examples at which a test has the power to find it.

The design
----------
Every seed of a task (a draw of demonstrations and of the finetuning order) is evaluated on the
same examples (``data.select_eval`` fixes the evaluation set), and so are ZSL and every setting and
variant of the task: seeds and examples are *crossed* random factors, as readers and cases are in
a multi-reader multi-case study. A score's per-example value is, in the random-effects model,

    y_si = mu + a_s + b_i + e_si     (seed effect a, example effect b, their interaction e),

and the mean over S seeds and n examples has the variance

    Var = sigma_a^2 / S + sigma_b^2 / n + sigma_e^2 / (S n).

The seeds' sample variance s^2 of their scores estimates sigma_a^2 + sigma_e^2 / n (the example
effect every seed shares cancels from it), and C, the covariance between two seeds' scores under a
resample of the examples (one resample applied to every seed), estimates sigma_b^2 / n. So

    V = s^2 / S + max(C, 0)

(Obuchowski & Rockette 1995, with Hillis's 2007 truncation), and V / (what it estimates) has
Hillis's degrees of freedom

    df = V^2 / ((s^2 / S)^2 / (S - 1)),

S - 1 where the seeds' spread dominates and many where the shared examples do. Resampling the
examples independently per seed would divide the shared example noise by S; resampling the seeds
as a bootstrap knows only the S seeds it saw (with three, each end of its interval sits at most
1.22 times the farthest seed's deviation from their mean, where a t quantile with 2 degrees of
freedom is 4.30 standard errors at 95%).

The interval keeps the bootstrap's shape for the examples and a Student t for the seeds: a
replicate is

    pbar + c (m_r - pbar) + sqrt(s^2 / S) t_r,    c^2 = max(C, 0) / Var_r(m_r),

m_r the mean over seeds of the scores on the r-th shared resample of the examples (its deviation
shrunk to the shared part C: the part each seed does not share is already in s^2), and t_r a
Student t with S - 1 degrees of freedom (stratified draws, so that the seeds' part carries little
Monte Carlo noise). Its percentile interval is the t interval where the seeds dominate, the
examples' bootstrap interval where they do, and their convolution (a Monte Carlo Satterthwaite)
in between. With one seed the seeds' spread is unknown: the replicates are the examples' bootstrap
alone, and the reports say so. ``benchmarks/coverage.py`` measures the coverage by simulation.

Smallest effects of interest
----------------------------
Each score's margin, the difference below which a change is read as negligible, is its row's in
the metric catalog (``metrics/catalog.py``, :func:`catalog.margin`), with the reasons.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from icl_gd.metrics import resampling

__all__ = [
    "POWER",
    "STUDENTIZE_FROM",
    "stratified_uniforms",
    "Spread",
    "crossed_replicates",
    "mean_errors",
    "seeds_part",
    "mean_of_tasks",
    "mean_variance",
    "crossed_interval",
    "needed_factor",
    "replicates_for",
    "studentized",
]

POWER = 0.8  # the power "what it would need" plans for
# Fewer examples than this, and a resample's standard error is too rough to divide by (F -> T's
# few examples: a bootstrap-t of 2 to 20 values reaches past the score's range); percentile there.
STUDENTIZE_FROM = 30


def stratified_uniforms(n_boot: int, rng) -> np.ndarray:
    """``n_boot`` uniforms on (0, 1), one in each of ``n_boot`` equal strata, in random order: the
    quantiles at which the seeds' part of :func:`crossed_replicates` is drawn (stratified, so that
    a tail holds as many draws as its probability says, whatever the stream)."""
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    return (rng.permutation(n_boot) + rng.random(n_boot)) / n_boot


@dataclass(frozen=True)
class Spread:
    """The variance of a mean over seeds, in its parts (floats, or arrays of one shape):
    ``n_seeds`` S, the seeds' sample variance ``seeds_var`` s^2 of their scores (NaN with one seed),
    ``shared`` C (the variance of the mean that the examples all seeds share give; with one seed,
    all of the examples' variance), ``unshared`` w (per seed, the examples' variance the other
    seeds do not share, part of s^2), and ``n_examples``."""

    n_seeds: np.ndarray | float
    seeds_var: np.ndarray | float
    shared: np.ndarray | float
    unshared: np.ndarray | float
    n_examples: int = 0

    @property
    def between(self):
        """The variance of the mean that the seeds' spread gives: s^2 / S (0 with one seed)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(
                np.asarray(self.n_seeds) >= 2, np.asarray(self.seeds_var) / np.maximum(self.n_seeds, 1), 0.0
            )

    @property
    def within(self):
        """The variance of the mean that the shared examples give (all the examples' with one seed)."""
        return np.asarray(self.shared, dtype=np.float64)

    def at(self, seeds: float = 1.0, examples: float = 1.0) -> tuple[float, float, float]:
        """(variance, seeds' term, its degrees of freedom) of the mean with ``seeds`` times the seeds
        and ``examples`` times the examples per seed: the seeds' variance sigma_a^2 stays, the
        examples' parts shrink as 1 / examples. Scalars only."""
        n_seeds = float(self.n_seeds)
        if n_seeds < 2 or not math.isfinite(float(self.seeds_var)):
            return float(self.shared) / examples, 0.0, math.inf
        seeds_part = max(float(self.seeds_var) - float(self.unshared), 0.0) + float(self.unshared) / examples
        n_new = n_seeds * seeds
        term = seeds_part / n_new
        return term + float(self.shared) / examples, term, n_new - 1.0


def _hillis_df(variance, seed_term, seed_df):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(seed_term > 0, variance**2 / (seed_term**2 / np.maximum(seed_df, 1e-12)), np.inf)


def replicates_for(n_boot: int, level: float, reference: float = 0.95) -> int:
    """Replicates for a percentile interval at ``level``: as many beyond each end as ``n_boot`` give
    one at ``reference`` (6000 at 99.17% for 1000 at 95%: about 25 beyond each end, not 4)."""
    return max(n_boot, math.ceil(n_boot * (1.0 - reference) / (1.0 - level) - 1e-9))


def studentized(deviations, errors, error) -> np.ndarray:
    """The examples' part of a bootstrap-t interval as replicates: each resample's deviation from
    the point, divided by its own standard error (``errors``, (R, ...)) and scaled by the sample's
    (``error``), reflected. Its percentile interval is the studentized one, p - se t*_(1 - tail) ..
    p - se t*_(tail): where the examples' scores are skewed, a resample that missed the long tail
    has a small mean *and* a small spread, so its t is far out and the interval reaches further
    towards the tail than the percentile one. A resample with no spread keeps its deviation."""
    deviations, errors = np.asarray(deviations, dtype=np.float64), np.asarray(errors, dtype=np.float64)
    error = np.asarray(error, dtype=np.float64)
    spread = (error > 0) & (errors > 1e-9 * error)  # not a rounding error's spread of equal values
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.where(spread, -error * (deviations / np.where(spread, errors, 1.0)), deviations)


def mean_errors(values, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`crossed_replicates`' ``errors`` for per-seed x per-example values (S, n, ...): the
    standard error of the mean over seeds and examples on each resample (rows of ``counts``;
    (R, ...)) and on the sample ((...)), from each example's value averaged over the seeds it is
    defined in. None with fewer than :data:`STUDENTIZE_FROM` defined examples (the percentile
    interval then)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an example undefined in every seed
        per_example = np.nanmean(np.asarray(values, dtype=np.float64), axis=0)
    if np.min(np.isfinite(per_example).sum(axis=0), initial=per_example.shape[0]) < STUDENTIZE_FROM:
        return None
    return (
        resampling.bootstrap_standard_errors(per_example, counts),
        resampling.bootstrap_standard_errors(per_example, np.ones((1, per_example.shape[0])))[0],
    )


def crossed_replicates(
    points, replicates, uniforms: np.ndarray | None = None, *, errors: tuple | None = None
) -> tuple[np.ndarray, Spread]:
    """Replicates of a mean over seeds on a crossed seeds x examples design, and its :class:`Spread`.

    ``points`` (S, ...) are the seeds' scores, ``replicates`` (S, R, ...) their scores on R
    resamples of the examples, *the same resample for every seed* (one count matrix applied to all:
    :func:`resampling.bootstrap_counts`), ``uniforms`` (R,) the quantiles of the seeds' Student t
    (:func:`stratified_uniforms`; without them the replicates carry the examples' part alone). A
    replicate is pbar + c (m_r - pbar) + sqrt(s^2 / S) t_r (the module's docstring): with one
    defined seed, that seed's example replicates. An undefined seed (NaN point) is left out; a
    resample on which a seed's score is undefined leaves that seed out of its mean. ``errors``
    (the standard error of the mean over seeds on each resample, (R, ...), and on the sample, (...):
    :func:`mean_errors`) make the examples' part studentized (:func:`studentized`), for scores
    that can be skewed.
    """
    points, reps = np.asarray(points, dtype=np.float64), np.asarray(replicates, dtype=np.float64)
    if reps.shape[:1] + reps.shape[2:] != points.shape:
        raise ValueError(
            f"replicates {reps.shape} do not match the seeds' points {points.shape}: (S, R, ...) and (S, ...)"
        )
    defined = np.isfinite(points)
    n = defined.sum(axis=0)
    reps = np.where(defined[:, None], reps, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a cell undefined in every seed stays NaN
        pbar = np.nanmean(np.where(defined, points, np.nan), axis=0)
        seeds_var = (
            np.nanvar(np.where(defined, points, np.nan), axis=0, ddof=1)
            if points.shape[0] > 1
            else np.full_like(pbar, np.nan)
        )
        m = np.nanmean(reps, axis=0)  # (R, ...)
        ddof = 1 if reps.shape[1] > 1 else 0
        v_mean = np.nanvar(m, axis=0, ddof=ddof)
        per_seed = np.nanmean(np.nanvar(reps, axis=1, ddof=ddof), axis=0)  # W
    v_mean, per_seed = np.nan_to_num(v_mean), np.nan_to_num(per_seed)
    many = n >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        covariance = np.where(many, (n * v_mean - per_seed) / np.maximum(n - 1, 1), per_seed)
    shared = np.maximum(covariance, 0.0)
    unshared = np.where(many, np.maximum(per_seed - shared, 0.0), 0.0)
    seeds_var = np.where(many, seeds_var, np.nan)
    spread = Spread(n_seeds=n, seeds_var=seeds_var, shared=shared, unshared=unshared, n_examples=0)
    deviations = m - pbar if errors is None else studentized(m - pbar, *errors)
    alone = m if errors is None else pbar + deviations  # a seed's own examples' part
    if not many.any():
        return alone, spread
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.where(many & (v_mean > 0), np.sqrt(shared / np.where(v_mean > 0, v_mean, 1.0)), 1.0)
    combined = np.where(many, pbar + c * deviations, alone)
    if uniforms is None:
        return combined, spread
    return combined + seeds_part(spread, uniforms), spread


def _t(uniforms, df) -> np.ndarray:
    """Student t quantiles at ``uniforms`` (R,) for each of ``df`` (an array): (R, *df.shape)."""
    u = np.asarray(uniforms, dtype=np.float64)
    df = np.asarray(df, dtype=np.float64)
    t = np.zeros((u.size,) + df.shape)
    for k in np.unique(df[np.isfinite(df) & (df > 0)]):
        t[:, df == k] = stats.t.ppf(u, k)[:, None]
    t[:, np.isinf(df)] = stats.norm.ppf(u)[:, None]
    return t


def seeds_part(spread: Spread, uniforms) -> np.ndarray:
    """The seeds' part of :func:`crossed_replicates`: sqrt(s^2 / S) times a Student t with S - 1
    degrees of freedom at ``uniforms`` (R,); 0 with fewer than two seeds."""
    n = np.asarray(spread.n_seeds)
    return np.sqrt(np.nan_to_num(spread.between)) * _t(uniforms, np.where(n >= 2, n - 1, 0))


def mean_of_tasks(parts: list[np.ndarray], spreads: list[Spread], uniforms) -> np.ndarray:
    """Replicates of the mean over independent tasks of their means over seeds, from each task's
    examples' part (:func:`crossed_replicates` without uniforms) and :class:`Spread`: the examples'
    parts averaged, and the seeds' parts as one Student t whose variance is the tasks' together,
    (1/T^2) sum s_t^2 / S_t, with Satterthwaite's (Welch's) degrees of freedom
    (sum b_t)^2 / sum b_t^2 / (S_t - 1), b_t = s_t^2 / S_t. One t per task instead would add up the
    heavy tails of six t's with 2 degrees of freedom: an interval of the mean far wider than its
    level needs (it covered 100% at a nominal 95% in ``benchmarks/coverage.py``)."""
    k = len(parts)
    between = [float(np.nan_to_num(s.between)) for s in spreads]
    dfs = [float(s.n_seeds) - 1.0 for s in spreads]
    total = sum(between)
    terms = sum(b**2 / d for b, d in zip(between, dfs) if b > 0 and d > 0)
    df = total**2 / terms if terms > 0 else np.inf
    examples = np.mean(np.stack(parts), axis=0)
    if total <= 0:
        return examples
    return examples + np.sqrt(total) / k * _t(uniforms, np.asarray(df)).reshape(-1)


def crossed_interval(
    a,
    b=None,
    *,
    level: float | tuple[float, ...] = 0.95,
    n_boot: int = 1000,
    rng=0,
    studentize: bool = False,
):
    """The interval (low, high) at ``level`` of the mean over seeds and examples of ``a`` - ``b``,
    per-seed x per-example values (S, n) of a paired comparison (``b`` None: of ``a`` alone), as the
    claims draw it (:func:`crossed_replicates`): one resample of the n examples applied to every
    seed and to both a and b, the seeds' spread as a Student t with S - 1 degrees of freedom. NaN
    values are left out of their seed's mean. ``n_boot`` replicates for a 95% interval, more for a
    higher level (:func:`replicates_for`, for the highest of several). Several levels (a tuple): a
    list of intervals from the same replicates. ``studentize``: the examples' part as a bootstrap-t
    (what the claims do for similarity scores, which can be skewed; accuracy-like 0/1 differences
    keep the percentile one, which the studentized one undercovers where they are sparse)."""
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    a = np.asarray(a, dtype=np.float64)
    b = np.zeros_like(a) if b is None else np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"a and b must be (seeds, examples) of one shape; got {a.shape} and {b.shape}")
    n_boot = replicates_for(n_boot, max(np.atleast_1d(level)))
    counts = resampling.bootstrap_counts(a.shape[1], n_boot, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        points = np.nanmean(a, axis=1) - np.nanmean(b, axis=1)
    if np.isnan(a).any() or np.isnan(b).any():  # each cell's own defined values, as the claims' scores
        reps = (resampling.bootstrap_means(a.T, counts) - resampling.bootstrap_means(b.T, counts)).T
    else:  # the same, in one product
        reps = resampling.bootstrap_means((a - b).T, counts).T
    errors = mean_errors(a - b, counts) if studentize else None
    combined, _ = crossed_replicates(points, reps, stratified_uniforms(n_boot, rng), errors=errors)
    intervals = [tuple(float(x) for x in resampling.percentile_interval(combined, lv)) for lv in np.atleast_1d(level)]
    return intervals if isinstance(level, (tuple, list)) else intervals[0]


def mean_variance(spreads: list[Spread], seeds: float = 1.0, examples: float = 1.0) -> tuple[float, float]:
    """(variance, degrees of freedom) of the mean of ``spreads``' means (independent: tasks), with
    ``seeds`` and ``examples`` times the seeds and examples (:meth:`Spread.at`): Hillis's degrees of
    freedom for one, Satterthwaite's over the seeds' terms for several."""
    parts = [s.at(seeds, examples) for s in spreads]
    k = len(parts)
    variance = sum(p[0] for p in parts) / k**2
    denominator = sum((p[1] / k**2) ** 2 / p[2] for p in parts if p[1] > 0 and math.isfinite(p[2]))
    return variance, (variance**2 / denominator if denominator > 0 else math.inf)


def power_reached(
    effect: float, level: float, spreads: list[Spread], seeds: float = 1.0, examples: float = 1.0, power: float = POWER
) -> bool:
    """Whether a two-sided interval at ``level`` of the mean of ``spreads``' means excludes zero with
    probability ``power`` when the truth is ``effect``: |effect| >= (t_{1-(1-level)/2} + t_power) sd,
    with Hillis's degrees of freedom."""
    variance, df = mean_variance(spreads, seeds, examples)
    if not variance > 0:
        return abs(effect) > 0
    quantile = stats.t.ppf(1.0 - (1.0 - level) / 2.0, df) + stats.t.ppf(power, df)
    return abs(effect) >= quantile * math.sqrt(variance)


def needed_factor(
    effect: float, level: float, spreads: list[Spread], *, currency: str, power: float = POWER, limit: int = 10**6
) -> float:
    """The smallest factor on the seeds (``currency`` "seeds") or on the examples per seed
    ("examples") at which a test at ``level`` has ``power`` to find ``effect`` (:func:`power_reached`),
    from the run's own variance parts; at least 1; inf where no size up to ``limit`` times the
    current does (more examples cannot narrow the seeds' spread), and with one seed for the seeds
    (nothing yet says how far they spread)."""
    if not math.isfinite(effect) or effect == 0 or not spreads:
        return math.inf
    if currency not in ("seeds", "examples"):
        raise ValueError(f"currency must be 'seeds' or 'examples', got {currency!r}")
    sizes = [float(s.n_seeds) if currency == "seeds" else s.n_examples for s in spreads]
    base = max(int(max(sizes)), 1)
    if currency == "seeds" and base < 2:
        return math.inf

    def reached(size: int) -> bool:
        factor = size / base
        return power_reached(
            effect,
            level,
            spreads,
            seeds=factor if currency == "seeds" else 1.0,
            examples=factor if currency == "examples" else 1.0,
            power=power,
        )

    if reached(base):
        return 1.0
    high = base * 2
    while not reached(high):
        if high >= base * limit:
            return math.inf
        high *= 2
    low = high // 2  # not reached
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reached(mid) else (mid, high)
    return high / base
