"""The papers' own figures: per-layer similarity (001 Fig. 3), accuracy per task, alpha (001
Fig. 2), the gradient-norm heatmaps (001 Fig. 4 / 003 Fig. 3) and the prediction-change partition
(003 Fig. 1)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from icl_gd.common.names import (
    method_label,
    order_tasks,
    task_label,
    variant_label,
)
from icl_gd.metrics import catalog
from icl_gd.report.figures.base import (
    CHANGE_COLORS,
    CHANGE_PARTS,
    CHANGE_SUBSETS,
    INCORRECT_HATCH,
    NOT_AVAILABLE,
    dash_ci,
    error_note,
    grouped_bars,
    legend_above,
    method_colors,
    no_data,
    plural,
    runs_stats,
    series_from,
    style_axes,
    summary_stats,
)
from icl_gd.report.selection import model_rows, run_level

# ------------------------------------------------------------------------------- per layer


def per_layer_figure(
    runs: pd.DataFrame,
    model: str,
    variant: str = "trained",
    methods: Sequence[str] = ("gd", "lcgd"),
    metrics: Sequence[str] | None = None,
    *,
    tasks: Sequence[str] | None = None,
    ci_level: float = 0.95,
    kinds: dict[str, str] | None = None,
) -> Figure:
    """Paper 001 Fig. 3: one panel per metric (stacked, shared layer axis; default: the catalog's
    ``per_layer_figure``), x = layer, y = metric; one line per method at the mean over all runs (tasks x seeds) of that layer's
    value, error bars = sample std over the same runs (a single run: its bootstrap interval).
    Each line is an ``ErrorbarContainer`` in ``ax.containers`` with the method's label. A SimAOU
    panel also shows its random baseline (:func:`catalog.random_baseline`, mean over the same runs)
    as a dashed grey line. The legend sits above the top panel.
    """
    metrics = catalog.shown_in("per_layer_figure") if metrics is None else metrics
    df = model_rows(
        runs,
        ("model", "variant", "task", "seed", "method", "metric", "layer", "value"),
        "runs",
        model,
    )
    wanted = set(metrics) | ({catalog.random_baseline(m) for m in metrics} - {None})
    df = df[
        (df["variant"] == variant) & df["method"].isin(list(methods)) & df["metric"].isin(wanted) & df["layer"].notna()
    ]
    if tasks is not None:
        df = df[df["task"].isin(list(tasks))]
    df = df.assign(layer=df["layer"].astype("int64"))
    stats = runs_stats(df, ["metric", "method", "layer"])
    plotted = df[df["metric"].isin(list(metrics))]
    n_runs = plotted.drop_duplicates(["method", "task", "seed"]).groupby("method").size()
    n_tasks = plotted["task"].nunique()
    layers = sorted(plotted["layer"].unique())

    n_panels = max(len(metrics), 1)
    width = float(np.clip(2.5 + 0.28 * max(len(layers), 1), 6.0, 12.0))
    fig, axes = plt.subplots(
        n_panels,
        1,
        sharex=True,
        squeeze=False,
        figsize=(width, 2.4 * n_panels + 1.0),
        layout="constrained",
    )
    axes = axes[:, 0]
    spread = 0.2 if len(methods) > 1 else 0.0  # dodge the methods so error bars don't overlap
    offsets = np.linspace(-spread / 2, spread / 2, len(methods)) if methods else []
    colors = method_colors(methods, kinds)

    handles: dict[str, object] = {}
    used_std = used_ci = False
    for ax, metric in zip(axes, metrics):
        ax.axhline(0.0, color="0.75", lw=0.8, zorder=0)
        drawn = False
        for off, method in zip(offsets, methods):
            try:
                s = stats.loc[(metric, method)]
            except KeyError:
                continue
            label = f"{method_label(method)} ({int(n_runs.get(method, 0))} runs)"
            x = s.index.to_numpy(dtype=float) + off
            cont = ax.errorbar(
                x,
                s["mean"].to_numpy(),
                yerr=np.vstack([s["lower"], s["upper"]]),
                color=colors[method],
                marker="o",
                ms=3.5,
                lw=1.4,
                elinewidth=0.9,
                capsize=2.5,
                label=label,
            )
            dash_ci(cont, s["from_ci"].to_numpy())
            shown = np.isfinite(s["lower"].to_numpy())
            used_ci |= bool((shown & s["from_ci"].to_numpy()).any())
            used_std |= bool((shown & ~s["from_ci"].to_numpy()).any())
            handles.setdefault(label, cont)
            drawn = True
        baseline = catalog.random_baseline(metric)
        if drawn and baseline is not None:
            rand = df[df["metric"] == baseline].groupby("layer")["value"].mean()
            if not rand.empty:
                (line,) = ax.plot(
                    rand.index.to_numpy(dtype=float),
                    rand.to_numpy(),
                    color="0.45",
                    ls="--",
                    lw=1.1,
                    label=catalog.figure_label(baseline),
                )
                handles.setdefault(line.get_label(), line)
        if not drawn:
            no_data(ax)
        ax.set_ylabel(catalog.figure_label(metric))
        style_axes(ax)
    axes[-1].set_xlabel("Layer")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    if layers:
        axes[-1].set_xlim(layers[0] - 0.5, layers[-1] + 0.5)
    if handles:
        legend_above(axes[0], list(handles.values()), list(handles.keys()), ncol=min(len(handles), 3))
    fig.suptitle(
        f"{model} ({variant_label(variant, in_text=True)}): per-layer similarity, mean over runs "
        f"({plural(n_tasks, 'task')} × seeds)\n" + error_note(used_std, used_ci, over="runs", ci_level=ci_level),
        fontsize=11,
    )
    return fig


# -------------------------------------------------------------------------------- accuracy


def accuracy_figure(
    summary: pd.DataFrame,
    model: str,
    variant: str = "trained",
    method: str = "gd",
    *,
    metrics: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    ci_level: float = 0.95,
) -> Figure:
    """Grouped bars per task (x, paper order) for ZSL / FT / ICL accuracy in percent (default: the
    catalog's ``accuracy_figure``), mean over seeds; error bars by :func:`error_bars`. One
    ``BarContainer`` per setting in ``ax.containers``; a missing value leaves a gap marked "n/a"."""
    metrics = catalog.shown_in("accuracy_figure") if metrics is None else metrics
    df = run_level(summary, model)
    df = df[(df["variant"] == variant) & (df["method"] == method)]
    if tasks is None:
        tasks = order_tasks(df["task"].dropna().unique())
    tasks = list(tasks)
    stats = summary_stats(df, ["task", "metric"])

    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(tasks) + 2.0), 3.9), layout="constrained")
    series = [
        {
            "label": catalog.figure_label(m),
            "color": catalog.color(m) or f"C{i + 2}",
            **series_from(stats, [(t, m) for t in tasks], scale=catalog.display_scale(m)),
        }
        for i, m in enumerate(metrics)
    ]
    used_std, used_ci = grouped_bars(ax, [task_label(t) for t in tasks], series)
    top = max(
        [100.0]
        + [float(np.nanmax(s["mean"] + np.nan_to_num(s["upper"]))) for s in series if np.isfinite(s["mean"]).any()]
    )
    ax.set_ylim(0.0, top * 1.03)
    ax.set_ylabel("Accuracy (%)")
    ax.set_xlabel("Task")
    style_axes(ax)
    if not df["metric"].isin(list(metrics)).any():
        no_data(ax)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=max(len(metrics), 1), frameon=False)
    fig.suptitle(
        f"{model} ({variant_label(variant, in_text=True)}, {method_label(method)}): accuracy per task, mean over seeds\n"
        + error_note(used_std, used_ci, over="seeds", ci_level=ci_level),
        fontsize=11,
    )
    return fig


# ----------------------------------------------------------------------------------- alpha


def alpha_figure(
    summary: pd.DataFrame,
    model: str,
    variant: str = "trained",
    methods: Sequence[str] = ("lcgd",),
    *,
    baseline: str = "gd",
    tasks: Sequence[str] | None = None,
    ci_level: float = 0.95,
    kinds: dict[str, str] | None = None,
) -> Figure:
    """Paper 001 Fig. 2: alpha = cos(m_method − m_ZSL, m_baseline − m_ZSL) averaged over layers,
    per task (x, paper order), one bar per method (a ``BarContainer`` labelled with the method),
    mean over seeds; error bars by :func:`error_bars`. The paper shows one seed per task. Alpha is
    the catalog's ``alpha_figure``."""
    (alpha,) = catalog.shown_in("alpha_figure")
    df = run_level(summary, model)
    df = df[(df["variant"] == variant) & (df["metric"] == alpha) & df["method"].isin(list(methods))]
    if tasks is None:
        tasks = order_tasks(df["task"].dropna().unique())
    tasks = list(tasks)
    stats = summary_stats(df, ["task", "method"])
    colors = method_colors(methods, kinds)

    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(tasks) + 2.5), 3.8), layout="constrained")
    ax.axhline(0.0, color="0.6", lw=0.8)
    series = [
        {"label": method_label(m), "color": colors[m], **series_from(stats, [(t, m) for t in tasks])} for m in methods
    ]
    used_std, used_ci = grouped_bars(ax, [task_label(t) for t in tasks], series)
    if df.empty:
        no_data(ax)
    ax.set_ylabel(catalog.axis_label(alpha) + " (mean over layers)")
    ax.set_xlabel("Task")
    style_axes(ax)
    if len(methods) > 1:
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(methods), frameon=False)
    shown = ", ".join(method_label(m) for m in methods) or "no method"
    base = method_label(baseline)
    fig.suptitle(
        f"{model} ({variant_label(variant, in_text=True)}): "
        rf"$\alpha$ = cos($m_\mathrm{{{shown}}} - m_\mathrm{{ZSL}}$, $m_\mathrm{{{base}}} - m_\mathrm{{ZSL}}$)"
        " per task, mean over seeds\n" + error_note(used_std, used_ci, over="seeds", ci_level=ci_level),
        fontsize=11,
    )
    return fig


