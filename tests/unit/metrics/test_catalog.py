"""The metric catalog: one row per metric, and every list of metrics read from it, so that a new
metric is one row (issue 62, item 1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from icl_gd.metrics import catalog, scoring
from icl_gd.metrics.catalog import Metric
from icl_gd.report import tables


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
        "jaccard_all",
        "jaccard_correct",
        "jaccard_incorrect",
        "rec2ftp",
    )  # paper 003 Table 1's order, and ICL on permuted labels (the premise's) beside ICL
    assert scoring.RATIOS[:4] == ("acc_zsl", "acc_icl", "acc_ft", "rec2ftp")
    assert set(scoring.MEANS) == set(scoring.DIVERGENCES) | set(scoring.ORDER_METRICS)
    assert "simaou_random_gaussian" not in catalog.published() and "alpha" in catalog.published()


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
