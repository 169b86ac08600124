"""Tests of icl_gd.metrics.scoring: one run's metrics from hand-made caches, and the aggregate over seeds."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import math  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from icl_gd.activations import cache  # noqa: E402
from icl_gd.activations.cache import RunCache  # noqa: E402
from icl_gd.metrics import catalog, comparisons, formulas, resampling, scoring, statistics

TMP = tempfile.mkdtemp(prefix="test_scoring-")  # the hand-made caches (memory-mapped while the tests run)

COLUMNS = ["model", "variant", "task", "seed", "method", "metric", "layer", "value", "ci_low", "ci_high"]
GOLD = np.array([0, 1, 1, 0])
PRED = {
    "zsl": [1, 0, 1, 0],
    "icl": [0, 0, 1, 0],
    "gd": [0, 1, 1, 1],
    "icl_permuted": [1, 0, 0, 0],
    "icl_novel": [1, 1, 1, 1],
}
R2 = 1 / math.sqrt(2)


def attn_out(setting: str) -> np.ndarray:
    """(4 examples, 2 layers, 2 dims). ZSL at e1; ICL at e1+e2; FT at e1+e2 in layer 0 (update
    cosine 1) and, in layer 1, at e1-e2 for examples 0-1 (cosine -1), 2e1+e2 for 2-3 (cosine 1/sqrt2)."""
    h = np.zeros((4, 2, 2))
    if setting == "zsl":
        h[:] = [1, 0]
    elif setting == "icl":
        h[:] = [1, 1]
    else:
        h[:, 0] = [1, 1]
        h[:2, 1] = [1, -1]
        h[2:, 1] = [2, 1]
    return h


def attn_scores(setting: str) -> np.ndarray:
    """(4, 2 layers, 1 head, 3 keys); example 3's query has 2 keys (NaN past them)."""
    base = {
        "zsl": [1.0, 0.0, 0.0],
        "icl": [1.0, 1.0, 0.0],
        "gd": [1.0, 1.0, 1.0],
        "icl_permuted": [1.0, 0.5, 0.0],
        "icl_novel": [1.0, 0.0, 0.5],
    }[setting]
    m = np.tile(np.array(base), (4, 2, 1, 1))
    m[:, 1] *= 2.0  # layer 1: same directions, other scale
    m[3, :, :, 2] = np.nan
    return m


def run_cache(
    setting: str,
    *,
    example_id=(5, 6, 7, 8),
    seed: int = 2,
    layout: str = "float32",
    reference: RunCache | None = None,
    gold=GOLD,
    **meta,
) -> RunCache:
    """The setting's records written as a cache and read back (float32: the hand values exactly)."""
    n = len(example_id)
    logprobs = np.full((n, 2), -2.0, dtype=np.float32)
    logprobs[np.arange(n), PRED[setting]] = -0.1
    path = Path(tempfile.mkdtemp(dir=TMP)) / f"{setting}.arrow"
    cache.write_cache(
        path,
        {"model": "tiny", "variant": "trained", "task": "sst2", "seed": seed, "setting": setting, **meta},
        example_id=np.array(example_id),
        gold=gold,
        label_logprobs=logprobs,
        query_len=np.array([3, 3, 3, 2]),
        attn_out=attn_out(setting),
        attn_scores=attn_scores(setting),
        context_scores=np.zeros((n, 2, 1)),
        layout=layout,
        reference=reference,
    )
    return cache.read_cache(path, reference)


@pytest.fixture(scope="module")
def table():
    return scoring.score_run(run_cache("zsl"), run_cache("icl"), run_cache("gd"), random_seed=0)


def value(table, metric, layer=None):
    rows = table[(table.metric == metric) & (table.layer.isna() if layer is None else table.layer == layer)]
    assert len(rows) == 1, (metric, layer)
    return float(rows.value.iloc[0])


def test_tidy_columns_and_types(table):
    assert list(table.columns) == COLUMNS
    assert str(table.layer.dtype) == "Int64" and table.seed.dtype == np.int64 and table.value.dtype == np.float64
    assert set(table.model) == {"tiny"} and set(table.variant) == {"trained"} and set(table.task) == {"sst2"}
    assert set(table.seed) == {2} and set(table.method) == {"gd"}  # the FT cache's setting names the method
    similarities = ["simaou", "simaou_norm", "simam_before", "simam_after", "simam_delta"]
    per_layer = similarities + ["simaou_random", "simaou_random_gaussian"] + [f"{m}_f2t" for m in similarities]
    scalars = [
        "acc_zsl",
        "acc_icl",
        "acc_ft",
        "rec2ftp",
        "jaccard_all",
        "jaccard_correct",
        "jaccard_incorrect",
        "kl_icl_ft",
        "kl_icl_zsl",
        "tv_icl_ft",
        "n_f2t",
    ] + [f"changes_{p}_{c}" for c in ("correct", "incorrect") for p in ("icl_only", "ft_only", "both")]
    assert len(table) == len(scalars) + 3 * len(per_layer)  # layers 0, 1 and the mean
    for metric in per_layer:
        layers = table[table.metric == metric].layer
        assert sorted(layers.dropna().tolist()) == [0, 1] and layers.isna().sum() == 1
    for metric in scalars:
        assert table[table.metric == metric].layer.isna().all()


