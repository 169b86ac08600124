"""The metric catalog: one row per metric, and every list of metrics read from it, so that a new
metric is one row (issue 62, item 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from icl_gd.common import frames
from icl_gd.metrics import catalog, scoring
from icl_gd.metrics.catalog import Metric
from icl_gd.report import outputs, tables

PACKAGE = Path(catalog.__file__).resolve().parents[1]


def test_every_metric_has_a_kind_a_range_a_margin_and_a_label():
    for m in catalog.catalog():
        assert m.kind in catalog.KINDS and m.computed in ("ratio", "mean", "similarity"), m.name
        assert m.low < m.high and m.margin > 0 and m.label, m.name
    assert len(set(catalog.names())) == len(catalog.names())
    assert catalog.margin("acc_icl") == 0.01 and catalog.margin("rec2ftp") == 1.0
    assert catalog.margin("simaou_norm_f2t") == 0.01  # a score on the f2t subset as its own
    with pytest.raises(KeyError, match="not in the metric catalog"):
        catalog.margin("a_new_score")
    assert (
        catalog.in_percent("acc_icl") and catalog.in_percent("order_change_gap") and not catalog.in_percent("rec2ftp")
    )
    assert catalog.display_scale("jaccard_all") == 100.0 and catalog.display_scale("simaou") == 1.0
    assert catalog.value_range("simam_delta") == (-2.0, 2.0) and catalog.value_range("unknown") == (-np.inf, np.inf)


def test_names_in_tables_and_figures():
    assert catalog.label("simam_delta") == "SimAM_delta"
    assert catalog.figure_label("simam_delta") == r"SimAM$_\Delta$"
    # a legend's short accuracy name is spelled out on an axis of its own
    assert catalog.figure_label("acc_ft") == "FT" and catalog.axis_label("acc_ft") == "FT accuracy (%)"
    assert catalog.axis_label("alpha") == r"$\alpha$"
    assert catalog.label("n_f2t") == catalog.figure_label("n_f2t") == "n_f2t"  # unnamed: as is


def test_the_lists_follow_the_catalog():
    assert catalog.shown_in("accuracy") == (
        "acc_zsl",
        "acc_zsl_calibrated",
        "acc_ft",
        "acc_icl",
        "acc_icl_calibrated",
        "acc_icl_permuted",
        "acc_icl_novel",
        "jaccard_all",
        "jaccard_correct",
        "jaccard_incorrect",
        "rec2ftp",
    )  # paper 003 Table 1's order, and ICL on permuted labels and novel words (the premise's) beside ICL
    assert scoring.ratios()[:4] == ("acc_zsl", "acc_icl", "acc_ft", "rec2ftp")
    assert set(scoring.means()) == set(catalog.names(kind="divergence")) | set(catalog.shown_in("orders"))
    assert "simaou_random_gaussian" not in catalog.published() and "alpha" in catalog.published()
    # paper 001 Table 2's order (SimAOU_norm first), the divergences after; what they are read against above
    assert catalog.shown_in("methods") == (
        "simaou_norm",
        "simaou",
        "simam_after",
        "simam_delta",
        "kl_icl_ft",
        "tv_icl_ft",
    )
    assert catalog.shown_in("methods_baselines") == ("simaou_random", "simaou_random_gaussian", "kl_icl_zsl")
    assert catalog.shown_in("layer_causal") == ("simaou_random", "simaou_norm", "simam_before", "simam_after")
    # the comparisons are computed in catalog order and shown in the table's
    assert catalog.shown_in("compared") == ("acc_ft", "simaou", "simaou_norm", "simam_after", "simam_delta")
    assert catalog.shown_in("comparisons") == ("acc_ft", "simaou_norm", "simaou", "simam_after", "simam_delta")
    assert catalog.shown_in("lr_sweep_figure") == ("simaou_norm", "simam_delta", "acc_ft")
    assert catalog.shown_in("f2t") == ("simaou", "simaou_norm", "simam_before", "simam_after", "simam_delta", "alpha")
    assert catalog.random_baseline("simaou_norm") == "simaou_random"
    assert catalog.random_baseline("simaou") == "simaou_random_gaussian"
    assert catalog.random_baseline("simaou_norm_f2t") is None and catalog.random_baseline("simam_delta") is None
    assert catalog.label("order_change_gap", "orders") == "ICL minus FT (points)"
    assert catalog.label("order_change_gap") == "ICL minus FT predictions changed across orders (%)"


def _string_literals(path: Path) -> set[str]:
    """The strings a module spells, its docstrings and comments aside."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