# ------------------------------------------------------------------------- gradient norms


def grad_norm_figure(
    norms: Mapping[str, np.ndarray | None],
    *,
    log_scale: Collection[str] = ("lcgd",),
    title: str = "",
) -> Figure:
    """Paper 001 Fig. 4 / paper 003 Fig. 3: one heatmap per method (``norms``: method -> array
    (steps, layers) of the l2 norm of each layer's K/V gradient at each training step), side by
    side in the given order, in rows of two. x = training demonstration index (1-based), y = layer index
    ascending from the input (``origin="lower"``); each panel has its own colour bar, on a log
    scale for the methods in ``log_scale``. Undefined entries (NaN, or not positive on a log
    scale) are grey and noted in the panel title; a method without a log says "no data"."""
    methods = list(norms)
    n = max(len(methods), 1)
    # the papers' two panels side by side; more methods wrap into rows of two
    ncols, nrows = min(n, 2), -(-n // 2)
    fig, grid = plt.subplots(
        nrows, ncols, squeeze=False, figsize=(4.6 * ncols + 0.6, 3.5 * nrows + 0.6), layout="constrained"
    )
    axes = grid.ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax, method in zip(axes, methods):
        values = norms[method]
        log = method in log_scale
        ax.set_title(f"{method_label(method)}" + (" (log colour scale)" if log else ""), fontsize=10)
        ax.set_xlabel("Training demonstration index")
        ax.set_ylabel("Layer (from input to output)")
        if values is None or np.size(values) == 0:
            no_data(ax)
            continue
        values = np.asarray(values, dtype=float)
        steps, layers = values.shape
        bad = ~np.isfinite(values) | ((values <= 0) if log else False)
        if bad.all():
            no_data(ax, "no defined gradient norm")
            continue
        shown = np.ma.masked_array(values.T, mask=bad.T)  # rows = layers, columns = steps
        good = values[~bad]
        norm = LogNorm(good.min(), good.max()) if log else Normalize(good.min(), good.max())
        cmap = plt.get_cmap("viridis").with_extremes(bad="0.8")
        image = ax.imshow(
            shown,
            origin="lower",
            aspect="auto",
            interpolation="nearest",
            cmap=cmap,
            norm=norm,
            extent=(0.5, steps + 0.5, -0.5, layers - 0.5),
        )
        if bad.any():
            ax.set_title(ax.get_title() + f"\ngrey: undefined ({int(bad.sum())} cells)", fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        label = r"$\ell_2$ norm of the K/V gradient" + (" (log scale)" if log else "")
        fig.colorbar(image, ax=ax, label=label, fraction=0.08, pad=0.03)
    if not methods:
        no_data(axes[0])
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


# --------------------------------------------------------------------- prediction changes


def prediction_changes_figure(
    summary: pd.DataFrame,
    model: str,
    variant: str = "trained",
    methods: Sequence[str] = ("gd",),
    *,
    tasks: Sequence[str] | None = None,
) -> Figure:
    """Paper 003 Fig. 1: per task (x), two stacked bars of the numbers of examples whose ZSL
    prediction changed, to the right label (left bar) or to a wrong label (right bar, hatched),
    each split into ICL only, both (to the same label) and FT only; mean over seeds of the
    ``changes_{part}_{subset}`` metrics. One panel per finetuning method (FT = that method);
    six ``BarContainer`` per panel, labelled "{part} ({subset})" with part in
    :data:`CHANGE_PARTS`. A bar with a missing part is left out and marked "n/a"."""
    df = run_level(summary, model)
    df = df[(df["variant"] == variant) & df["method"].isin(list(methods)) & df["metric"].str.startswith("changes_")]
    if tasks is None:
        tasks = order_tasks(df["task"].dropna().unique())
    tasks = list(tasks)
    means = {(t, me, mt): mu for t, me, mt, mu in zip(df["task"], df["method"], df["metric"], df["mean"])}
    seeds = df["n"] if "n" in df.columns else pd.Series(dtype=float)

    n = max(len(methods), 1)
    fig, axes = plt.subplots(
        n,
        1,
        sharex=True,
        squeeze=False,
        figsize=(max(5.5, 1.0 * len(tasks) + 2.5), 2.6 * n + 1.2),
        layout="constrained",
    )
    axes = axes[:, 0]
    x = np.arange(len(tasks), dtype=float)
    width = 0.38
    for ax, method in zip(axes, methods):
        drawn = False
        top = 0.0
        for offset, subset in zip((-width / 2 - 0.01, width / 2 + 0.01), CHANGE_SUBSETS):
            parts = np.array(
                [[means.get((t, method, f"changes_{p}_{subset}"), np.nan) for t in tasks] for p in CHANGE_PARTS],
                dtype=float,
            ).reshape(len(CHANGE_PARTS), len(tasks))
            complete = np.isfinite(parts).all(axis=0)
            parts[:, ~complete] = np.nan
            bottom = np.zeros(len(tasks))
            for part, heights in zip(CHANGE_PARTS, parts):
                ax.bar(
                    x + offset,
                    heights,
                    width,
                    bottom=bottom,
                    color=CHANGE_COLORS[part],
                    edgecolor="white",
                    lw=0.5,
                    label=f"{CHANGE_PARTS[part]} ({subset})",
                    hatch=INCORRECT_HATCH if subset == "incorrect" else None,
                )
                bottom = bottom + np.nan_to_num(heights)
            for p in x[~complete] + offset:
                ax.text(
                    p,
                    0.02,
                    NOT_AVAILABLE,
                    transform=ax.get_xaxis_transform(),
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color="0.35",
                )
            # the total on top, so that a bar of no change reads "0" rather than nothing
            for p, total in zip(x[complete] + offset, bottom[complete]):
                ax.text(p, total, f"{total:.4g}", ha="center", va="bottom", fontsize=7, color="0.25")
            drawn |= bool(complete.any())
            top = max(top, float(bottom[complete].max()) if complete.any() else 0.0)
        if not drawn:
            no_data(ax)
        # zero-height segments on top of a stack pin autoscaling to its height: set the limit
        ax.set_ylim(0.0, max(top, 1.0) * 1.12)
        ax.set_ylabel(f"FT = {method_label(method)}\nchanged predictions\n(examples)")
        style_axes(ax)
    rotate = len(tasks) > 8
    axes[-1].set_xticks(
        x, [task_label(t) for t in tasks], rotation=30 if rotate else 0, ha="right" if rotate else "center"
    )
    axes[-1].set_xlim(-0.6, len(tasks) - 0.4)
    axes[-1].set_xlabel("Task")
    handles = [Patch(facecolor=CHANGE_COLORS[p], label=label) for p, label in CHANGE_PARTS.items()]
    handles += [
        Patch(facecolor="white", edgecolor="0.3", label="left: to the right label"),
        Patch(facecolor="white", edgecolor="0.3", hatch=INCORRECT_HATCH, label="right: to a wrong label"),
    ]
    legend_above(axes[0], handles, [h.get_label() for h in handles], ncol=3)
    n_seeds = sorted({int(s) for s in seeds.dropna()})
    if len(n_seeds) > 1:
        seed_text = f"{n_seeds[0]}–{n_seeds[-1]} seeds"
    else:
        seed_text = plural(n_seeds[0] if n_seeds else 0, "seed")
    fig.suptitle(
        f"{model} ({variant_label(variant, in_text=True)}): ZSL predictions changed by ICL and FT\n"
        f"numbers of evaluation examples (total on top), mean over {seed_text}, no error bars",
        fontsize=11,
    )
    return fig
