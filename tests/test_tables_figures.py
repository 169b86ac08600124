"""Tables (paper 001 Tables 1-2, paper 003 Table 1) and figures (paper 001 Fig. 3, accuracy
bars) on small synthetic runs / summary frames."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pandas as pd
import pytest

from icl_gd import figures, tables

MODEL = "toy-model"
TASKS = ("cb", "sst2")  # deliberately not in paper order
SEEDS = (1, 2)
LAYERS = (0, 1, 2)
METHODS = ("gd", "lcgd")
VARIANTS = ("trained", "untrained", "trained_embeddings")
LAYER_METRICS = ("simaou", "simaou_norm", "simam_before", "simam_after", "simam_delta")
SCALAR_METRICS = ("acc_zsl", "acc_ft", "acc_icl", "jaccard_all", "jaccard_correct",
                  "jaccard_incorrect", "rec2ftp")


def _summary_row(variant, task, method, metric, mean, std=0.01, n=2, layer=pd.NA):
    return {"model": MODEL, "variant": variant, "task": task, "method": method,
            "metric": metric, "layer": layer, "mean": mean, "std": std, "n": n}


def _frame(rows):
    df = pd.DataFrame(rows)
    df["layer"] = df["layer"].astype("Int64")
    df["n"] = df["n"].astype("int64")
    return df


@pytest.fixture
def summary() -> pd.DataFrame:
    """Hand-set run-level values with known display strings."""
    rows = []
    # Table 1 (variants, gd): simaou / simam_delta.
    t1 = {
        ("trained", "sst2", "simaou"): (0.12, 0.01),
        ("trained_embeddings", "sst2", "simaou"): (0.151, 0.02),
        ("untrained", "sst2", "simaou"): (0.09, 0.004),
        ("trained", "cb", "simaou"): (0.11, 0.01),
        # trained_embeddings / cb / simaou deliberately missing
        ("untrained", "cb", "simaou"): (-0.001, 0.01),  # rounds to 0.00, never "-0.00"
        ("trained", "sst2", "simam_delta"): (0.30, 0.02),
        ("trained_embeddings", "sst2", "simam_delta"): (0.30, 0.05),  # tie -> both best
        ("untrained", "sst2", "simam_delta"): (0.11, 0.04),
        ("trained", "cb", "simam_delta"): (0.25, 0.01),
        ("trained_embeddings", "cb", "simam_delta"): (0.05, 0.10),
        ("untrained", "cb", "simam_delta"): (0.26, 0.05),
    }
    rows += [_summary_row(v, t, "gd", m, mu, sd) for (v, t, m), (mu, sd) in t1.items()]
    # Table 2 (methods, trained).
    t2 = {
        ("gd", "sst2", "simaou_norm"): 0.11, ("gd", "cb", "simaou_norm"): 0.21,
        ("lcgd", "sst2", "simaou_norm"): 0.22, ("lcgd", "cb", "simaou_norm"): 0.34,
        ("lcgd", "sst2", "simaou"): 0.13,  # lcgd / cb / simaou missing -> partial average
        ("gd", "sst2", "simam_after"): 0.59, ("gd", "cb", "simam_after"): 0.20,
        ("lcgd", "sst2", "simam_after"): 0.58, ("lcgd", "cb", "simam_after"): 0.04,
    }
    rows += [_summary_row("trained", t, me, m, mu) for (me, t, m), mu in t2.items()]
    rows += [_summary_row("trained", "sst2", "lcgd", "simam_delta", 0.30),
             _summary_row("trained", "cb", "lcgd", "simam_delta", 0.38)]
    # Table 3 (accuracy, trained, gd): fractions.
    acc = {
        ("sst2", "acc_zsl"): 0.70, ("sst2", "acc_ft"): 0.74, ("sst2", "acc_icl"): 0.925,
        ("cb", "acc_zsl"): 0.375, ("cb", "acc_ft"): 0.57, ("cb", "acc_icl"): 0.50,
        ("sst2", "jaccard_all"): 0.164, ("cb", "jaccard_all"): 0.80,
        ("sst2", "jaccard_correct"): 0.198, ("cb", "jaccard_correct"): 0.917,
        ("sst2", "jaccard_incorrect"): 0.018, ("cb", "jaccard_incorrect"): 0.667,
    }
    rows += [_summary_row("trained", t, "gd", m, mu, 0.01) for (t, m), mu in acc.items()]
    rows += [_summary_row("trained", "sst2", "gd", "rec2ftp", 85.0, 2.0),
             _summary_row("trained", "cb", "gd", "rec2ftp", 90.0, np.nan, n=1)]
    # A per-layer row that must not leak into the tables.
    rows.append(_summary_row("trained", "sst2", "gd", "simaou", 0.99, 0.0, layer=0))
    return _frame(rows)


@pytest.fixture
def runs() -> pd.DataFrame:
    """Per-layer + layer-mean rows for 2 tasks x 2 seeds x 3 layers x 2 methods x 3 variants."""
    rng = np.random.default_rng(0)
    rows = []
    for v, t, s, me in itertools.product(VARIANTS, TASKS, SEEDS, METHODS):
        for metric in LAYER_METRICS:
            vals = rng.uniform(-0.2, 0.6, size=len(LAYERS))
            rows += [{"model": MODEL, "variant": v, "task": t, "seed": s, "method": me,
                      "metric": metric, "layer": layer, "value": x}
                     for layer, x in zip(LAYERS, vals)]
            rows.append({"model": MODEL, "variant": v, "task": t, "seed": s, "method": me,
                         "metric": metric, "layer": pd.NA, "value": vals.mean()})
        for metric in SCALAR_METRICS:
            rows.append({"model": MODEL, "variant": v, "task": t, "seed": s, "method": me,
                         "metric": metric, "layer": pd.NA, "value": rng.uniform(0.3, 0.9)})
    df = pd.DataFrame(rows)
    df["layer"] = df["layer"].astype("Int64")
    df["seed"] = df["seed"].astype("int64")
    return df


def _summarise(runs: pd.DataFrame) -> pd.DataFrame:
    keys = ["model", "variant", "task", "method", "metric", "layer"]
    out = runs.groupby(keys, dropna=False)["value"].agg(["mean", "std", "count"]).reset_index()
    return out.rename(columns={"count": "n"})


def _best(table):
    return set(table.attrs["best"])


# ------------------------------------------------------------------------------------ tables


def test_variants_table_cells_order_and_missing(summary):
    t = tables.variants_table(summary, MODEL)
    assert list(t.columns) == ["SST2", "CB"]  # paper order, display names
    assert list(t.index.names) == ["Metric", "Setting"]
    assert list(t.index) == [
        ("SimAOU", "Trained"), ("SimAOU", "Trained Embeddings"), ("SimAOU", "No Training"),
        ("SimAM_delta", "Trained"), ("SimAM_delta", "Trained Embeddings"),
        ("SimAM_delta", "No Training"),
    ]
    assert t.loc[("SimAOU", "Trained"), "SST2"] == "0.12 ± 0.01"  # layer-mean row, not 0.99
    assert t.loc[("SimAOU", "No Training"), "SST2"] == "0.09 ± 0.00"
    assert t.loc[("SimAOU", "No Training"), "CB"] == "0.00 ± 0.01"
    assert t.loc[("SimAOU", "Trained Embeddings"), "CB"] == tables.MISSING == "—"
    assert t.attrs["footnotes"] == []


def test_variants_table_missing_variant_and_extra_variant(summary):
    s = summary[summary["variant"] != "untrained"]
    t = tables.variants_table(s, MODEL)
    assert (t.xs("No Training", level="Setting") == "—").all().all()
    extra = pd.concat([summary, _frame([_summary_row("layernorm_only", "cb", "gd", "simaou",
                                                     0.5)])])
    t = tables.variants_table(extra, MODEL)
    assert t.loc[("SimAOU", "LayerNorm Only"), "CB"] == "0.50 ± 0.01"
    assert t.loc[("SimAOU", "LayerNorm Only"), "SST2"] == "—"


def test_variants_table_best_value(summary):
    t = tables.variants_table(summary, MODEL)
    best = _best(t)
    assert (("SimAOU", "Trained Embeddings"), "SST2") in best
    assert (("SimAOU", "Trained"), "SST2") not in best
    assert (("SimAOU", "Trained"), "CB") in best
    # a tie at display precision marks both; different metrics are compared separately
    assert (("SimAM_delta", "Trained"), "SST2") in best
    assert (("SimAM_delta", "Trained Embeddings"), "SST2") in best
    assert (("SimAM_delta", "No Training"), "CB") in best
    assert len(best) == 5
    md = tables.to_markdown(t, "Table 1")
    assert "**0.15 ± 0.02**" in md
    assert re.search(r"\| +0\.12 ± 0\.01 \|", md)  # not best: plain
    tex = tables.to_latex(t, "Table 1")
    assert r"\textbf{0.15 $\pm$ 0.02}" in tex
    assert r"0.12 $\pm$ 0.01 &" in tex


def test_methods_table_average_and_partial(summary):
    t = tables.methods_table(summary, MODEL)
    assert list(t.columns) == ["SST2", "CB", "Average"]
    assert list(t.index) == [
        "SimAOU_norm (GD)", "SimAOU_norm (LCGD)", "SimAOU (GD)", "SimAOU (LCGD)",
        "SimAM_after (GD)", "SimAM_after (LCGD)", "SimAM_delta (GD)", "SimAM_delta (LCGD)",
    ]
    assert t.loc["SimAOU_norm (GD)", "Average"] == "0.160"  # (0.11 + 0.21) / 2
    assert t.loc["SimAOU_norm (LCGD)", "Average"] == "0.280"
    assert t.loc["SimAM_delta (LCGD)", "Average"] == "0.340"
    # missing task -> "—"; average over the others, marked and footnoted
    assert t.loc["SimAOU (LCGD)", "CB"] == "—"
    assert t.loc["SimAOU (LCGD)", "Average"] == "0.130‡"
    assert "‡ average over the tasks with data only" in t.attrs["footnotes"]
    best = _best(t)
    assert ("SimAOU_norm (LCGD)", "Average") in best
    assert ("SimAOU_norm (GD)", "Average") not in best
    assert ("SimAM_after (GD)", "SST2") in best and ("SimAM_after (GD)", "CB") in best
    assert ("SimAM_after (GD)", "Average") in best
    # GD and LCGD tie at 0.30: nothing stands out, nothing marked
    assert ("SimAM_delta (GD)", "SST2") not in best
    assert ("SimAM_delta (LCGD)", "SST2") not in best
    assert ("SimAM_delta (LCGD)", "CB") in best
    assert t.loc["SimAM_delta (GD)", "Average"] == "0.275"
    # only one row of the metric has data in the column -> nothing to compare, nothing marked
    assert ("SimAOU (LCGD)", "SST2") in best
    assert ("SimAOU (GD)", "CB") not in best


def test_methods_table_random_baseline_rows_come_first(summary):
    rows = [_summary_row("trained", "sst2", "gd", "simaou_random", 0.0016),
            _summary_row("trained", "sst2", "lcgd", "simaou_random", 0.5)]  # not read: first method's
    t = tables.methods_table(pd.concat([summary, _frame(rows)]), MODEL, baselines=tables.RANDOM_BASELINES)
    assert list(t.index[:2]) == ["Random SimAOU", "Random SimAOU (Gaussian)"]
    assert t.loc["Random SimAOU", "SST2"] == "0.00 ± 0.01" and t.loc["Random SimAOU", "CB"] == "—"
    assert t.loc["Random SimAOU (Gaussian)"].eq("—").all()


def test_layer_causal_table_is_paper_003_table_2(summary):
    rows = [_summary_row("trained", t, "gd", "simaou_random", v) for t, v in (("sst2", 0.0016), ("cb", 0.0037))]
    rows += [_summary_row("trained", "sst2", "gd", "simam_before", 0.5546),
             _summary_row("trained", "cb", "gd", "simam_before", 0.1524)]
    t = tables.layer_causal_table(pd.concat([summary, _frame(rows)]), MODEL, "trained", "gd", ["lcgd"])
    assert list(t.index) == ["SimAOU (Random)", "SimAOU (GD)", "SimAOU (LCGD)", "SimAM (ZSL)", "SimAM (GD)",
                             "SimAM (LCGD)"]
    assert list(t.columns) == ["SST2", "CB", "Average"]
    assert t.loc["SimAOU (GD)", "SST2"] == "0.1100 ± 0.0100"  # SimAOU_norm, 4 decimals
    assert t.loc["SimAM (LCGD)", "CB"] == "0.0400 ± 0.0100"
    assert t.loc["SimAM (ZSL)", "Average"] == "0.3535"
    best = _best(t)
    assert ("SimAOU (LCGD)", "SST2") in best and ("SimAOU (GD)", "SST2") not in best
    assert ("SimAM (GD)", "SST2") in best and ("SimAM (ZSL)", "SST2") not in best  # ZSL competes
    assert not any(key == "SimAOU (Random)" for key, _ in best)  # alone in its group


def test_intervals_table_cells():
    rows = [{**_summary_row("trained", "sst2", "gd", "simaou_norm", 0.11), "ci_low": 0.09, "ci_high": 0.135},
            {**_summary_row("trained", "sst2", "gd", "acc_ft", 0.74), "ci_low": 0.70, "ci_high": 0.78},
            {**_summary_row("trained", "cb", "gd", "acc_ft", 0.5), "ci_low": np.nan, "ci_high": np.nan}]
    t = tables.intervals_table(_frame(rows), MODEL, "trained", ["gd", "lcgd"], metrics=("acc_ft", "simaou_norm"))
    assert t.loc[("SimAOU_norm", "GD"), "SST2"] == "0.11 [0.09, 0.14]"
    assert t.loc[("FT Accuracy (%)", "GD"), "SST2"] == "74.00 [70.00, 78.00]"
    assert t.loc[("FT Accuracy (%)", "GD"), "CB"] == "50.00"  # no interval: the mean alone
    assert t.loc[("SimAOU_norm", "LCGD")].eq("—").all()
    with pytest.raises(ValueError, match="no ci_low"):
        tables.intervals_table(_frame(rows).drop(columns=["ci_low", "ci_high"]), MODEL)


def test_comparisons_table_marks_significant_differences():
    base = {"model": MODEL, "variant": "trained", "method": "lcgd", "baseline": "gd", "n_seeds": 2, "n_examples": 50}
    frame = pd.DataFrame([
        {**base, "task": "sst2", "metric": "simaou_norm", "diff": 0.1204, "ci_low": 0.05, "ci_high": 0.2,
         "p_value": 0.001, "significant": True},
        {**base, "task": "cb", "metric": "simaou_norm", "diff": -0.01, "ci_low": -0.05, "ci_high": 0.03,
         "p_value": 0.6, "significant": False},
        {**base, "task": "sst2", "metric": "acc_ft", "diff": -0.02, "ci_low": -0.04, "ci_high": 0.0,
         "p_value": 0.2, "significant": False},
    ])
    t = tables.comparisons_table(frame, MODEL, "trained", metrics=("acc_ft", "simaou_norm"))
    assert list(t.index) == [("FT Accuracy (%)", "LCGD − GD"), ("SimAOU_norm", "LCGD − GD")]
    assert list(t.columns) == ["SST2", "CB"]
    assert t.loc[("SimAOU_norm", "LCGD − GD"), "SST2"] == "+0.120 [+0.050, +0.200]*"
    assert t.loc[("SimAOU_norm", "LCGD − GD"), "CB"] == "-0.010 [-0.050, +0.030]"
    assert t.loc[("FT Accuracy (%)", "LCGD − GD"), "SST2"] == "-2.000 [-4.000, +0.000]"
    assert t.loc[("FT Accuracy (%)", "LCGD − GD"), "CB"] == "—"
    assert "p < 0.05" in t.attrs["footnotes"][0]
    assert "LCGD − GD" in tables.to_markdown(t) and r"	extbf" not in tables.to_latex(t)


def test_data_table_is_paper_001_table_3():
    stats = pd.DataFrame([
        {"task": "cb", "n_train": 250, "n_eval": 56, "n_evaluated": 56, "prompt_tokens": 80.5,
         "icl_tokens": 1500.25, "true_k": 20, "k": 32},
        {"task": "sst2", "n_train": 67349, "n_eval": 872, "n_evaluated": 872, "prompt_tokens": 25.123,
         "icl_tokens": np.nan, "true_k": np.nan, "k": 32},
    ])
    t = tables.data_table(stats)
    assert list(t.index) == ["SST2", "CB"]
    assert t.loc["SST2", "# Train"] == "67,349" and t.loc["SST2", "Avg. # of Tokens"] == "25.12"
    assert t.loc["CB", "Demonstrations (true k / k)"] == "20 / 32"
    assert t.loc["SST2", "Avg. ICL Prompt Tokens"] == "—"


def test_methods_table_without_any_data_row(summary):
    t = tables.methods_table(summary, MODEL, metrics=("simaou_random",))
    assert (t == "—").all().all()
    with pytest.raises(ValueError, match="no rows for model"):
        tables.methods_table(summary, "other-model")


def test_accuracy_table_percent(summary):
    t = tables.accuracy_table(summary, MODEL)  # Rec2FTP is a default row
    assert list(t.columns) == ["SST2", "CB"]
    assert t.loc["ZSL Accuracy (%)", "SST2"] == "70.0 ± 1.0"
    assert t.loc["ICL Accuracy (%)", "SST2"] == "92.5 ± 1.0"
    assert t.loc["Jaccard Index (%)", "CB"] == "80.0 ± 1.0"
    assert t.loc["Jaccard - Incorrect (%)", "SST2"] == "1.8 ± 1.0"
    assert t.loc["Rec2FTP (%)", "SST2"] == "85.0 ± 2.0"  # already a percentage
    assert t.loc["Rec2FTP (%)", "CB"] == "90.0"  # one seed: no std
    best = _best(t)
    assert best == {("ICL Accuracy (%)", "SST2"), ("FT Accuracy (%)", "CB")}


def test_fewer_seeds_footnote(summary):
    s = summary.copy()
    hit = (s["variant"] == "trained") & (s["metric"] == "simaou") & (s["task"] == "cb")
    s.loc[hit, "n"] = 1
    s.loc[hit, "std"] = np.nan
    t = tables.variants_table(s, MODEL, n_seeds_expected=2)
    assert t.loc[("SimAOU", "Trained"), "CB"] == "0.11†"
    assert t.loc[("SimAOU", "Trained"), "SST2"] == "0.12 ± 0.01"
    assert t.attrs["footnotes"] == ["† computed from 1 of 2 seeds"]
    assert "computed from 1 of 2 seeds" in tables.to_markdown(t)
    tex = tables.to_latex(t)
    assert r"\textsuperscript{\dag} computed from 1 of 2 seeds" in tex
    assert r"0.11\textsuperscript{\dag}" in tex
    # all seeds there -> no footnote
    t = tables.variants_table(summary, MODEL, n_seeds_expected=2)
    assert t.attrs["footnotes"] == []


def test_latex_escaping_and_structure(summary):
    t = tables.methods_table(summary, MODEL)
    tex = tables.to_latex(t, "GD & LCGD: 100% of runs_x", label="tab:methods")
    assert r"\caption{GD \& LCGD: 100\% of runs\_x}" in tex
    assert r"SimAOU\_norm (GD)" in tex
    assert "SimAOU_norm" not in tex
    for token in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}{lccc}",
                  r"\label{tab:methods}"):
        assert token in tex
    acc = tables.to_latex(tables.accuracy_table(summary, MODEL))
    assert r"ZSL Accuracy (\%)" in acc
    assert tables.latex_escape("a_b & 5% — x ± y") == r"a\_b \& 5\% --- x $\pm$ y"
    # variants table: the metric label is printed once per group, groups split by \midrule
    tex = tables.to_latex(tables.variants_table(summary, MODEL))
    assert tex.count(r"\midrule") == 2
    assert tex.count("SimAOU &") == 1


def test_markdown_layout(summary):
    md = tables.to_markdown(tables.variants_table(summary, MODEL), "Caption here")
    lines = md.splitlines()
    assert lines[0] == "**Caption here**"
    assert lines[2].replace(" ", "") == "|Metric|Setting|SST2|CB|"
    assert lines[3].replace(" ", "").startswith("|---")
    body = lines[4:10]
    assert body[1].split("|")[1].strip() == ""  # repeated metric label blanked
    assert body[3].split("|")[1].strip() == "SimAM_delta"


def test_write_table(tmp_path, summary):
    t = tables.methods_table(summary, MODEL)
    paths = tables.write_table(t, tmp_path / "sub" / "table2", "Table 2")
    assert [p.name for p in paths] == ["table2.md", "table2.tex", "table2.csv"]
    assert all(p.stat().st_size > 0 for p in paths)
    csv = pd.read_csv(paths[2])
    assert list(csv.columns) == ["Metric", "SST2", "CB", "Average"]
    assert csv.loc[0, "SST2"] == "0.11 ± 0.01"
    assert "**" not in paths[2].read_text()
    assert sorted(x.name for x in (tmp_path / "sub").iterdir()) == [
        "table2.csv", "table2.md", "table2.tex"]  # no temp files left behind


def test_tables_from_aggregated_runs(runs):
    s = _summarise(runs)
    t = tables.variants_table(s, MODEL, n_seeds_expected=3)
    assert t.shape == (6, 2)
    assert not (t == "—").any().any()
    assert t.attrs["footnotes"] == ["† computed from 2 of 3 seeds"]
    sel = runs[(runs.variant == "trained") & (runs.method == "gd") & (runs.task == "sst2")
               & (runs.metric == "simaou") & runs.layer.isna()]["value"]
    assert t.loc[("SimAOU", "Trained"), "SST2"].startswith(
        tables.format_cell(sel.mean(), sel.std()))


# ----------------------------------------------------------------------------------- figures


def _assert_legend_above(fig, ax, leg):
    """The legend sits above the plotting area (covers no data) and below the title."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box, area = leg.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.y0 >= area.y1 - 1
    assert box.y1 <= fig._suptitle.get_window_extent(renderer).y0 + 1
    assert 0 <= box.x0 and box.x1 <= fig.bbox.x1  # inside the canvas: not clipped