def test_a_metric_is_named_by_the_catalog_its_formula_and_its_claims_alone():
    """Every list of metrics is the catalog's: a metric's name is spelled in at most four modules,
    the catalog, what computes it (``formulas``; ``scoring`` for a ratio of per-example sums,
    ``orders`` for the order metrics) and the claims that name it (``claim_definitions``,
    ``premise``). The alpha figure is named after the metric it shows: its name in the plan and
    the report's outputs counts, and still leaves alpha at four."""
    spelled = {path: _string_literals(path) for path in sorted(PACKAGE.rglob("*.py"))}
    for name in catalog.names():
        modules = [str(path.relative_to(PACKAGE)) for path, strings in spelled.items() if name in strings]
        assert "metrics/catalog.py" in modules, name
        assert len(modules) <= 4, f"{name!r} is spelled in {modules}; read it from the catalog instead"


def test_a_new_metric_is_one_row_and_reaches_a_table():
    new = Metric(
        "acc_new", "share", "ratio", "New Accuracy (%)", 0.0, 1.0, 0.01, shown_in=("accuracy",), published=True
    )
    rows = [
        {"model": "m", "variant": "trained", "task": "sst2", "method": "gd", "metric": metric, "layer": pd.NA}
        | {"mean": mean, "std": 0.01, "n": 2}
        for metric, mean in [("acc_zsl", 0.5), ("acc_icl", 0.6), ("acc_ft", 0.55), ("acc_new", 0.873)]
    ]
    summary = pd.DataFrame(rows).astype({"layer": "Int64", "n": "int64"})
    assert "New Accuracy (%)" not in tables.accuracy_table(summary, "m").index
    with catalog.extended(new):
        table = tables.accuracy_table(summary, "m")
        assert table.loc["New Accuracy (%)", "SST2"] == "87.3 ± 1.0"  # a share: shown in percent
        assert catalog.margin("acc_new") == 0.01 and "acc_new" in catalog.published()
    assert catalog.get("acc_new") is None  # the block's catalog is gone with it


def test_a_new_per_example_mean_is_read_back_and_scored(tmp_path):
    """A mean of per-example values that the catalog gains is read from a run's file and scored:
    scoring reads the catalog when it runs, not when it was imported."""
    new = Metric("kl_new", "divergence", "mean", "KL new", 0.0, np.inf, 0.01)
    n = 6
    gold = np.array([0, 1, 0, 1, 0, 1])
    ex = scoring.RunExamples(
        meta=dict(model="m", variant="trained", task="sst2", seed=1, method="gd", baseline=None),
        example_id=np.arange(n),
        gold=gold,
        pred_zsl=gold,
        pred_icl=gold,
        pred_ft=1 - gold,
        similarities={},
        per_example={"kl_new": np.linspace(0.0, 1.0, n)},
    )
    with catalog.extended(new):
        scoring.write_examples(ex, tmp_path / "ex.parquet")
        back = scoring.read_examples(tmp_path / "ex.parquet")
        assert "kl_new" in back.ratio_names
        scores = scoring.score_examples(back, n_boot=20)
        assert scores.loc[scores["metric"] == "kl_new", "value"].item() == pytest.approx(0.5)
    assert "kl_new" not in scoring.means()


def test_a_metric_added_to_a_report_table_reaches_it(tmp_path):
    """One row with ``shown_in``, and the report's tables list the metric: its label, its value,
    in the table's order."""
    new = Metric("simnew", "cosine", "similarity", "SimNew", -1.0, 1.0, 0.01, shown_in=("methods", "intervals"))
    rows = [
        {"model": "m", "variant": "trained", "task": "sst2", "method": method, "metric": metric, "layer": pd.NA}
        | {"mean": mean, "std": 0.01, "n": 2, "ci_low": mean - 0.05, "ci_high": mean + 0.05}
        for method in ("gd", "lcgd")
        for metric, mean in [("simaou_norm", 0.2), ("simnew", 0.4 if method == "gd" else 0.3)]
    ]
    path = tmp_path / "summary.parquet"
    frames.atomic_write_frame(pd.DataFrame(rows).astype({"layer": "Int64", "n": "int64"}), path)
    params = dict(model="m", variant="trained", methods=["gd", "lcgd"], n_seeds=2)
    methods = outputs.build_table("methods", {"summary": str(path)}, **params)
    assert "SimNew (GD)" not in methods.index
    with catalog.extended(new):
        methods = outputs.build_table("methods", {"summary": str(path)}, **params)
        intervals = outputs.build_table("intervals", {"summary": str(path)}, **params)
        order = [f"{catalog.label(metric)} (GD)" for metric in catalog.shown_in("methods")]
    assert "SimNew (GD)" in order and [key for key in methods.index if key.endswith("(GD)")] == order
    assert methods.loc["SimNew (GD)", "SST2"] == "0.40 ± 0.01" and methods.loc["SimNew (LCGD)", "Average"] == "0.300"
    assert ("SimNew (GD)", "SST2") in methods.attrs["best"]
    assert intervals.loc[("SimNew", "GD"), "SST2"] == "0.40 [0.35, 0.45]"