def test_prediction_metrics(table):
    assert value(table, "acc_zsl") == 0.5
    assert value(table, "acc_icl") == 0.75
    assert value(table, "acc_ft") == 0.75
    # FT fixed examples 0 and 1; ICL fixed example 0 of them
    assert value(table, "rec2ftp") == pytest.approx(50.0)
    # D_ICL = {0}, D_FT = {0, 1, 3}, both changed 0 to the same label: 1 / (1 + 3 - 1)
    assert value(table, "jaccard_all") == pytest.approx(1 / 3)
    # correct changes: ICL {0}, FT {0, 1}; incorrect: ICL {}, FT {3}
    assert value(table, "jaccard_correct") == pytest.approx(1 / 2)
    assert value(table, "jaccard_incorrect") == pytest.approx(0.0)


def test_output_distributions(table):
    # every cache's label log-probs are -0.1 at its prediction and -2.0 at the other word, so where
    # two settings predict alike their distributions agree, and elsewhere they are each other's swap:
    # KL = (p - q)(log p - log q) = (p - q) * 1.9, TV = p - q, p = softmax(-0.1, -2.0)[0]
    p = 1 / (1 + math.exp(-1.9))
    kl, tv = (2 * p - 1) * 1.9, 2 * p - 1
    assert value(table, "kl_icl_ft") == pytest.approx(2 / 4 * kl)  # ICL and GD differ on examples 1 and 3
    assert value(table, "kl_icl_zsl") == pytest.approx(1 / 4 * kl)  # ICL and ZSL on example 0
    assert value(table, "tv_icl_ft") == pytest.approx(2 / 4 * tv)
    rows = table[table.metric == "kl_icl_ft"]
    assert float(rows.ci_low.iloc[0]) <= 2 / 4 * kl <= float(rows.ci_high.iloc[0])


def test_simaou(table):
    assert value(table, "simaou", 0) == pytest.approx(1.0)
    layer1 = (-1 - 1 + R2 + R2) / 4
    assert value(table, "simaou", 1) == pytest.approx(layer1)
    assert value(table, "simaou") == pytest.approx((1.0 + layer1) / 2)  # the run value: mean over layers


def test_simaou_norm(table):
    # normalised: z = e1, icl = (1,1)/sqrt2; layer 0 ft = icl: cosine 1
    assert value(table, "simaou_norm", 0) == pytest.approx(1.0)
    d_icl = np.array([R2 - 1, R2])
    ft_a = np.array([R2 - 1, -R2])  # (1,-1)/sqrt2 - e1
    ft_b = np.array([2, 1]) / math.sqrt(5) - np.array([1, 0])
    cos = lambda a, b: float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))  # noqa: E731
    expected = (2 * cos(d_icl, ft_a) + 2 * cos(d_icl, ft_b)) / 4
    assert value(table, "simaou_norm", 1) == pytest.approx(expected)
    assert value(table, "simaou_norm") == pytest.approx((1 + expected) / 2)


def test_simam(table):
    # before = cos(icl, zsl) = cos((1,1,0),(1,0,0)) = 1/sqrt2 for every example (example 3 over 2 keys:
    # cos((1,1),(1,0)), the same); after = cos(icl, ft): 2/sqrt6 over 3 keys, 1 over 2 keys
    for layer in (0, 1):
        assert value(table, "simam_before", layer) == pytest.approx(R2)
        assert value(table, "simam_after", layer) == pytest.approx((3 * 2 / math.sqrt(6) + 1.0) / 4)
    # delta: icl - zsl = (0,1,0), ft - zsl = (0,1,1): 1/sqrt2 over 3 keys, 1 over 2 keys
    assert value(table, "simam_delta", 0) == pytest.approx((3 * R2 + 1) / 4)
    assert value(table, "simam_delta") == pytest.approx((3 * R2 + 1) / 4)


def test_random_baseline_is_seeded(table):
    again = scoring.score_run(run_cache("zsl"), run_cache("icl"), run_cache("gd"), random_seed=0)
    other = scoring.score_run(run_cache("zsl"), run_cache("icl"), run_cache("gd"), random_seed=1)
    assert value(again, "simaou_random", 1) == value(table, "simaou_random", 1)
    assert value(other, "simaou_random", 1) != value(table, "simaou_random", 1)
    expected = formulas.simaou_random(attn_out("zsl"), attn_out("icl"), np.random.default_rng(0))
    assert value(table, "simaou_random", 0) == pytest.approx(expected[0])


