"""Order sensitivity (config key orders, issue 41): hand-made runs whose further orders change a
known set of predictions; the demonstrations' orders; what the plan adds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from icl_gd.config import validation
from icl_gd.data import splits
from icl_gd.metrics import orders, scoring
from icl_gd.planning import plan

SCHEMA = yaml.safe_load((Path(__file__).resolve().parents[3] / "workflow/schemas/config.schema.yaml").read_text())


def run(seed: int, icl, ft, *, ids=(10, 11, 12, 13, 14), simaou=0.5, method="gd", task="sst2") -> scoring.RunExamples:
    n = len(ids)
    meta = {"model": "m", "variant": "trained", "task": task, "seed": seed, "method": method, "baseline": None}
    sims = {"simaou_norm": np.full((n, 2), simaou), "simam_delta": np.full((n, 2), simaou / 2)}
    gold = np.zeros(n, int)
    return scoring.RunExamples(meta, np.array(ids), gold, gold, np.array(icl), np.array(ft), sims)


def test_the_order_changes_a_known_set_of_predictions():
    own = run(2, [0, 1, 1, 0, 2], [1, 1, 0, 0, 0], simaou=0.5)
    second = run(2, [0, 1, 0, 0, 2], [1, 1, 0, 0, 0], simaou=0.3)  # ICL changes example 12
    third = run(2, [1, 1, 1, 0, 2], [1, 0, 0, 0, 0], simaou=0.4)  # ICL: 10; FT: 11
    # the orders pair their examples by id, whatever their rows' order: ``second`` with its rows reversed
    shuffled = run(2, [2, 0, 0, 1, 0], [0, 0, 0, 1, 1], ids=(14, 13, 12, 11, 10), simaou=0.3)
    out = orders.order_sensitivity([own, second, third])
    np.testing.assert_array_equal(out.per_example["order_changed_icl"], [1, 0, 1, 0, 0])
    np.testing.assert_array_equal(out.per_example["order_changed_ft"], [0, 1, 0, 0, 0])
    np.testing.assert_array_equal(out.per_example["order_change_gap"], [1, -1, 1, 0, 0])
    assert out.meta["orders"] == 3 and out.meta["order_scores"]["simaou_norm"] == pytest.approx([0.5, 0.3, 0.4])
    np.testing.assert_array_equal(out.pred_icl, own.pred_icl)  # the run's own order stays the run
    # and keeps its ICL on permuted labels (run in its own order only), which the claims' premise reads
    labelled = dataclasses.replace(own, pred_icl_permuted=np.ones(5, int), gold_permuted=np.ones(5, int))
    kept = orders.order_sensitivity([labelled, second])
    np.testing.assert_array_equal(kept.pred_icl_permuted, np.ones(5))
    assert scoring.point_scores(kept)[scoring.PERMUTED] == 1.0
    same = orders.order_sensitivity([own, run(2, [0, 1, 1, 0, 2], [1, 1, 0, 0, 0])])
    assert same.per_example["order_changed_icl"].sum() == same.per_example["order_changed_ft"].sum() == 0
    paired = orders.order_sensitivity([own, shuffled])
    np.testing.assert_array_equal(paired.per_example["order_changed_icl"], [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(paired.per_example["order_changed_ft"], np.zeros(5))
    # scored like every other mean: a ratio of sums over the examples
    scores = scoring.point_scores(out)
    assert scores["order_changed_icl"] == pytest.approx(2 / 5) and scores["order_changed_ft"] == pytest.approx(1 / 5)


def test_an_order_of_other_examples_or_another_run_is_refused():
    own = run(2, [0] * 5, [0] * 5)
    with pytest.raises(ValueError, match="lacks 1 of the run's evaluation examples"):
        orders.order_sensitivity([own, run(2, [0] * 5, [0] * 5, ids=(10, 11, 12, 13, 99))])
    with pytest.raises(ValueError, match="another run's values"):
        orders.order_sensitivity([own, run(3, [0] * 5, [0] * 5)])
    with pytest.raises(ValueError, match="at least 2 orders"):
        orders.order_sensitivity([own])


def test_order_table_means_over_seeds_with_intervals(tmp_path):
    runs = []
    for seed, icl_changed in ((2, [1, 1, 0, 0, 0]), (3, [1, 0, 0, 0, 0])):
        own = run(seed, [0] * 5, [0] * 5, simaou=0.5)
        other = run(seed, icl_changed, [0] * 5, simaou=0.7)
        runs.append(orders.order_sensitivity([own, other]))
    paths = []
    for i, r in enumerate(runs):
        scoring.write_examples(r, tmp_path / f"{i}.parquet")
        paths.append(str(tmp_path / f"{i}.parquet"))
    table = orders.write_order_table(paths, tmp_path / "orders.parquet", tmp_path / "orders.csv", n_boot=200)
    row = table.set_index("metric").loc["order_changed_icl"]
    assert row["mean"] == pytest.approx((2 / 5 + 1 / 5) / 2) and row["n"] == 2 and row["n_orders"] == 2
    assert row["ci_low"] <= row["mean"] <= row["ci_high"]
    ft = table.set_index("metric").loc["order_changed_ft"]
    assert ft["mean"] == 0.0 and ft["ci_low"] == ft["ci_high"] == 0.0
    spread = table.set_index("metric").loc["simaou_norm_order_sd"]
    assert spread["mean"] == pytest.approx(np.std([0.5, 0.7], ddof=1)) and np.isnan(spread["ci_low"])
    assert len(pd.read_csv(tmp_path / "orders.csv")) == len(table)


def test_further_orders_shuffle_the_same_demonstrations():
    assert splits.demo_order(5, 8, seed=2, order=0) == list(range(8))
    first = splits.demo_order(5, 8, seed=2, order=1)
    assert sorted(first[:5]) == list(range(5)) and sorted(first[5:]) == [5, 6, 7]  # ICL's stay ICL's
    assert first == splits.demo_order(5, 8, seed=2, order=1)  # seeded
    assert first != splits.demo_order(5, 8, seed=2, order=2) and first != splits.demo_order(5, 8, seed=3, order=1)
    with pytest.raises(ValueError):
        splits.demo_order(9, 8, seed=2, order=1)


def test_the_plan_adds_order_runs_only_where_asked():
    raw = {
        "tasks": {"sst2": {"source": "synthetic"}, "cb": {"source": "synthetic"}},
        "n_seeds": 2,
        "variants": {"trained": ["gd", "lcgd"], "untrained": ["gd"]},
        "methods": {"gd": {"kind": "gd"}, "lcgd": {"kind": "lcgd"}},
    }
    config = validation.validate(raw, SCHEMA)
    assert plan.order_runs(config) == [] and "orders" not in plan.tables(config) + plan.figures(config)
    three = {**config, "orders": 3}
    runs = plan.order_runs(three)
    # the report variant's runs only (trained: gd, lcgd), orders 1 and 2
    assert {r["variant"] for r in runs} == {"trained"} and {r["order"] for r in runs} == {1, 2}
    assert len(runs) == 2 * 2 * 2 * 2  # tasks x seeds x methods x further orders
    caches = plan.order_extractions(three)
    assert {c["setting"] for c in caches} == {"icl", "gd", "lcgd"} and len(caches) == 2 * 2 * 2 * 3
    assert "orders" in plan.tables(three) and "orders" in plan.figures(three)
    # the run's own order keeps its spec: turning orders on reruns none of the run's caches
    assert plan.run_spec(three, "sst2", "gd", 2) == plan.run_spec(config, "sst2", "gd", 2)
    assert plan.run_spec(three, "sst2", "gd", 2, order=1) == {**plan.run_spec(config, "sst2", "gd", 2), "order": 1}
