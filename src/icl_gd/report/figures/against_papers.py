"""The run against the papers: published values against this run's (reproduction), and the
papers' claims as a forest plot."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from icl_gd.common.names import (
    method_label,
    order_tasks,
    percent,
    task_label,
    variant_label,
)
from icl_gd.metrics import catalog, claim_definitions
from icl_gd.report import claim_wording
from icl_gd.report.figures.base import (
    no_data,
    style_axes,
)

# ------------------------------------------------------------------------------ reproduction

_CELL_MARKERS = {
    ("trained", "gd"): "o",
    ("trained", "lcgd"): "s",
    ("trained", "lcgd_clip"): "^",
    ("trained_embeddings", "gd"): "v",
    ("untrained", "gd"): "D",
}


def reproduction_figure(cells: pd.DataFrame, model: str, *, ci_level: float = 0.95) -> Figure:
    """Published (x) against this run (y), one panel per metric, one point per published cell the
    run covers (``published.reproduction``): colour the task, marker the variant and method; the
    published ± as a horizontal bar, the run's interval as a vertical one; the identity line."""
    metrics = [m for m in catalog.shown_in("reproduction_figure") if m in set(cells["metric"])]
    metrics += sorted(set(cells["metric"]) - set(metrics))
    n = max(len(metrics), 1)
    ncols = min(n, 4)
    nrows = -(-n // ncols)
    fig, grid = plt.subplots(
        nrows, ncols, squeeze=False, figsize=(3.4 * ncols + 1.8, 3.3 * nrows + 0.9), layout="constrained"
    )
    tasks = order_tasks(cells["task"].unique()) if len(cells) else []
    colors = {t: f"C{i}" if t != "average" else "black" for i, t in enumerate(tasks)}
    for ax, metric in zip(grid.flat, metrics):
        df = cells[cells["metric"] == metric]
        for row in df.itertuples(index=False):
            marker = _CELL_MARKERS.get((row.variant, row.method), "X")
            ax.errorbar(
                row.published,
                row.mean,
                xerr=0.0 if np.isnan(row.published_spread) else row.published_spread,
                yerr=[[row.mean - row.ci_low], [row.ci_high - row.mean]],
                fmt=marker,
                color=colors[row.task],
                markersize=5,
                elinewidth=0.8,
                capsize=2,
                mfc="none" if not row.within else colors[row.task],
            )
        low = float(np.nanmin([df["published"].min(), df["ci_low"].min()]))
        high = float(np.nanmax([df["published"].max(), df["ci_high"].max()]))
        pad = 0.05 * (high - low or 1.0)
        ax.plot([low - pad, high + pad], [low - pad, high + pad], color="0.6", lw=0.8, ls="--", zorder=0)
        ax.set_xlim(low - pad, high + pad)
        ax.set_ylim(low - pad, high + pad)
        percent_unit = df["unit"].iloc[0] == "percent"
        ax.set_title(
            catalog.axis_label(metric)
            if metric.startswith("acc_")
            else catalog.figure_label(metric) + (" (%)" if percent_unit else ""),
            fontsize=10,
        )
        ax.set_xlabel("published")
        ax.set_ylabel("this run")
        style_axes(ax, grid_axis="both")
    for ax in list(grid.flat)[len(metrics) :]:
        ax.set_visible(False)
    if not metrics:
        grid.flat[0].set_visible(True)
        no_data(grid.flat[0], "no published cell covered by this run")
    handles = [
        Line2D(
            [], [], ls="", marker="o", color=colors[t], label=task_label(t) if t != "average" else "average over tasks"
        )
        for t in tasks
    ]
    present = set(zip(cells["variant"], cells["method"]))
    handles += [
        Line2D([], [], ls="", marker=m, color="0.3", label=f"{variant_label(v, in_text=True)}, {method_label(k)}")
        for (v, k), m in _CELL_MARKERS.items()
        if (v, k) in present
    ]
    handles.append(
        Line2D(
            [],
            [],
            ls="",
            marker="o",
            color="0.3",
            mfc="none",
            label="not within (run and published uncertainty combined)",
        )
    )
    fig.legend(handles=handles, loc="outside right upper", frameon=False, fontsize=8)
    within = int(cells["within"].sum()) if len(cells) else 0
    published_models = ", ".join(sorted(set(cells["published_model"]))) if len(cells) else "—"
    fig.suptitle(
        f"This run ({model}) against the published values ({published_models}): {within} of {len(cells)} cells within\n"
        f"vertical bars: the run's {percent(ci_level)} interval; horizontal: the published ± over seeds",
        fontsize=10,
    )
    return fig


# ------------------------------------------------------------------------------------ claims

VERDICT_COLORS = {
    "supported": "tab:green",
    "equivalent": "tab:olive",
    "contradicted": "tab:red",
    "negligible": "tab:purple",
    "inconclusive": "tab:orange",
    "not run": "0.6",
}
_CLAIMED_SIDE = "#d9f0d3"


def claims_figure(tests: pd.DataFrame, model: str, roles: Mapping[str, str], *, ci_level: float = 0.95) -> Figure:
    """A forest plot of the claims (``claim_testing.evaluate_claims``): one panel per claim and cell b,
    a row per task and one for the mean over tasks, each difference a - b with its interval, the
    zero line, the claimed side shaded, the interval and the title in the verdict's colour."""

    tests = tests[tests["model"] == model]
    panels = [(claim, j) for claim in claim_definitions.CLAIMS for j in range(len(claim.against))]
    panel_rows = [
        tests[(tests["claim"] == claim.id) & (tests["comparison"] == j) & (tests["task"] != "")] for claim, j in panels
    ]
    sizes = [len(rows) for rows in panel_rows]
    verdicts = claim_wording.verdicts(tests)
    ncols = 2
    nrows = -(-len(panels) // ncols)
    heights = [max(max(sizes[r * ncols : (r + 1) * ncols]), 1) * 0.17 + 0.75 for r in range(nrows)]
    fig = plt.figure(figsize=(14, sum(heights) + 1.0), layout="constrained")
    grid = fig.add_gridspec(nrows, ncols, height_ratios=heights)
    counts = {v: 0 for v in VERDICT_COLORS}
    for i, ((claim, j), rows) in enumerate(zip(panels, panel_rows)):
        ax = fig.add_subplot(grid[i // ncols, i % ncols])
        verdict = verdicts[claim.id]
        if j == 0:
            counts[verdict] += 1
        color = VERDICT_COLORS[verdict]
        statement = claim_wording.claim_statement(claim, roles, j)
        title = f"{claim.paper} {claim.table}: {claim.text}" if j == 0 else "(continued)"
        title = f"{_wrap(title, 95)}\n{_wrap(statement, 105)} — {verdict}"
        if verdict == "inconclusive" and j == 0:
            first = rows.iloc[0]
            title += "\n" + _wrap("would need: " + claim_wording.needed_text(first), 105)
        ax.set_title(title, fontsize=7.5, loc="left", color=color)
        ax.set_yticks([])
        if rows.empty:
            no_data(ax, "not run: the run has no such cell")
            ax.set_xticks([])
            continue
        order = [t for t in order_tasks(rows["task"]) if t != claim_definitions.MEAN] + [claim_definitions.MEAN]
        by_task = {r.task: r for r in rows.itertuples(index=False)}
        order = [t for t in order if t in by_task]
        ys = np.arange(len(order))[::-1].astype(float)
        decisive = claim_definitions.MEAN if claim.quantifier == "mean" else None
        for y, task in zip(ys, order):
            r = by_task[task]
            if not np.isfinite(r.difference):
                ax.text(0.0, y, "undefined", fontsize=6, va="center", color="0.5")
                continue
            if getattr(r, "status", "") == "incomplete" and task != claim_definitions.MEAN:
                ax.text(r.ci_high, y, f"  incomplete ({r.incomplete})", fontsize=6, va="center", color="0.5")
            strong = (task == decisive) or (decisive is None and task != claim_definitions.MEAN)
            ax.plot([r.ci_low, r.ci_high], [y, y], color=color if strong else "0.55", lw=2.0 if strong else 1.2)
            ax.plot(
                [r.difference],
                [y],
                marker="D" if task == claim_definitions.MEAN else "o",
                ms=4,
                color=color if strong else "0.55",
            )
        lows = [by_task[t].ci_low for t in order if np.isfinite(by_task[t].ci_low)]
        highs = [by_task[t].ci_high for t in order if np.isfinite(by_task[t].ci_high)]
        low, high = min([0.0, *lows]), max([0.0, *highs])
        margin = float(rows["margin"].iloc[0])
        # the claimed side begins at 0, or at the margin on the other side for a non-inferiority claim
        edge = -claim.direction * margin if claim.test == "non_inferiority" else 0.0
        low, high = min(low, edge - margin), max(high, edge + margin)
        pad = 0.08 * ((high - low) or 1.0)
        ax.set_xlim(low - pad, high + pad)
        ax.axvspan(edge, high + pad, color=_CLAIMED_SIDE, zorder=0) if claim.direction > 0 else ax.axvspan(
            low - pad, edge, color=_CLAIMED_SIDE, zorder=0
        )
        ax.axvline(0.0, color="0.2", lw=0.8)
        for x in (-margin, margin):  # the smallest effect of interest
            ax.axvline(x, color="0.45", lw=0.6, ls=":")
        ax.set_yticks(
            ys, [task_label(t) if t != claim_definitions.MEAN else "mean over tasks" for t in order], fontsize=7
        )
        ax.set_ylim(-0.7, len(order) - 0.3)
        unit = rows["unit"].iloc[0]
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("a − b" + (" (points)" if unit == "points" else ""), fontsize=7)
    handles = [Patch(color=c, label=f"{v} ({counts[v]})") for v, c in VERDICT_COLORS.items()]
    handles.append(Patch(color=_CLAIMED_SIDE, label="the claimed side"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False, fontsize=8)
    fig.suptitle(
        f"The papers' claims on this run ({model}): each difference a − b with its paired interval (seeds and "
        f"examples crossed); dotted: the smallest effect of interest\nper-task intervals at the level the claim's "
        f"quantifier reads them (Bonferroni over tasks; {percent(ci_level)} overall); thick: what the verdict reads",
        fontsize=9,
    )
    return fig


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


# ------------------------------------------------------------------------------ premise


def premise_figure(table: pd.DataFrame) -> Figure:
    """Paper 001's question across tasks and models: per model and task, ICL's gain over ZSL
    (points) against SimAOU_norm of GD, each with its interval; filled where the model learns in
    context, hollow where it does not. ``table``: the report's premise table (``premise_table.premise_table``,
    its index as columns; several reports' rows concatenated for several models)."""
    number = lambda column: pd.to_numeric(table[column], errors="coerce").to_numpy()  # noqa: E731
    x, x_low, x_high = (number(c) for c in ("SimAOU_norm", "SimAOU_norm low", "SimAOU_norm high"))
    y, y_low, y_high = (number(c) for c in ("ICL - ZSL", "ICL - ZSL low", "ICL - ZSL high"))
    learns = (table["Learns in context"] == "yes").to_numpy()
    models = list(dict.fromkeys(table["Model"]))
    fig, ax = plt.subplots(figsize=(7.0, 5.0), layout="constrained")
    shown = np.isfinite(x) & np.isfinite(y)
    if not shown.any():
        no_data(ax)
        return fig
    for i, model in enumerate(models):
        color = f"C{i}"
        for j in np.flatnonzero(shown & (table["Model"] == model).to_numpy()):
            ax.errorbar(
                x[j],
                y[j],
                xerr=_reach(x[j], x_low[j], x_high[j]),
                yerr=_reach(y[j], y_low[j], y_high[j]),
                fmt="o",
                color=color,
                markerfacecolor=color if learns[j] else "white",
                markersize=7,
                elinewidth=1,
                capsize=2,
            )
            ax.annotate(str(table["Task"].iloc[j]), (x[j], y[j]), xytext=(5, 4), textcoords="offset points", fontsize=8)
    ax.axhline(0.0, color="0.5", linewidth=0.8, linestyle="--")
    ax.set_xlabel("SimAOU_norm of GD (trained model, layer mean)")
    ax.set_ylabel("ICL accuracy - ZSL accuracy (points)")
    handles = [Line2D([], [], marker="o", color=f"C{i}", linestyle="", label=m) for i, m in enumerate(models)]
    handles += [
        Line2D([], [], marker="o", color="0.3", linestyle="", label="learns in context"),
        Line2D([], [], marker="o", color="0.3", markerfacecolor="white", linestyle="", label="does not"),
    ]
    ax.legend(handles=handles, fontsize=8, loc="best")
    ax.set_title("Does the similarity grow with ICL's own effect? (paper 001's question)", fontsize=10)
    style_axes(ax, grid_axis="both")
    return fig


def _reach(value: float, low: float, high: float):
    """Error bar lengths below and above ``value``; none without an interval (a point outside its
    interval, where a studentized or clipped one leaves it, draws the bar from the point)."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return None
    return [[max(value - low, 0.0)], [max(high - value, 0.0)]]