def test_misaligned_examples_are_refused():
    with pytest.raises(ValueError, match="different evaluation examples"):
        scoring.score_run(run_cache("zsl"), run_cache("icl", example_id=(5, 6, 8, 7)), run_cache("gd"))
    with pytest.raises(ValueError, match="'zsl' and 'gd'"):
        scoring.score_run(run_cache("zsl"), run_cache("icl"), run_cache("gd", example_id=(1, 2, 3, 4)))


def test_aggregate_mean_sample_std_and_n():
    rows = []
    for seed, v in zip((2, 3, 4), (1.0, 2.0, 4.0)):
        for layer, offset in ((0, 0.0), (pd.NA, 10.0)):
            rows.append(
                dict(
                    model="tiny",
                    variant="trained",
                    task="sst2",
                    seed=seed,
                    method="gd",
                    metric="simaou",
                    layer=layer,
                    value=v + offset,
                )
            )
    rows.append(
        dict(model="tiny", variant="trained", task="cb", seed=3, method="gd", metric="simaou", layer=pd.NA, value=0.25)
    )
    summary = scoring.aggregate(scoring.tidy(pd.DataFrame(rows)))
    assert list(summary.columns) == ["model", "variant", "task", "method", "metric", "layer", "mean", "std", "n"]
    assert str(summary.layer.dtype) == "Int64" and summary.n.dtype == np.int64
    sst2 = summary[summary.task == "sst2"]
    layer0 = sst2[sst2.layer == 0].iloc[0]
    assert layer0["mean"] == pytest.approx(7 / 3)
    assert layer0["std"] == pytest.approx(math.sqrt(7 / 3))  # ddof=1: ((4/3)^2 + (1/3)^2 + (5/3)^2) / 2
    assert layer0["n"] == 3
    mean_row = sst2[sst2.layer.isna()].iloc[0]  # the layer-mean rows form their own group
    assert mean_row["mean"] == pytest.approx(7 / 3 + 10) and mean_row["n"] == 3
    cb = summary[summary.task == "cb"].iloc[0]
    assert cb["mean"] == 0.25 and np.isnan(cb["std"]) and cb["n"] == 1
    assert len(summary) == 3


def test_aggregate_of_scored_runs(tmp_path):
    """Two seeds through score_run, write_aggregates and back."""
    paths = []
    for seed in (2, 3):
        run = scoring.score_run(run_cache("zsl", seed=seed), run_cache("icl", seed=seed), run_cache("gd", seed=seed))
        path = tmp_path / f"seed{seed}.parquet"
        run.to_parquet(path)
        paths.append(str(path))
    summary = scoring.write_aggregates(
        paths, tmp_path / "runs.parquet", tmp_path / "summary.parquet", tmp_path / "summary.csv"
    )
    acc = summary[summary.metric == "acc_icl"].iloc[0]
    assert acc["mean"] == 0.75 and acc["std"] == 0.0 and acc["n"] == 2
    assert len(summary) == 17 + 3 * 12  # 17 run-level scores (3 divergences), 12 per-layer ones
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    assert len(runs) == 2 * len(summary) and str(runs.layer.dtype) == "Int64"
    csv = pd.read_csv(tmp_path / "summary.csv")
    assert len(csv) == len(summary) and csv["n"].tolist() == summary["n"].tolist()
    assert not list(tmp_path.glob("*.tmp"))


def test_f2t_metrics_use_only_the_f2t_examples(table):
    zsl, icl, gd = run_cache("zsl"), run_cache("icl"), run_cache("gd")
    keep = formulas.f2t_mask(zsl.pred, icl.pred, gd.pred, zsl.gold)
    assert value(table, "n_f2t") == keep.sum() == 1  # example 0: ZSL wrong, ICL and FT right
    expected = formulas.simaou(zsl.attn_out[keep], icl.attn_out[keep], gd.attn_out[keep], normalize=True)
    assert value(table, "simaou_norm_f2t", 1) == pytest.approx(expected[1])
    expected = formulas.simam_delta(zsl.score_rows()[keep], icl.score_rows()[keep], gd.score_rows()[keep])
    assert value(table, "simam_delta_f2t", 0) == pytest.approx(expected[0])
    assert value(table, "simaou_norm_f2t", 1) != pytest.approx(value(table, "simaou_norm", 1))


# --------------------------------------------------------------------------------------------
# bootstrap intervals, alpha, per-example files, paired comparisons


