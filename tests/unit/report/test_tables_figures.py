"""Tables (paper 001 Tables 1-2, paper 003 Table 1) and figures (paper 001 Fig. 3, accuracy
bars) on small synthetic runs / summary frames."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pandas as pd
import pytest

from icl_gd.report import figures, premise_table, render, tables

MODEL = "toy-model"
TASKS = ("cb", "sst2")  # deliberately not in paper order
SEEDS = (1, 2)
LAYERS = (0, 1, 2)
METHODS = ("gd", "lcgd")
VARIANTS = ("trained", "untrained", "trained_embeddings")
LAYER_METRICS = ("simaou", "simaou_norm", "simam_before", "simam_after", "simam_delta")
SCALAR_METRICS = ("acc_zsl", "acc_ft", "acc_icl", "jaccard_all", "jaccard_correct", "jaccard_incorrect", "rec2ftp")


def _summary_row(variant, task, method, metric, mean, std=0.01, n=2, layer=pd.NA):
    return {
        "model": MODEL,
        "variant": variant,
        "task": task,
        "method": method,
        "metric": metric,
        "layer": layer,
        "mean": mean,
        "std": std,
        "n": n,
    }


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
        ("gd", "sst2", "simaou_norm"): 0.11,
        ("gd", "cb", "simaou_norm"): 0.21,
        ("lcgd", "sst2", "simaou_norm"): 0.22,
        ("lcgd", "cb", "simaou_norm"): 0.34,
        ("lcgd", "sst2", "simaou"): 0.13,  # lcgd / cb / simaou missing -> partial average
        ("gd", "sst2", "simam_after"): 0.59,
        ("gd", "cb", "simam_after"): 0.20,
        ("lcgd", "sst2", "simam_after"): 0.58,
        ("lcgd", "cb", "simam_after"): 0.04,
    }
    rows += [_summary_row("trained", t, me, m, mu) for (me, t, m), mu in t2.items()]
    rows += [
        _summary_row("trained", "sst2", "lcgd", "simam_delta", 0.30),
        _summary_row("trained", "cb", "lcgd", "simam_delta", 0.38),
    ]
    # Table 3 (accuracy, trained, gd): fractions.
    acc = {
        ("sst2", "acc_zsl"): 0.70,
        ("sst2", "acc_ft"): 0.74,
        ("sst2", "acc_icl"): 0.925,
        ("cb", "acc_zsl"): 0.375,
        ("cb", "acc_ft"): 0.57,
        ("cb", "acc_icl"): 0.50,
        ("sst2", "jaccard_all"): 0.164,
        ("cb", "jaccard_all"): 0.80,
        ("sst2", "jaccard_correct"): 0.198,
        ("cb", "jaccard_correct"): 0.917,
        ("sst2", "jaccard_incorrect"): 0.018,
        ("cb", "jaccard_incorrect"): 0.667,
    }
    rows += [_summary_row("trained", t, "gd", m, mu, 0.01) for (t, m), mu in acc.items()]
    rows += [
        _summary_row("trained", "sst2", "gd", "rec2ftp", 85.0, 2.0),
        _summary_row("trained", "cb", "gd", "rec2ftp", 90.0, np.nan, n=1),
    ]
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
            rows += [
                {
                    "model": MODEL,
                    "variant": v,
                    "task": t,
                    "seed": s,
                    "method": me,
                    "metric": metric,
                    "layer": layer,
                    "value": x,
                }
                for layer, x in zip(LAYERS, vals)
            ]
            rows.append(
                {
                    "model": MODEL,
                    "variant": v,
                    "task": t,
                    "seed": s,
                    "method": me,
                    "metric": metric,
                    "layer": pd.NA,
                    "value": vals.mean(),
                }
            )
        for metric in SCALAR_METRICS:
            rows.append(
                {
                    "model": MODEL,
                    "variant": v,
                    "task": t,
                    "seed": s,
                    "method": me,
                    "metric": metric,
                    "layer": pd.NA,
                    "value": rng.uniform(0.3, 0.9),
                }
            )
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
        ("SimAOU", "Trained"),
        ("SimAOU", "Trained Embeddings"),
        ("SimAOU", "No Training"),
        ("SimAM_delta", "Trained"),
        ("SimAM_delta", "Trained Embeddings"),
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
    extra = pd.concat([summary, _frame([_summary_row("layernorm_only", "cb", "gd", "simaou", 0.5)])])
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
    md = render.to_markdown(t, "Table 1")
    assert "**0.15 ± 0.02**" in md
    assert re.search(r"\| +0\.12 ± 0\.01 \|", md)  # not best: plain
    tex = render.to_latex(t, "Table 1")
    assert r"\textbf{0.15 $\pm$ 0.02}" in tex
    assert r"0.12 $\pm$ 0.01 &" in tex


def test_methods_table_average_and_partial(summary):
    t = tables.methods_table(summary, MODEL)
    assert list(t.columns) == ["SST2", "CB", "Average"]
    assert list(t.index) == [
        "Random SimAOU",
        "Random SimAOU (Gaussian)",
        "KL(ICL || ZSL)",
        "SimAOU_norm (GD)",
        "SimAOU_norm (LCGD)",
        "SimAOU (GD)",
        "SimAOU (LCGD)",
        "SimAM_after (GD)",
        "SimAM_after (LCGD)",
        "SimAM_delta (GD)",
        "SimAM_delta (LCGD)",
        "KL(ICL || FT) (GD)",
        "KL(ICL || FT) (LCGD)",
        "TV(ICL, FT) (GD)",
        "TV(ICL, FT) (LCGD)",
    ]  # the catalog's methods table, as the report shows it
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
    rows = [
        _summary_row("trained", "sst2", "gd", "simaou_random", 0.0016),
        _summary_row("trained", "sst2", "lcgd", "simaou_random", 0.5),
    ]  # not read: first method's
    t = tables.methods_table(pd.concat([summary, _frame(rows)]), MODEL)
    assert list(t.index[:3]) == ["Random SimAOU", "Random SimAOU (Gaussian)", "KL(ICL || ZSL)"]
    assert t.loc["Random SimAOU", "SST2"] == "0.00 ± 0.01" and t.loc["Random SimAOU", "CB"] == "—"
    assert t.loc["Random SimAOU (Gaussian)"].eq("—").all()


def test_layer_causal_table_is_paper_003_table_2(summary):
    rows = [_summary_row("trained", t, "gd", "simaou_random", v) for t, v in (("sst2", 0.0016), ("cb", 0.0037))]
    rows += [
        _summary_row("trained", "sst2", "gd", "simam_before", 0.5546),
        _summary_row("trained", "cb", "gd", "simam_before", 0.1524),
    ]
    t = tables.layer_causal_table(pd.concat([summary, _frame(rows)]), MODEL, "trained", "gd", ["lcgd"])
    assert list(t.index) == [
        "SimAOU (Random)",
        "SimAOU (GD)",
        "SimAOU (LCGD)",
        "SimAM (ZSL)",
        "SimAM (GD)",
        "SimAM (LCGD)",
    ]
    assert list(t.columns) == ["SST2", "CB", "Average"]
    assert t.loc["SimAOU (GD)", "SST2"] == "0.1100 ± 0.0100"  # SimAOU_norm, 4 decimals
    assert t.loc["SimAM (LCGD)", "CB"] == "0.0400 ± 0.0100"
    assert t.loc["SimAM (ZSL)", "Average"] == "0.3535"
    best = _best(t)
    assert ("SimAOU (LCGD)", "SST2") in best and ("SimAOU (GD)", "SST2") not in best
    assert ("SimAM (GD)", "SST2") in best and ("SimAM (ZSL)", "SST2") not in best  # ZSL competes
    assert not any(key == "SimAOU (Random)" for key, _ in best)  # alone in its group


def test_intervals_table_cells():
    rows = [
        {**_summary_row("trained", "sst2", "gd", "simaou_norm", 0.11), "ci_low": 0.09, "ci_high": 0.135},
        {**_summary_row("trained", "sst2", "gd", "acc_ft", 0.74), "ci_low": 0.70, "ci_high": 0.78},
        {**_summary_row("trained", "cb", "gd", "acc_ft", 0.5), "ci_low": np.nan, "ci_high": np.nan},
    ]
    t = tables.intervals_table(_frame(rows), MODEL, "trained", ["gd", "lcgd"], metrics=("acc_ft", "simaou_norm"))
    assert t.loc[("SimAOU_norm", "GD"), "SST2"] == "0.11 [0.09, 0.14]"
    assert t.loc[("FT Accuracy (%)", "GD"), "SST2"] == "74.00 [70.00, 78.00]"
    assert t.loc[("FT Accuracy (%)", "GD"), "CB"] == "50.00"  # no interval: the mean alone
    assert t.loc[("SimAOU_norm", "LCGD")].eq("—").all()
    with pytest.raises(ValueError, match="no ci_low"):
        tables.intervals_table(_frame(rows).drop(columns=["ci_low", "ci_high"]), MODEL)


def test_comparisons_table_marks_significant_differences():
    base = {"model": MODEL, "variant": "trained", "method": "lcgd", "baseline": "gd", "n_seeds": 2, "n_examples": 50}
    frame = pd.DataFrame(
        [
            {
                **base,
                "task": "sst2",
                "metric": "simaou_norm",
                "diff": 0.1204,
                "ci_low": 0.05,
                "ci_high": 0.2,
                "p_value": 0.001,
                "significant": True,
            },
            {
                **base,
                "task": "cb",
                "metric": "simaou_norm",
                "diff": -0.01,
                "ci_low": -0.05,
                "ci_high": 0.03,
                "p_value": 0.6,
                "significant": False,
            },
            {
                **base,
                "task": "sst2",
                "metric": "acc_ft",
                "diff": -0.02,
                "ci_low": -0.04,
                "ci_high": 0.0,
                "p_value": 0.2,
                "significant": False,
            },
        ]
    )
    t = tables.comparisons_table(frame, MODEL, "trained", metrics=("acc_ft", "simaou_norm"))
    assert list(t.index) == [("FT Accuracy (%)", "LCGD − GD"), ("SimAOU_norm", "LCGD − GD")]
    assert list(t.columns) == ["SST2", "CB"]
    assert t.loc[("SimAOU_norm", "LCGD − GD"), "SST2"] == "+0.120 [+0.050, +0.200]*"
    assert t.loc[("SimAOU_norm", "LCGD − GD"), "CB"] == "-0.010 [-0.050, +0.030]"
    assert t.loc[("FT Accuracy (%)", "LCGD − GD"), "SST2"] == "-2.000 [-4.000, +0.000]"
    assert t.loc[("FT Accuracy (%)", "LCGD − GD"), "CB"] == "—"
    assert "p < 0.05" in t.attrs["footnotes"][0]
    assert "LCGD − GD" in render.to_markdown(t) and r"	extbf" not in render.to_latex(t)


def test_data_table_is_paper_001_table_3():
    stats = pd.DataFrame(
        [
            {
                "task": "cb",
                "n_train": 250,
                "n_eval": 56,
                "n_evaluated": 56,
                "prompt_tokens": 80.5,
                "icl_tokens": 1500.25,
                "true_k": 20,
                "k": 32,
                "demo_separator": "newline",
            },
            {
                "task": "sst2",
                "n_train": 67349,
                "n_eval": 872,
                "n_evaluated": 872,
                "prompt_tokens": 25.123,
                "icl_tokens": np.nan,
                "true_k": np.nan,
                "k": 32,
                "demo_separator": "eos",
            },
        ]
    )
    t = tables.data_table(stats)
    assert list(t["Separator"]) == ["eos", "newline"]
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
    assert "computed from 1 of 2 seeds" in render.to_markdown(t)
    tex = render.to_latex(t)
    assert r"\textsuperscript{\dag} computed from 1 of 2 seeds" in tex
    assert r"0.11\textsuperscript{\dag}" in tex
    # all seeds there -> no footnote
    t = tables.variants_table(summary, MODEL, n_seeds_expected=2)
    assert t.attrs["footnotes"] == []


def test_latex_escaping_and_structure(summary):
    t = tables.methods_table(summary, MODEL)
    tex = render.to_latex(t, "GD & LCGD: 100% of runs_x", label="tab:methods")
    assert r"\caption{GD \& LCGD: 100\% of runs\_x}" in tex
    assert r"SimAOU\_norm (GD)" in tex
    assert "SimAOU_norm" not in tex
    for token in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}{lccc}", r"\label{tab:methods}"):
        assert token in tex
    acc = render.to_latex(tables.accuracy_table(summary, MODEL))
    assert r"ZSL Accuracy (\%)" in acc
    assert render.latex_escape("a_b & 5% — x ± y") == r"a\_b \& 5\% --- x $\pm$ y"
    # variants table: the metric label is printed once per group, groups split by \midrule
    tex = render.to_latex(tables.variants_table(summary, MODEL))
    assert tex.count(r"\midrule") == 2
    assert tex.count("SimAOU &") == 1


def test_markdown_layout(summary):
    md = render.to_markdown(tables.variants_table(summary, MODEL), "Caption here")
    lines = md.splitlines()
    assert lines[0] == "**Caption here**"
    assert lines[2].replace(" ", "") == "|Metric|Setting|SST2|CB|"
    assert lines[3].replace(" ", "").startswith("|---")
    body = lines[4:10]
    assert body[1].split("|")[1].strip() == ""  # repeated metric label blanked
    assert body[3].split("|")[1].strip() == "SimAM_delta"


def test_write_table_files(tmp_path, summary):
    t = tables.methods_table(summary, MODEL)
    paths = render.write_table_files(t, tmp_path / "sub" / "table2", "Table 2")
    assert [p.name for p in paths] == ["table2.md", "table2.tex", "table2.csv", "table2.html"]
    assert all(p.stat().st_size > 0 for p in paths)
    csv = pd.read_csv(paths[2])
    assert list(csv.columns) == ["Metric", "SST2", "CB", "Average"]
    assert csv.set_index("Metric").loc["SimAOU_norm (GD)", "SST2"] == "0.11 ± 0.01"
    assert "**" not in paths[2].read_text()
    assert sorted(x.name for x in (tmp_path / "sub").iterdir()) == [
        "table2.csv",
        "table2.html",
        "table2.md",
        "table2.tex",
    ]  # no temp files left behind
    assert '<td class="value">0.11 ± 0.01</td>' in paths[3].read_text()


def test_tables_from_aggregated_runs(runs):
    s = _summarise(runs)
    t = tables.variants_table(s, MODEL, n_seeds_expected=3)
    assert t.shape == (6, 2)
    assert not (t == "—").any().any()
    assert t.attrs["footnotes"] == ["† computed from 2 of 3 seeds"]
    sel = runs[
        (runs.variant == "trained")
        & (runs.method == "gd")
        & (runs.task == "sst2")
        & (runs.metric == "simaou")
        & runs.layer.isna()
    ]["value"]
    assert t.loc[("SimAOU", "Trained"), "SST2"].startswith(tables.format_cell(sel.mean(), sel.std()))


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
            sel = runs[
                (runs.variant == "trained") & (runs.method == method) & (runs.metric == metric) & runs.layer.notna()
            ]
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
    assert sorted(p.name for p in (tmp_path / "fig").iterdir()) == ["per_layer.pdf", "per_layer.png"]


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
    sel = runs[
        (runs.variant == "trained") & (runs.method == "gd") & (runs.task == "sst2") & (runs.metric == "acc_icl")
    ]["value"]
    assert bars[2].patches[0].get_height() == pytest.approx(100 * sel.mean())
    assert np.isnan(bars[1].patches[1].get_height())
    assert any(t.get_text() == "n/a" for t in ax.texts)
    leg = ax.get_legend()
    assert [x.get_text() for x in leg.get_texts()] == ["ZSL", "FT", "ICL"]
    _assert_legend_above(fig, ax, leg)
    png, pdf = figures.write_figure(fig, tmp_path / "accuracy")
    assert png.stat().st_size > 5000 and pdf.stat().st_size > 1000


def _bars(ax):
    from matplotlib.container import BarContainer

    return [c for c in ax.containers if isinstance(c, BarContainer)]


def _error_segments(ax):
    """(y_low, y_high, linestyle is dashed) of every drawn error bar of the axes, by x."""
    from matplotlib.container import ErrorbarContainer

    out = {}
    for cont in ax.containers:
        if not isinstance(cont, ErrorbarContainer):
            continue
        for bars in cont.lines[2]:
            styles = bars.get_linestyles()
            for i, seg in enumerate(bars.get_segments()):
                if len(seg):
                    dash = styles[i % len(styles)][1] is not None
                    out[round(float(seg[0, 0]), 6)] = (seg[0, 1], seg[1, 1], dash)
    return out


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def test_error_bars_rule():
    lower, upper, from_ci = figures.error_bars(
        mean=[0.5, 0.5, 0.5, 0.5],
        std=[0.1, np.nan, np.nan, 0.2],
        n=[3, 1, 1, 1],
        ci_low=[0.0, 0.4, np.nan, 0.45],
        ci_high=[1.0, 0.7, np.nan, 0.48],
    )
    np.testing.assert_allclose(lower, [0.1, 0.1, np.nan, 0.05])
    np.testing.assert_allclose(upper, [0.1, 0.2, np.nan, 0.0])  # interval below the mean: clipped
    assert from_ci.tolist() == [False, True, False, True]


def test_accuracy_figure_one_seed_shows_the_bootstrap_interval():
    rows = [
        dict(_summary_row("trained", t, "gd", m, mu, std=np.nan, n=1), ci_low=mu - 0.05, ci_high=mu + 0.1)
        for t, m, mu in [("sst2", "acc_zsl", 0.5), ("sst2", "acc_ft", 0.6), ("sst2", "acc_icl", 0.7)]
    ]
    fig = figures.accuracy_figure(_frame(rows), MODEL)
    (ax,) = fig.axes
    segs = _error_segments(ax)
    icl_x = _bars(ax)[2].patches[0].get_x() + _bars(ax)[2].patches[0].get_width() / 2
    low, high, dashed = segs[round(icl_x, 6)]
    assert (low, high) == pytest.approx((65.0, 80.0)) and dashed
    assert "bootstrap CI" in fig.get_suptitle() and "one seed" in fig.get_suptitle()
    figures.plt.close(fig)


def test_per_layer_figure_random_baseline_and_single_run_interval(runs):
    extra = runs[(runs.metric == "simaou")].assign(metric="simaou_random_gaussian")
    extra = extra.assign(value=extra["value"] / 10)
    both = pd.concat([runs, extra], ignore_index=True)
    fig = figures.per_layer_figure(both, MODEL)
    ax = fig.axes[0]
    (line,) = [x for x in ax.get_lines() if x.get_label().startswith("Random SimAOU")]
    sel = extra[(extra.variant == "trained") & extra.layer.notna()]
    np.testing.assert_allclose(line.get_ydata(), sel.groupby("layer")["value"].mean().to_numpy())
    assert line.get_linestyle() == "--"
    assert "Random SimAOU (Gaussian $r$)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert not [x for x in fig.axes[1].get_lines() if x.get_label().startswith("Random")]  # SimAM: none
    figures.plt.close(fig)
    # one task, one seed: the run's own interval, dashed
    one = runs[(runs.task == "sst2") & (runs.seed == 1)].assign(
        ci_low=lambda d: d.value - 0.1, ci_high=lambda d: d.value + 0.3
    )
    fig = figures.per_layer_figure(one, MODEL, methods=("gd",), metrics=("simaou",))
    (cont,) = fig.axes[0].containers
    seg = cont.lines[2][0].get_segments()[1]
    value = one[(one.variant == "trained") & (one.method == "gd") & (one.metric == "simaou") & (one.layer == 1)][
        "value"
    ].item()
    assert (seg[0, 1], seg[1, 1]) == pytest.approx((value - 0.1, value + 0.3))
    assert "bootstrap CI" in fig.get_suptitle() and "one run" in fig.get_suptitle()
    figures.plt.close(fig)


def test_alpha_figure(tmp_path):
    rows = [
        dict(_summary_row("trained", "sst2", "lcgd", "alpha", 0.15, std=0.03, n=3), ci_low=0.1, ci_high=0.2),
        dict(_summary_row("trained", "cb", "lcgd", "alpha", -0.05, std=np.nan, n=1), ci_low=-0.09, ci_high=0.01),
        dict(
            _summary_row("trained", "sst2", "lcgd", "alpha", 0.9, layer=0), ci_low=0.0, ci_high=1.0
        ),  # per layer: not shown
        dict(_summary_row("untrained", "sst2", "lcgd", "alpha", 0.7), ci_low=0.0, ci_high=1.0),
        dict(_summary_row("trained", "sst2", "lcgd_clip", "alpha", 0.3, std=0.01, n=3), ci_low=0.2, ci_high=0.4),
    ]
    fig = figures.alpha_figure(_frame(rows), MODEL, methods=("lcgd", "lcgd_clip"))
    (ax,) = fig.axes
    lcgd, clip = _bars(ax)
    assert [lcgd.get_label(), clip.get_label()] == ["LCGD", "LCGD_CLIP"]
    assert [x.get_text() for x in ax.get_xticklabels()] == ["SST2", "CB"]
    assert [p.get_height() for p in lcgd.patches] == pytest.approx([0.15, -0.05])
    assert clip.patches[0].get_height() == pytest.approx(0.3) and np.isnan(clip.patches[1].get_height())
    assert _texts(ax).count("n/a") == 1
    segs = _error_segments(ax)
    centre = [p.get_x() + p.get_width() / 2 for p in lcgd.patches]
    assert segs[round(centre[0], 6)][:2] == pytest.approx((0.12, 0.18)) and not segs[round(centre[0], 6)][2]
    assert segs[round(centre[1], 6)][:2] == pytest.approx((-0.09, 0.01)) and segs[round(centre[1], 6)][2]
    assert "alpha" in ax.get_ylabel() and ax.get_xlabel() == "Task"
    assert "± std over seeds" in fig.get_suptitle() and "dashed" in fig.get_suptitle()
    png, _ = figures.write_figure(fig, tmp_path / "alpha")
    assert png.stat().st_size > 5000


def test_alpha_figure_without_data():
    rows = [_summary_row("trained", "sst2", "gd", "simaou", 0.1)]
    fig = figures.alpha_figure(_frame(rows), MODEL, tasks=["sst2"])
    (ax,) = fig.axes
    assert "no data" in _texts(ax)
    figures.plt.close(fig)


def test_grad_norm_figure(tmp_path):
    from matplotlib.colors import LogNorm

    gd = np.arange(1.0, 13.0).reshape(4, 3)  # 4 steps, 3 layers
    lcgd = 10.0 ** np.arange(12.0).reshape(4, 3)
    lcgd[2, 1] = 0.0  # undefined on a log scale
    fig = figures.grad_norm_figure({"gd": gd, "lcgd": lcgd, "linearized": None}, log_scale={"lcgd"}, title="toy")
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>" and ax.get_visible()]
    colorbars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(panels) == 3 and len(colorbars) == 2  # rows of two, the fourth slot hidden
    left, right, empty = panels
    (image,) = left.images
    np.testing.assert_array_equal(image.get_array(), gd.T)  # rows = layers, from the bottom
    assert image.origin == "lower" and image.get_extent() == [0.5, 4.5, -0.5, 2.5]
    assert not isinstance(image.norm, LogNorm)
    (image,) = right.images
    assert isinstance(image.norm, LogNorm)
    shown = image.get_array()
    assert shown.mask[1, 2] and shown.mask.sum() == 1
    np.testing.assert_array_equal(shown.data, lcgd.T)
    assert "grey: undefined (1 cells)" in right.get_title()
    assert left.get_xlabel() == "Training demonstration index"
    assert left.get_ylabel() == "Layer (from input to output)"
    assert colorbars[0].get_ylabel() == r"$\ell_2$ norm of the K/V gradient"
    assert colorbars[1].get_ylabel().endswith("(log scale)")
    assert left.get_title() == "GD" and right.get_title().startswith("LCGD (log colour scale)")
    assert "no data" in _texts(empty) and not empty.images
    png, pdf = figures.write_figure(fig, tmp_path / "grad_norms")
    assert png.stat().st_size > 5000 and pdf.stat().st_size > 1000


def _changes_rows(method, task, values, n=2):
    parts = ("icl_only", "both", "ft_only")
    return [
        _summary_row("trained", task, method, f"changes_{p}_{s}", v, n=n)
        for (s, triple) in zip(("correct", "incorrect"), values)
        for p, v in zip(parts, triple)
    ]


def test_prediction_changes_figure():
    rows = _changes_rows("gd", "sst2", [(30.0, 12.0, 4.0), (20.0, 2.0, 9.0)]) + _changes_rows(
        "gd", "cb", [(1.5, 0.0, 2.5), (3.0, 1.0, 0.5)]
    )
    rows = [r for r in rows if not (r["task"] == "cb" and r["metric"] == "changes_both_incorrect")]
    rows += [_summary_row("trained", "sst2", "gd", "acc_ft", 0.5)]
    fig = figures.prediction_changes_figure(_frame(rows), MODEL, methods=("gd", "lcgd"))
    gd_ax, lcgd_ax = fig.axes
    bars = {b.get_label(): b for b in _bars(gd_ax)}
    assert list(bars) == [f"{p} ({s})" for s in ("correct", "incorrect") for p in figures.CHANGE_PARTS.values()]
    icl, both, ft = (bars[f"{p} (correct)"] for p in figures.CHANGE_PARTS.values())
    assert [p.get_height() for p in icl.patches] == [30.0, 1.5]  # SST2, CB
    assert [p.get_height() for p in both.patches] == [12.0, 0.0]
    assert [p.get_y() for p in both.patches] == [30.0, 1.5]  # stacked on ICL only
    assert [p.get_y() for p in ft.patches] == [42.0, 1.5] and [p.get_height() for p in ft.patches] == [4.0, 2.5]
    wrong = bars["FT only (incorrect)"].patches
    assert wrong[0].get_height() == 9.0 and wrong[0].get_y() == 22.0 and wrong[0].get_hatch()
    assert np.isnan(wrong[1].get_height())  # CB's incorrect bar lacks a part: left out, marked
    assert _texts(gd_ax).count("n/a") == 1
    assert {"46", "31", "4"} <= set(_texts(gd_ax))  # totals on top: SST2 right, SST2 wrong, CB right
    assert wrong[0].get_x() > ft.patches[0].get_x()  # incorrect to the right of correct
    assert [x.get_text() for x in lcgd_ax.get_xticklabels()] == ["SST2", "CB"]
    assert "no data" in _texts(lcgd_ax)
    assert "GD" in gd_ax.get_ylabel() and "LCGD" in lcgd_ax.get_ylabel()
    assert lcgd_ax.get_xlabel() == "Task"
    assert "mean over 2 seeds" in fig.get_suptitle()
    assert gd_ax.get_ylim()[1] > 46
    figures.plt.close(fig)


def test_lr_sweep_figure():
    from matplotlib.container import ErrorbarContainer

    sweep = pd.DataFrame(
        [
            dict(group="GD", method=m, task=t, lr=lr * scale)
            for m, scale in (("gd_x0.5", 0.5), ("gd", 1.0), ("gd_x2", 2.0))
            for t, lr in (("sst2", 5e-4), ("cb", 0.08))
        ]
    )
    rng = np.random.default_rng(1)
    rows = []
    for m, t in itertools.product(sweep.method.unique(), ("sst2", "cb")):
        for metric in ("simaou_norm", "simam_delta", "acc_ft", "simaou_random"):
            rows.append(
                dict(
                    _summary_row("trained", t, m, metric, float(rng.uniform()), std=0.01, n=3), ci_low=0.0, ci_high=1.0
                )
            )
    rows.append(dict(_summary_row("trained", "sst2", "lcgd", "simaou_norm", 5.0), ci_low=0.0, ci_high=1.0))
    summary = _frame(rows)
    fig = figures.lr_sweep_figure(summary, MODEL, sweep)
    panels = fig.axes
    assert len(panels) == 3
    for ax, metric, scale in zip(panels, ("simaou_norm", "simam_delta", "acc_ft"), (1, 1, 100)):
        assert ax.get_xscale() == "log" and ax.get_xlabel() == "Learning rate" and ax.get_ylabel()
        conts = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert [c.get_label() for c in conts] == ["SST2", "CB"]
        for cont, task, lr in zip(conts, ("sst2", "cb"), (5e-4, 0.08)):
            line = cont.lines[0]
            np.testing.assert_allclose(line.get_xdata(), [lr / 2, lr, lr * 2])
            sel = summary[(summary.task == task) & (summary.metric == metric)].set_index("method")["mean"]
            expect = sel.loc[["gd_x0.5", "gd", "gd_x2"]].to_numpy() * scale
            np.testing.assert_allclose(line.get_ydata(), expect)
    rand = [x for x in panels[0].get_lines() if x.get_linestyle() == ":"]
    assert len(rand) == 2  # per task, across its rates
    for line, task, lr in zip(rand, ("sst2", "cb"), (5e-4, 0.08)):
        expect = summary[(summary.metric == "simaou_random") & (summary.task == task)]["mean"].mean()
        np.testing.assert_allclose(line.get_ydata(), [expect, expect])
        np.testing.assert_allclose(line.get_xdata(), [lr / 2, lr * 2])
    assert not [x for x in panels[1].get_lines() if x.get_linestyle() == ":"]
    assert panels[2].get_ylabel() == "FT accuracy (%)"
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[:2] == ["SST2", "CB"] and texts[-1].startswith("Random SimAOU")
    figures.plt.close(fig)
    # one percent rule (the metric catalog): a Jaccard index or an order share is drawn in percent,
    # as the tables show it, not only an accuracy
    rows = [
        dict(_summary_row("trained", t, m, "jaccard_all", 0.25), ci_low=0.2, ci_high=0.3)
        for m in sweep.method.unique()
        for t in ("sst2", "cb")
    ]
    fig = figures.lr_sweep_figure(_frame(rows), MODEL, sweep, metrics=("jaccard_all",))
    line = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)][0].lines[0]
    np.testing.assert_allclose(line.get_ydata(), [25.0, 25.0, 25.0])
    figures.plt.close(fig)
    # no data for the swept methods: each panel says so
    fig = figures.lr_sweep_figure(summary[summary.method == "lcgd"], MODEL, sweep)
    assert all("no data" in _texts(ax) for ax in fig.axes)
    figures.plt.close(fig)


def test_models_figure(runs):
    big = runs.assign(model="big-model", value=runs["value"] + 1.0)
    both = pd.concat([runs, big], ignore_index=True)
    extra = both[both.metric == "simaou_norm"].assign(metric="simaou_random", value=0.01)
    both = pd.concat([both, extra], ignore_index=True)
    fig = figures.models_figure(both, ["big-model", MODEL], metrics=("simaou_norm", "acc_ft", "alpha"))
    simaou_ax, acc_ax, alpha_ax = fig.axes
    assert [x.get_text() for x in alpha_ax.get_xticklabels()] == ["big-model", MODEL]  # config order
    gd, lcgd = _bars(simaou_ax)
    assert [gd.get_label(), lcgd.get_label()] == ["GD", "LCGD"]
    for bars, method in ((gd, "gd"), (lcgd, "lcgd")):
        for patch, model in zip(bars.patches, ("big-model", MODEL)):
            sel = both[
                (both.model == model)
                & (both.variant == "trained")
                & (both.method == method)
                & (both.metric == "simaou_norm")
                & both.layer.isna()
            ]["value"]
            assert len(sel) == 4 and patch.get_height() == pytest.approx(sel.mean())
    sel = both.query("model == @MODEL and variant == 'trained' and method == 'gd' and metric == 'acc_ft'")["value"]
    assert _bars(acc_ax)[0].patches[1].get_height() == pytest.approx(100 * sel.mean())
    assert acc_ax.get_ylabel() == "FT accuracy (%)"
    segs = _error_segments(simaou_ax)
    centre = gd.patches[1].get_x() + gd.patches[1].get_width() / 2
    gd_model = both.query(
        "model == @MODEL and variant == 'trained' and method == 'gd' and metric == 'simaou_norm' and layer.isna()"
    )["value"]
    assert segs[round(centre, 6)][:2] == pytest.approx(
        (gd_model.mean() - gd_model.std(), gd_model.mean() + gd_model.std())
    )
    rand = [x for x in simaou_ax.get_lines() if x.get_linestyle() == "--"]
    assert len(rand) == 2 and all(x.get_ydata()[0] == pytest.approx(0.01) for x in rand)
    assert "no data" in _texts(alpha_ax)  # the runs hold no alpha
    assert alpha_ax.get_xlabel() == "Model"
    figures.plt.close(fig)


def test_method_colours_follow_the_kind_not_the_name():
    from icl_gd.report import figures

    by_name = figures.method_colors(["gd", "lcgd", "lcgd_clip"])
    assert (
        by_name["gd"] == "tab:orange"
        and by_name["lcgd"] == "tab:blue"
        and by_name["lcgd_clip"] not in ("tab:orange", "tab:blue")
    )
    named = figures.method_colors(
        ["vanilla", "causal", "causal_clip"], {"vanilla": "gd", "causal": "lcgd", "causal_clip": "lcgd"}
    )
    assert named["vanilla"] == "tab:orange" and named["causal"] == "tab:blue"
    assert named["causal_clip"] not in ("tab:orange", "tab:blue")


def test_output_distributions_figure(tmp_path):
    rows = [
        _summary_row("trained", "sst2", "gd", "kl_icl_zsl", 0.40),
        _summary_row("trained", "sst2", "gd", "kl_icl_ft", 0.25),
        _summary_row("trained", "sst2", "lcgd", "kl_icl_ft", 0.35),
        _summary_row("trained", "cb", "gd", "kl_icl_zsl", 0.10),
        _summary_row("trained", "cb", "lcgd", "kl_icl_ft", 0.05),
        _summary_row("trained", "cb", "lcgd", "kl_icl_zsl", 9.0),
    ]  # ZSL's bar reads the first method's runs
    fig = figures.output_distributions_figure(_frame(rows), MODEL, methods=("gd", "lcgd"))
    (ax,) = fig.axes
    bars = {b.get_label(): [p.get_height() for p in b.patches] for b in _bars(ax)}
    assert list(bars) == ["ZSL", "GD", "LCGD"]
    assert bars["ZSL"] == [0.40, 0.10] and bars["LCGD"] == [0.35, 0.05]
    assert bars["GD"][0] == 0.25 and np.isnan(bars["GD"][1])  # CB has no GD cell: marked, not 0
    assert _texts(ax).count("n/a") == 1
    assert [x.get_text() for x in ax.get_xticklabels()] == ["SST2", "CB"]
    assert "KL" in ax.get_ylabel() and "nats" in ax.get_ylabel()
    assert "± std over seeds" in fig.get_suptitle()
    empty = figures.output_distributions_figure(_frame([_summary_row("trained", "sst2", "gd", "acc_ft", 0.5)]), MODEL)
    assert "no data" in _texts(empty.axes[0])
    png, _ = figures.write_figure(fig, tmp_path / "output_distributions")
    assert png.stat().st_size > 5000


def test_the_premise_table_sets_the_similarity_beside_where_the_model_learns(tmp_path):
    """Per model and task the premise's numbers and GD's SimAOU_norm, each in its own column (what
    report.side_by_side reads back); a task without the similarity shows "—"; finetuning's side of
    the premise, per method, after them; the figure draws it."""
    premise = pd.DataFrame(
        [
            dict(model=MODEL, task="sst2", level=1 - 0.05 / 12, icl=84.0, zsl=67.0, majority=50.0, icl_zsl=17.0,
                 icl_zsl_low=5.0, icl_zsl_high=29.0, icl_majority=34.0, icl_majority_low=20.0,
                 icl_majority_high=48.0, icl_permuted=80.0, icl_permuted_majority=30.0,
                 icl_permuted_majority_low=15.0, icl_permuted_majority_high=45.0,
                 icl_permuted_majority_status="holds", learns=True, top_class=1, top_label="positive",
                 top_share=0.55, icl_zsl_calibrated_status="holds", learns_calibrated=True),
            dict(model=MODEL, task="cb", level=1 - 0.05 / 12, icl=38.0, zsl=39.0, majority=40.0, icl_zsl=-1.0,
                 icl_zsl_low=-9.0, icl_zsl_high=7.0, icl_majority=-2.0, icl_majority_low=-12.0,
                 icl_majority_high=8.0, icl_permuted=20.0, icl_permuted_majority=-20.0,
                 icl_permuted_majority_low=-30.0, icl_permuted_majority_high=-10.0,
                 icl_permuted_majority_status="breaks", learns=False, top_class=0, top_label="", top_share=0.97,
                 icl_zsl_calibrated_status="not run", learns_calibrated=False),
        ]
    )  # fmt: skip
    summary = pd.DataFrame(
        [{**_summary_row("trained", "sst2", "gd", "simaou_norm", 0.21), "ci_low": 0.15, "ci_high": 0.27}]
        + [{**_summary_row("trained", "sst2", "lcgd", "simaou_norm", 0.5), "ci_low": 0.4, "ci_high": 0.6}]
    )
    table = premise_table.premise_table(premise, summary, "gd")
    assert list(table.columns) == list(premise_table.PREMISE_COLUMNS)
    sst2, cb = table.loc[(MODEL, "SST2")], table.loc[(MODEL, "CB")]
    assert (sst2["ICL - ZSL"], sst2["ICL - ZSL low"], sst2["Learns in context"]) == ("17.0", "5.0", "yes")
    assert (sst2["SimAOU_norm"], sst2["SimAOU_norm low"], sst2["SimAOU_norm high"]) == ("0.210", "0.150", "0.270")
    assert cb["SimAOU_norm"] == tables.MISSING and cb["ICL's most-predicted label"] == "0 (97%)"
    assert cb["Learns in context"] == "no" and "99.58%" in table.attrs["footnotes"][0]
    assert (sst2["Learns in context, calibrated"], cb["Learns in context, calibrated"]) == (
        "yes",
        premise_table.NOT_RUN,
    )
    assert (sst2["ICL, permuted labels (%)"], sst2["Permuted - majority low"], cb["Permuted - majority"]) == (
        "80.0",
        "15.0",
        "-20.0",
    )
    assert "all three lower ends above 0" in table.attrs["footnotes"][0] and len(table.attrs["footnotes"]) == 1
    # an older run's premise, without ICL on permuted labels: "not run", and it learns nowhere
    old = premise_table.premise_table(
        premise.drop(columns=[c for c in premise if c.startswith("icl_permuted")]), summary, "gd"
    )
    assert old.loc[(MODEL, "SST2"), "Permuted - majority"] == premise_table.NOT_RUN
    assert set(old["Learns in context"]) == {"no"} and "ICL on permuted labels was not run" in old.attrs["footnotes"][1]
    # finetuning's side of the premise: per method FT - ZSL with its interval and whether it learns, a
    # method not run on a task "not run"
    methods = pd.DataFrame(
        [
            dict(model=MODEL, task="sst2", method="gd", ft_zsl=12.0, ft_zsl_low=3.0, ft_zsl_high=21.0, learns=True),
            dict(
                model=MODEL, task="sst2", method="gd_chosen", ft_zsl=0.0, ft_zsl_low=-8.0, ft_zsl_high=8.0, learns=False
            ),
            dict(model=MODEL, task="cb", method="gd", ft_zsl=-1.5, ft_zsl_low=-9.0, ft_zsl_high=6.0, learns=False),
        ]
    )
    with_methods = premise_table.premise_table(premise, summary, "gd", methods)
    assert list(with_methods.columns) == [
        *premise_table.PREMISE_COLUMNS,
        *("FT - ZSL (GD)", "FT - ZSL (GD) low", "FT - ZSL (GD) high", "FT learns (GD)"),
        *("FT - ZSL (GD_CHOSEN)", "FT - ZSL (GD_CHOSEN) low", "FT - ZSL (GD_CHOSEN) high", "FT learns (GD_CHOSEN)"),
    ]
    sst2, cb = with_methods.loc[(MODEL, "SST2")], with_methods.loc[(MODEL, "CB")]
    assert (sst2["FT - ZSL (GD)"], sst2["FT - ZSL (GD) low"], sst2["FT learns (GD)"]) == ("12.0", "3.0", "yes")
    assert (sst2["FT learns (GD_CHOSEN)"], cb["FT - ZSL (GD) high"], cb["FT learns (GD)"]) == ("no", "6.0", "no")
    assert cb["FT - ZSL (GD_CHOSEN)"] == cb["FT learns (GD_CHOSEN)"] == premise_table.NOT_RUN
    assert "finetuning's side of the premise" in with_methods.attrs["footnotes"][1]
    assert with_methods[list(premise_table.PREMISE_COLUMNS)].equals(table)
    fig = figures.premise_figure(with_methods.reset_index())
    assert len(fig.axes[0].lines) > 0
    figures.write_figure(fig, tmp_path / "premise")
    assert (tmp_path / "premise.png").stat().st_size > 0
