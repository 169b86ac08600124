"""The crossed seeds x examples design (icl_gd.metrics.inference): its replicates, their coverage on data of
known truth, the smallest effects of interest, and the power its planning promises."""

import math

import numpy as np
import pytest
from scipy import stats

from icl_gd.metrics import inference, resampling


def _shared_replicates(values: np.ndarray, n_boot: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """The seeds' points and their replicates under one resample of the examples for every seed."""
    counts = resampling.bootstrap_counts(values.shape[1], n_boot, rng)
    return values.mean(axis=1), np.stack([resampling.bootstrap_means(v, counts) for v in values])


def test_the_seeds_part_is_a_student_t_on_their_spread():
    """No example noise: the interval is the t interval on the seeds' means, to the Monte Carlo
    error of the stratified t draws (tiny)."""
    points = np.array([0.2, 0.5, 1.1])
    reps = np.repeat(points[:, None], 4000, axis=1)
    combined, spread = inference.crossed_replicates(points, reps, inference.stratified_uniforms(4000, 0))
    half = stats.t.ppf(0.975, 2) * points.std(ddof=1) / math.sqrt(3)
    low, high = resampling.percentile_interval(combined, 0.95)
    assert (low, high) == pytest.approx((points.mean() - half, points.mean() + half), rel=0.01)
    assert float(spread.between) == pytest.approx(points.var(ddof=1) / 3) and float(spread.within) < 1e-20


def test_the_examples_every_seed_shares_are_counted_once_and_not_divided_by_the_seeds():
    """Seeds whose values are the same per example (the examples' noise is all they share): the
    replicates are the examples' bootstrap of one seed, and the shared part C is its variance."""
    rng = np.random.default_rng(0)
    values = np.repeat(rng.normal(0, 1, (1, 200)), 5, axis=0)
    points, reps = _shared_replicates(values, 2000, rng)
    combined, spread = inference.crossed_replicates(points, reps, inference.stratified_uniforms(2000, rng))
    np.testing.assert_allclose(combined, reps[0])
    assert float(spread.within) == pytest.approx(reps[0].var(ddof=1)) and float(spread.between) < 1e-20
    # independent per-seed noise: C near 0, the seeds' spread carries it
    values = rng.normal(0, 1, (5, 200))
    points, reps = _shared_replicates(values, 4000, rng)
    _, spread = inference.crossed_replicates(points, reps)
    assert abs(float(spread.shared)) < 0.3 * float(spread.unshared) / 5


def test_one_seed_is_the_examples_bootstrap_alone():
    rng = np.random.default_rng(1)
    reps = rng.normal(size=(1, 300))
    combined, spread = inference.crossed_replicates([0.0], reps, inference.stratified_uniforms(300, rng))
    np.testing.assert_array_equal(combined, reps[0])
    assert float(spread.between) == 0.0 and np.isnan(spread.seeds_var)


def test_an_undefined_seed_is_left_out():
    rng = np.random.default_rng(2)
    points = np.array([0.1, np.nan, 0.3])
    reps = points[:, None] + rng.normal(0, 0.01, (3, 500))
    combined, spread = inference.crossed_replicates(points, reps, inference.stratified_uniforms(500, rng))
    assert int(spread.n_seeds) == 2 and np.isfinite(combined).all()
    assert np.median(combined) == pytest.approx(0.2, abs=0.02)


def test_stratified_uniforms_hold_one_draw_per_stratum():
    u = inference.stratified_uniforms(1000, 3)
    assert np.array_equal(np.sort(np.floor(u * 1000)), np.arange(1000))


# designs the two-level bootstrap of issue 47 covered at 0.81 and 0.74 at a nominal 95% with three seeds
def _seed_dominated(rng, n_seeds, n):
    return rng.normal(0, 1, (n_seeds, 1)) + rng.normal(0, 1, (n_seeds, n))  # seeds' SD 1, per-seed SE 0.1


def _shared_examples(rng, n_seeds, n):
    return rng.normal(0, 1, (1, n)) + rng.normal(0, 0.3, (n_seeds, n))  # no seed effect, examples shared


@pytest.mark.parametrize("design", [_seed_dominated, _shared_examples])
def test_the_interval_holds_its_level_with_three_seeds(design):
    """A few hundred simulations of the designs that failed (benchmarks/coverage.py runs all of
    them, 2000 times each): coverage of the true mean 0 at least 0.90 at a nominal 95%."""
    rng = np.random.default_rng(47)
    sims = 300
    covered = 0
    for _ in range(sims):
        low, high = inference.crossed_interval(design(rng, 3, 100), level=0.95, n_boot=1000, rng=rng)
        covered += low <= 0.0 <= high
    assert covered / sims >= 0.90


def test_needed_seeds_give_the_power_they_promise():
    """Seeds that spread with SD 1 around a true difference of 1, examples with a per-seed
    SE of 0.1: the planning's number of seeds, simulated, finds the difference about 80% of the time
    (the t approximation: within a few points); half of them markedly less often."""
    spread = inference.Spread(n_seeds=3, seeds_var=1.01, shared=0.0, unshared=0.01, n_examples=100)
    factor = inference.needed_factor(1.0, 0.95, [spread], currency="seeds")
    seeds = round(3 * factor)
    assert 8 <= seeds <= 14
    rng = np.random.default_rng(0)

    def power(n_seeds, sims=300):
        found = 0
        for _ in range(sims):
            values = 1.0 + _seed_dominated(rng, n_seeds, 100)
            low, _ = inference.crossed_interval(values, level=0.95, n_boot=400, rng=rng)
            found += low > 0
        return found / sims

    assert 0.70 <= power(seeds) <= 0.92
    assert power(max(seeds // 2, 2)) < 0.65
    # more examples cannot narrow the seeds' spread; one seed says nothing of it
    assert math.isinf(inference.needed_factor(1.0, 0.95, [spread], currency="examples"))
    one = inference.Spread(n_seeds=1, seeds_var=math.nan, shared=0.01, unshared=0.0, n_examples=100)
    assert math.isinf(inference.needed_factor(1.0, 0.95, [one], currency="seeds"))
    # with one seed, examples: a normal test; 0.1 standard error now, an effect of 0.1 needs (1.96 + 0.84)^2 x
    assert inference.needed_factor(0.1, 0.95, [one], currency="examples") == pytest.approx(2.8016**2, rel=0.02)


def test_the_mean_over_tasks_pools_the_seeds_parts_with_welchs_degrees_of_freedom():
    """Six tasks of three seeds, no example noise, equal spreads: the mean's seeds' part is one t with
    (6 b)^2 / (6 b^2 / 2) = 12 degrees of freedom, not the sum of six t's with 2 (whose heavy tails
    made the interval of the mean cover 100% at a nominal 95%)."""
    points = np.array([0.0, 0.3, 0.6])
    reps = np.repeat(points[:, None], 4000, axis=1)
    parts, spreads = zip(*(inference.crossed_replicates(points, reps) for _ in range(6)))
    combined = inference.mean_of_tasks(list(parts), list(spreads), inference.stratified_uniforms(4000, 0))
    sd = math.sqrt(6 * points.var(ddof=1) / 3) / 6
    low, high = resampling.percentile_interval(combined, 0.95)
    assert (low, high) == pytest.approx(
        (0.3 - stats.t.ppf(0.975, 12) * sd, 0.3 + stats.t.ppf(0.975, 12) * sd), rel=0.01
    )
    # one seed per task: nothing of the seeds, the examples' parts averaged
    one = inference.mean_of_tasks(
        [np.arange(5.0)] * 2, [inference.Spread(1, np.nan, 0.1, 0.0)] * 2, inference.stratified_uniforms(5, 0)
    )
    np.testing.assert_array_equal(one, np.arange(5.0))


def test_the_resamples_standard_errors_are_their_own_spread():
    rng = np.random.default_rng(5)
    values = rng.normal(size=50)
    values[[3, 7]] = np.nan
    counts = resampling.bootstrap_counts(50, 20, rng)
    got = resampling.bootstrap_standard_errors(values, counts)
    for row, se in zip(counts, got):
        drawn = np.repeat(values, row.astype(int))
        drawn = drawn[~np.isnan(drawn)]
        assert se == pytest.approx(drawn.std() / math.sqrt(drawn.size))


def test_enough_replicates_for_the_highest_level():
    assert inference.replicates_for(1000, 0.95) == 1000
    assert inference.replicates_for(1000, 1 - 0.05 / 6) == 6000
    values = np.random.default_rng(3).normal(size=(1, 80))
    both = inference.crossed_interval(values, level=(0.95, 1 - 0.05 / 6), rng=4)
    # one seed: the examples' bootstrap alone, on 6000 resamples for both levels
    reps = resampling.bootstrap_means(values[0], resampling.bootstrap_counts(80, 6000, np.random.default_rng(4)))
    for got, level in zip(both, (0.95, 1 - 0.05 / 6)):
        assert got == pytest.approx(tuple(resampling.percentile_interval(reps, level)))


def _skewed(rng, n_seeds, n):
    """Example effects lognormal(0, 1.5) shared by every seed (centred: the truth is 0), little else."""
    return rng.lognormal(0, 1.5, (1, n)) - math.exp(1.125) + rng.normal(0, 0.2, (n_seeds, n))


def test_studentized_examples_reach_towards_the_long_tail_and_cost_little_where_scores_are_symmetric():
    """Skewed example effects (benchmarks/coverage.py has the claims' sizes): the percentile
    interval misses mostly below the truth; the studentized one misses about half as often there.
    Normal example effects: the studentized interval is within 10% of the percentile one's width."""
    rng = np.random.default_rng(62)
    sims = 300
    hits, below = {False: 0, True: 0}, {False: 0, True: 0}
    for _ in range(sims):
        values = _skewed(rng, 3, 40)
        for studentize in (False, True):
            low, high = inference.crossed_interval(values, level=0.95, rng=rng, studentize=studentize)
            hits[studentize] += low <= 0.0 <= high
            below[studentize] += high < 0.0
    assert hits[True] >= hits[False] + 0.05 * sims
    assert below[True] <= 0.6 * below[False]
    widths = {False: [], True: []}
    for _ in range(100):
        values = rng.normal(0, 1, (1, 100)) + rng.normal(0, 0.3, (3, 100))
        for studentize in (False, True):
            low, high = inference.crossed_interval(values, level=1 - 0.05 / 6, rng=rng, studentize=studentize)
            widths[studentize].append(high - low)
    assert np.median(widths[True]) <= 1.10 * np.median(widths[False])


def test_few_examples_keep_the_percentile_interval():
    """Below STUDENTIZE_FROM defined examples a resample's standard error is too rough to divide by:
    no errors, and crossed_interval gives the percentile interval."""
    rng = np.random.default_rng(8)
    few = rng.lognormal(0, 1, (3, inference.STUDENTIZE_FROM - 1))
    counts = resampling.bootstrap_counts(few.shape[1], 50, rng)
    assert inference.mean_errors(few, counts) is None
    assert inference.crossed_interval(few, rng=1, studentize=True) == inference.crossed_interval(few, rng=1)
    enough = np.c_[few, np.ones((3, 1)), np.full((3, 1), np.nan)]
    errors, sample = inference.mean_errors(enough, resampling.bootstrap_counts(enough.shape[1], 50, rng))
    assert errors.shape == (50,) and sample > 0