def test_per_layer_figure(tmp_path, runs):
    import matplotlib.pyplot as plt
    from matplotlib.container import ErrorbarContainer

    fig = figures.per_layer_figure(runs, MODEL)
    axes = fig.axes
    assert len(axes) == 2
    assert [ax.get_ylabel() for ax in axes] == ["SimAOU", r"SimAM$_\Delta$"]
    assert axes[-1].get_xlabel() == "Layer"
    assert fig.get_suptitle()
    for ax, metric in zip(axes, ("simaou", "simam_delta")):
        conts = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert len(conts) == 2
        assert [c.get_label() for c in conts] == ["GD (4 runs)", "LCGD (4 runs)"]
        for cont, method in zip(conts, METHODS):
            line = cont.lines[0]
            sel = runs[(runs.variant == "trained") & (runs.method == method)
                       & (runs.metric == metric) & runs.layer.notna()]
            expect = sel.groupby("layer")["value"].mean().to_numpy()
            np.testing.assert_allclose(line.get_ydata(), expect)
            np.testing.assert_allclose(np.round(line.get_xdata()), LAYERS)
    leg = axes[0].get_legend()
    assert [x.get_text() for x in leg.get_texts()] == ["GD (4 runs)", "LCGD (4 runs)"]
    _assert_legend_above(fig, axes[0], leg)
    png, pdf = figures.write_figure(fig, tmp_path / "fig" / "per_layer")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000
    assert not plt.fignum_exists(fig.number)
    assert sorted(p.name for p in (tmp_path / "fig").iterdir()) == [
        "per_layer.pdf", "per_layer.png"]