def test_intervals_bracket_the_run_values(table):
    rows = table[table.ci_low.notna()]
    counts = {m for m in table.metric if m.startswith("changes_")} | {"n_f2t"}
    assert set(table[table.ci_low.isna()].metric) <= counts | {"rec2ftp"} | {
        m for m in table.metric if m.endswith("_f2t")
    }
    assert ((rows.ci_low <= rows.value + 1e-12) & (rows.value <= rows.ci_high + 1e-12)).all()
    acc = table[(table.metric == "acc_icl")].iloc[0]
    assert 0.0 <= acc.ci_low <= 0.75 <= acc.ci_high <= 1.0
    # layer 0: every example's SimAOU is 1, so every resample's mean is 1
    assert value(table, "simaou", 0) == 1.0
    row = table[(table.metric == "simaou") & (table.layer == 0)].iloc[0]
    assert row.ci_low == row.ci_high == 1.0
    again = scoring.score_run(run_cache("zsl"), run_cache("icl"), run_cache("gd"), random_seed=0)
    pd.testing.assert_frame_equal(table, again)  # seeded


def test_interval_of_a_ratio_resamples_numerator_and_denominator_together():
    zsl, icl, gd = run_cache("zsl"), run_cache("icl"), run_cache("gd")
    ex = scoring.run_examples(zsl, icl, gd)
    num, den = ex.ratio_terms("jaccard_all")
    assert num.sum() / den.sum() == pytest.approx(formulas.jaccard(zsl.pred, icl.pred, gd.pred, zsl.gold))
    counts = np.array([[1.0, 1, 1, 1], [4, 0, 0, 0], [0, 0, 0, 4]])
    reps = resampling.bootstrap_ratios(num, den, counts)
    # example 0 is changed by both to the same label; example 3 only by FT; 1 by ICL only
    assert reps[0] == pytest.approx(num.sum() / den.sum())
    assert reps[1] == 1.0 and reps[2] == 0.0
    num, den = ex.ratio_terms("rec2ftp")
    assert num.sum() / den.sum() == pytest.approx(formulas.rec2ftp(zsl.pred, icl.pred, gd.pred, zsl.gold))


def test_alpha_against_the_baseline_cache():
    zsl, icl, lcgd, gd = run_cache("zsl"), run_cache("icl"), run_cache("icl"), run_cache("gd")
    lcgd.meta = {**lcgd.meta, "setting": "lcgd"}
    table = scoring.score_run(zsl, icl, lcgd, gd)
    expected = formulas.alpha(zsl.score_rows(), lcgd.score_rows(), gd.score_rows())
    assert value(table, "alpha", 0) == pytest.approx(expected[0])
    assert value(table, "alpha") == pytest.approx(np.mean(expected))
    assert set(table.method) == {"lcgd"} and "alpha_f2t" in set(table.metric)
    assert "alpha" not in set(scoring.score_run(zsl, icl, gd).metric)  # no baseline, no alpha


def test_examples_round_trip_and_single_seed_interval_equals_the_runs(tmp_path):
    ex = scoring.run_examples(run_cache("zsl"), run_cache("icl"), run_cache("gd"))
    scoring.write_examples(ex, tmp_path / "ex.parquet")
    back = scoring.read_examples(tmp_path / "ex.parquet")
    assert back.meta == ex.meta and back.meta["method"] == "gd" and back.meta["baseline"] is None
    np.testing.assert_array_equal(back.pred_ft, ex.pred_ft)
    assert set(back.similarities) == set(ex.similarities)
    assert set(back.per_example) == set(catalog.names(kind="divergence"))
    for name, values in ex.per_example.items():
        np.testing.assert_array_equal(back.per_example[name], values)
    np.testing.assert_array_equal(back.similarities["simam_delta"], ex.similarities["simam_delta"])
    run = scoring.score_examples(ex)
    intervals = scoring.seed_mean_intervals([back])
    merged = run.merge(intervals, on=["model", "variant", "task", "method", "metric", "layer"], suffixes=("", "_agg"))
    assert len(merged) == intervals.shape[0] > 0
    np.testing.assert_allclose(merged.ci_low, merged.ci_low_agg)
    np.testing.assert_allclose(merged.ci_high, merged.ci_high_agg)


def _task_of(n: int) -> scoring.RunExamples:
    """A run of ``n`` examples with nothing but its ids (its similarities given by _crossed_runs)."""
    zeros = np.zeros(n, dtype=np.int64)
    return scoring.RunExamples(
        {"model": "m", "variant": "trained", "task": "sst2", "seed": 1, "method": "gd"},
        np.arange(n),
        zeros,
        zeros,
        zeros,
        zeros,
        {},
    )


def _crossed_runs(base: scoring.RunExamples, per_seed: list[np.ndarray]) -> list[scoring.RunExamples]:
    """Runs of one task that share ``base``'s examples, seed s with SimAOU ``per_seed[s]`` (n, L)."""
    return [
        scoring.RunExamples(
            {**base.meta, "seed": seed},
            base.example_id,
            base.gold,
            base.pred_zsl,
            base.pred_icl,
            base.pred_ft,
            {"simaou": values},
        )
        for seed, values in enumerate(per_seed, start=1)
    ]


def _simaou_interval(runs, n_boot=2000):
    table = scoring.seed_mean_intervals(runs, n_boot=n_boot)
    return table[(table.metric == "simaou") & table.layer.isna()].iloc[0]


def test_seed_mean_interval_does_not_shrink_with_seeds_that_share_their_examples_noise():
    """Every seed evaluates the same examples: where the examples' noise is all the seeds share
    (no seed effect, a little noise of each seed's own), more seeds cannot average it away. A
    resample drawn independently per seed would divide it by the seeds (width / sqrt(10) with ten);
    the crossed design keeps it, and narrows only where the noise is each seed's own."""
    n = 300
    base = _task_of(n)
    rng = np.random.default_rng(0)
    shared = rng.normal(0.0, 0.3, (n, 1))

    def width(n_seeds, own):
        runs = _crossed_runs(base, [np.clip(shared + rng.normal(0.0, own, (n, 1)), -1, 1) for _ in range(n_seeds)])
        row = _simaou_interval(runs)
        return row.ci_high - row.ci_low

    one, three, ten = width(1, 0.03), width(3, 0.03), width(10, 0.03)
    assert three > 0.85 * one and ten > 0.85 * one  # the shared examples' noise stays
    # the noise each seed has of its own does average out (its seeds' t quantile shrinking too)
    assert width(10, 0.3) < 0.75 * width(3, 0.3)


def test_seed_mean_interval_carries_the_seeds_spread_and_only_where_they_disagree():
    """Three seeds with the same per-example values: they tell no more than one, and the interval
    is that one's (the examples' bootstrap, to the digit), ``between`` 0. Shifting two seeds' values
    moves the seeds apart: the interval widens by the seeds' part, a Student t with 2 degrees of
    freedom."""
    base = _task_of(300)
    values = np.random.default_rng(0).normal(0.1, 0.2, (300, 2))
    agree = _simaou_interval(_crossed_runs(base, [values] * 3))
    one = _simaou_interval(_crossed_runs(base, [values]))
    assert agree["between"] == pytest.approx(0.0, abs=1e-20) and agree["within"] > 0
    assert (agree.ci_low, agree.ci_high) == pytest.approx((one.ci_low, one.ci_high))
    # the run's own interval is the one-seed interval: the same resamples of the task
    run = scoring.score_examples(_crossed_runs(base, [values])[0], n_boot=2000)
    own = run[(run.metric == "simaou") & run.layer.isna()].iloc[0]
    assert (own.ci_low, own.ci_high) == pytest.approx((one.ci_low, one.ci_high))
    apart = _simaou_interval(_crossed_runs(base, [values - 0.2, values, values + 0.2]))
    assert apart["between"] > 10 * apart["within"]
    # the seeds' means are -0.2, 0 and +0.2 about the centre: s = 0.2, and t(2) at 97.5% is 4.30
    centre = (apart.ci_low + apart.ci_high) / 2
    assert apart.ci_high - centre == pytest.approx(4.303 * 0.2 / np.sqrt(3), rel=0.05)


def test_seed_mean_intervals_stay_within_what_the_score_can_take():
    """Three seeds as far apart as a share can be (ICL right on 0%, 40% and 100% of the examples):
    the seeds' part of the interval (a t with 2 degrees of freedom about their mean) reaches below
    0; the interval is cut at 0, not below it. Every score a run has a range for."""
    base = scoring.run_examples(run_cache("zsl"), run_cache("icl"), run_cache("gd"))
    n = len(base.example_id)
    runs = []
    for seed, share in zip((1, 2, 3), (0.0, 0.4, 1.0)):
        pred_icl = np.where(np.arange(n) < round(share * n), base.gold, base.gold + 1).astype(base.gold.dtype)
        runs.append(
            scoring.RunExamples(
                {**base.meta, "seed": seed},
                base.example_id,
                base.gold,
                base.pred_zsl,
                pred_icl,
                base.pred_ft,
                base.similarities,
            )
        )
    table = scoring.seed_mean_intervals(runs, n_boot=4000)
    acc = table[(table.metric == "acc_icl") & table.layer.isna()].iloc[0]
    assert acc.ci_low == 0.0 and acc.ci_high == 1.0
    assert acc["between"] > 0
    assert (table.ci_low >= table.metric.map(lambda m: catalog.value_range(m)[0])).all()
    assert (table.ci_high <= table.metric.map(lambda m: catalog.value_range(m)[1])).all()
    names = set(scoring.bootstrap_scores(base, np.ones((1, n))))
    assert not {m for m in names if catalog.value_range(m) == (-np.inf, np.inf)}, "a score without a range"