def test_per_layer_figure_missing_metric_panel(runs):
    fig = figures.per_layer_figure(runs, MODEL, metrics=("simaou", "alpha"), methods=("gd",))
    assert len(fig.axes) == 2
    assert len(fig.axes[0].containers) == 1
    assert len(fig.axes[1].containers) == 0
    assert any(t.get_text() == "no data" for t in fig.axes[1].texts)
    figures.plt.close(fig)


def test_accuracy_figure(tmp_path, runs):
    from matplotlib.container import BarContainer

    s = _summarise(runs)
    s = s[~((s.task == "cb") & (s.metric == "acc_ft"))]  # one missing bar
    fig = figures.accuracy_figure(s, MODEL)
    (ax,) = fig.axes
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [b.get_label() for b in bars] == ["ZSL", "FT", "ICL"]
    assert all(len(b.patches) == 2 for b in bars)
    assert [x.get_text() for x in ax.get_xticklabels()] == ["SST2", "CB"]
    assert ax.get_ylabel() == "Accuracy (%)"
    sel = runs[(runs.variant == "trained") & (runs.method == "gd") & (runs.task == "sst2")
               & (runs.metric == "acc_icl")]["value"]
    assert bars[2].patches[0].get_height() == pytest.approx(100 * sel.mean())
    assert np.isnan(bars[1].patches[1].get_height())
    assert any(t.get_text() == "n/a" for t in ax.texts)
    leg = ax.get_legend()
    assert [x.get_text() for x in leg.get_texts()] == ["ZSL", "FT", "ICL"]
    _assert_legend_above(fig, ax, leg)
    png, pdf = figures.write_figure(fig, tmp_path / "accuracy")
    assert png.stat().st_size > 5000 and pdf.stat().st_size > 1000