def _shifted(ex: scoring.RunExamples, method: str, shift: float, seed: int | None = None) -> scoring.RunExamples:
    sims = {k: v + shift for k, v in ex.similarities.items()}
    meta = {**ex.meta, "method": method, **({"seed": seed} if seed is not None else {})}
    return scoring.RunExamples(meta, ex.example_id, ex.gold, ex.pred_zsl, ex.pred_icl, ex.pred_ft, sims)


def test_paired_comparison_finds_a_consistent_shift_and_not_a_null():
    rng = np.random.default_rng(0)
    n, layers = 60, 3
    exs = []
    for seed in (1, 2):
        noise = {k: rng.normal(size=(n, layers)) for k in catalog.shown_in("compared")[1:]}
        ids = np.arange(n) if seed == 1 else np.arange(n)[::-1]  # another order: paired by id
        gold = np.zeros(n, dtype=np.int16)
        gd = scoring.RunExamples(
            {"model": "m", "variant": "trained", "task": "t", "seed": seed, "method": "gd", "baseline": None},
            ids,
            gold,
            gold,
            gold,
            gold,
            noise,
        )
        exs += [gd, _shifted(gd, "lcgd", 0.5), _shifted(gd, "same", 0.0)]
    table = comparisons.compare_methods(exs, "gd", n_perm=2000)
    assert set(table.method) == {"lcgd", "same"} and set(table.baseline) == {"gd"}
    assert (table.n_seeds == 2).all() and (table.n_examples == n).all()
    lcgd = table[(table.method == "lcgd") & (table.metric == "simaou")].iloc[0]
    assert lcgd["diff"] == pytest.approx(0.5) and lcgd.significant and lcgd.p_value < 0.01
    assert lcgd.ci_low == pytest.approx(0.5) and lcgd.ci_high == pytest.approx(0.5)  # a constant shift
    same = table[(table.method == "same") & (table.metric == "simam_delta")].iloc[0]
    assert same["diff"] == 0.0 and same.p_value == 1.0 and not same.significant
    acc = table[(table.method == "lcgd") & (table.metric == "acc_ft")].iloc[0]
    assert acc.mean_method == acc.mean_baseline == 1.0 and not acc.significant


def test_paired_comparison_of_a_noisy_null_is_not_significant():
    rng = np.random.default_rng(1)
    n = 200
    gold = np.zeros(n, dtype=np.int16)
    meta = {"model": "m", "variant": "trained", "task": "t", "seed": 1, "baseline": None}
    a = scoring.RunExamples(
        {**meta, "method": "gd"}, np.arange(n), gold, gold, gold, gold, {"simaou": rng.normal(size=(n, 2))}
    )
    b = scoring.RunExamples(
        {**meta, "method": "lcgd"}, np.arange(n), gold, gold, gold, gold, {"simaou": rng.normal(size=(n, 2))}
    )
    p = resampling.sign_flip_test(b.similarities["simaou"].mean(1) - a.similarities["simaou"].mean(1), n_perm=5000)
    assert 0.05 < p <= 1.0


def test_sign_flip_test_hand_cases(caplog):
    assert resampling.sign_flip_test(np.zeros(5)) == 1.0
    # 10 positive differences: only the all-plus and all-minus flips are as extreme, p ≈ 2/1024
    p = resampling.sign_flip_test(np.arange(1.0, 11.0), n_perm=20000, seed=3)
    assert p == pytest.approx(2 / 1024, abs=0.002)
    with caplog.at_level("WARNING"):
        assert math.isnan(resampling.sign_flip_test([np.nan]))
    assert "no defined paired difference" in caplog.text


def test_write_comparisons_without_baseline_is_an_empty_table(tmp_path):
    table = comparisons.write_comparisons([], tmp_path / "c.parquet", tmp_path / "c.csv", None)
    assert table.empty and list(pd.read_csv(tmp_path / "c.csv").columns) == list(table.columns)


def test_prediction_change_partition_hand_case():
    # gold 0 everywhere; ZSL predicts 1 on examples 0-3, 0 on 4-5
    gold = np.zeros(6, dtype=np.int16)
    zsl = np.array([1, 1, 1, 1, 0, 0])
    icl = np.array([0, 0, 1, 2, 2, 0])  # correct changes 0, 1; incorrect 3 (to 2), 4 (to 2)
    ft = np.array([0, 1, 1, 2, 1, 1])  # correct change 0; incorrect 3 (to 2), 4 (to 1), 5 (to 1)
    meta = {"model": "m", "variant": "trained", "task": "t", "seed": 1, "method": "gd", "baseline": None}
    ex = scoring.RunExamples(meta, np.arange(6), gold, zsl, icl, ft, {})
    changes = scoring.prediction_changes(ex)
    assert changes == {
        "changes_icl_only_correct": 1.0,
        "changes_ft_only_correct": 0.0,
        "changes_both_correct": 1.0,
        # example 3: both to label 2; example 4: both changed, to different wrong labels
        "changes_icl_only_incorrect": 1.0,
        "changes_ft_only_incorrect": 2.0,
        "changes_both_incorrect": 1.0,
    }
    for subset in ("correct", "incorrect"):
        parts = [changes[f"changes_{p}_{subset}"] for p in ("icl_only", "ft_only", "both")]
        assert parts[2] / sum(parts) == pytest.approx(formulas.jaccard(zsl, icl, ft, gold, subset=subset))


def test_data_statistics_counts_tokens_from_the_caches(tmp_path):
    def write(setting, query_len, n_context):
        n = len(query_len)
        meta = {
            "model": "tiny",
            "variant": "trained",
            "task": "cb",
            "seed": 3,
            "setting": setting,
            "record_position": "label_word",
            "k": 4,
            "true_k": 3,
        }
        cache.write_cache(
            tmp_path / f"{setting}.arrow",
            meta,
            example_id=np.arange(n),
            gold=np.zeros(n),
            label_logprobs=np.zeros((n, 2)),
            query_len=np.array(query_len),
            attn_out=np.zeros((n, 1, 2)),
            attn_scores=np.zeros((n, 1, 1, max(query_len))),
            context_scores=np.zeros((n, 1, n_context)),
        )
        return str(tmp_path / f"{setting}.arrow")

    splits = {}
    for split, n in (("train", 7), ("eval", 5)):
        pd.DataFrame({"text": ["x"] * n}).to_parquet(tmp_path / f"{split}.parquet")
        splits[split] = str(tmp_path / f"{split}.parquet")
    paths = {**splits, "zsl": write("zsl", [5, 7, 9], 1), "icl": write("icl", [5, 7, 9], 40)}
    stats = statistics.data_statistics({"cb": paths}).iloc[0]
    assert (stats.n_train, stats.n_eval, stats.n_evaluated) == (7, 5, 3)
    assert stats.prompt_tokens == 6.0  # mean query keys 7, less the recorded label word
    assert stats.icl_tokens == 46.0 and (stats.true_k, stats.k) == (3, 4)


def test_compact_caches_score_as_float32_ones(table):
    """The compact layout: ZSL in float32, ICL and FT as float16 changes from it; the same table."""
    zsl = run_cache("zsl", layout="compact")
    compact = scoring.score_run(
        zsl,
        run_cache("icl", layout="compact", reference=zsl),
        run_cache("gd", layout="compact", reference=zsl),
        random_seed=0,
    )
    assert compact[COLUMNS[:7]].equals(table[COLUMNS[:7]])
    np.testing.assert_allclose(compact.value, table.value, rtol=0, atol=1e-3)
    similar = table.metric.str.startswith(("simaou", "simam")) & ~table.metric.str.contains("random")
    assert np.nanmax(np.abs(compact.value - table.value)[similar]) < 1e-3


def test_icl_on_permuted_labels_is_scored_against_the_permuted_gold_its_cache_holds(tmp_path, table):
    """The label-following accuracy: ICL on permuted labels (its cache's gold the permuted gold,
    1 - gold for two classes, stored as a change from ZSL in the compact layout) against that gold,
    a ratio like every accuracy, carried by the run's per-example file."""
    zsl = run_cache("zsl", layout="compact")
    permuted = run_cache(
        "icl_permuted", layout="compact", reference=zsl, gold=1 - GOLD, demo_labels="permuted"
    )  # answers [1, 0, 0, 0] against the permuted gold [1, 0, 0, 1]
    icl, gd = (run_cache(s, layout="compact", reference=zsl) for s in ("icl", "gd"))
    ex = scoring.run_examples(zsl, icl, gd, permuted=permuted)
    np.testing.assert_array_equal(ex.gold, GOLD)  # the other scores keep the gold
    np.testing.assert_array_equal(ex.gold_permuted, 1 - GOLD)
    scored = scoring.score_examples(ex)
    assert value(scored, scoring.PERMUTED) == 0.75 and value(scored, "acc_icl") == value(table, "acc_icl")
    assert catalog.get(scoring.PERMUTED).label == "ICL, permuted labels, accuracy (%)"
    assert scoring.PERMUTED not in set(table.metric)  # a run without it has no such score
    scoring.write_examples(ex, tmp_path / "ex.parquet")
    back = scoring.read_examples(tmp_path / "ex.parquet")
    np.testing.assert_array_equal(back.pred_icl_permuted, ex.pred_icl_permuted)
    np.testing.assert_array_equal(back.gold_permuted, 1 - GOLD)
    assert set(back.similarities) == set(ex.similarities) and scoring.PERMUTED in back.ratio_names
    scoring.write_examples(scoring.run_examples(zsl, icl, gd), tmp_path / "plain.parquet")
    plain = scoring.read_examples(tmp_path / "plain.parquet")
    assert plain.pred_icl_permuted is None and scoring.PERMUTED not in plain.ratio_names
    with pytest.raises(ValueError, match="no ICL on permuted labels"):
        plain.ratio_terms(scoring.PERMUTED)
    with pytest.raises(ValueError, match="not permuted ones"):  # ICL on gold labels in its place
        scoring.run_examples(zsl, icl, gd, permuted=icl)


def test_icl_on_novel_label_words_is_scored_against_the_gold(tmp_path, table):
    """Following label words it never saw: ICL with held-out words as the labels (its cache's gold
    the gold, class i read as the i-th word) answers [1, 1, 1, 1] against the gold [0, 1, 1, 0]: 50%;
    carried by the run's per-example file, beside the permuted labels' score, and in a premise run
    without a finetuned model too."""
    zsl = run_cache("zsl", layout="compact")
    novel = run_cache("icl_novel", layout="compact", reference=zsl, demo_labels="novel")
    permuted = run_cache("icl_permuted", layout="compact", reference=zsl, gold=1 - GOLD, demo_labels="permuted")
    icl, gd = (run_cache(s, layout="compact", reference=zsl) for s in ("icl", "gd"))
    ex = scoring.run_examples(zsl, icl, gd, permuted=permuted, novel=novel)
    scored = scoring.score_examples(ex)
    assert value(scored, scoring.NOVEL) == 0.5 and value(scored, scoring.PERMUTED) == 0.75
    assert value(scored, "acc_icl") == value(table, "acc_icl")
    assert scoring.NOVEL not in set(table.metric)
    scoring.write_examples(ex, tmp_path / "ex.parquet")
    back = scoring.read_examples(tmp_path / "ex.parquet")
    np.testing.assert_array_equal(back.pred_icl_novel, [1, 1, 1, 1])
    assert scoring.NOVEL in back.ratio_names
    alone = scoring.icl_examples(zsl, icl, permuted, method="gd", novel=novel)
    assert scoring.NOVEL in alone.ratio_names and alone.ratio_terms(scoring.NOVEL)[0].tolist() == [0, 1, 1, 0]
    plain = scoring.run_examples(zsl, icl, gd, permuted=permuted)
    assert scoring.NOVEL not in plain.ratio_names
    with pytest.raises(ValueError, match="no ICL on novel label words"):
        plain.ratio_terms(scoring.NOVEL)
    with pytest.raises(ValueError, match="not novel ones"):  # the permuted labels' cache in its place
        scoring.run_examples(zsl, icl, gd, novel=permuted)


def test_calibrated_accuracy_where_the_caches_recorded_content_free_queries(table, tmp_path):
    """Each cache's label log-probabilities are -0.1 at its prediction, -2.0 elsewhere: a
    content-free bias of 2.95 nats toward one word outweighs that margin, so every calibrated
    prediction is the other word; a run whose caches recorded none has no calibrated accuracy."""
    assert not set(scoring.CALIBRATED) & set(table.metric)
    toward = {0: [[-0.05, -3.0]] * 3, 1: [[-3.0, -0.05]] * 3}
    zsl = run_cache("zsl", content_free={"texts": ["N/A", "", "[MASK]"], "label_logprobs": toward[1]})
    icl = run_cache("icl", content_free={"texts": ["N/A", "", "[MASK]"], "label_logprobs": toward[0]})
    ex = scoring.run_examples(zsl, icl, run_cache("gd"))
    np.testing.assert_array_equal(ex.pred_zsl_calibrated, [0, 0, 0, 0])
    np.testing.assert_array_equal(ex.pred_icl_calibrated, [1, 1, 1, 1])
    scored = scoring.score_examples(ex)
    assert value(scored, "acc_zsl_calibrated") == value(scored, "acc_icl_calibrated") == 0.5  # gold 0, 1, 1, 0
    assert value(scored, "acc_icl") == 0.75  # the raw predictions, as before
    scoring.write_examples(ex, tmp_path / "ex.parquet")
    back = scoring.read_examples(tmp_path / "ex.parquet")
    np.testing.assert_array_equal(back.pred_icl_calibrated, ex.pred_icl_calibrated)
    assert set(back.ratio_names) >= set(scoring.CALIBRATED) and not set(scoring.CALIBRATED) & set(back.similarities)
