"""Beyond the papers: metrics against the learning rate, the number of demonstrations, the model
size, and per model."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from icl_gd.common.names import (
    method_label,
    order_tasks,
    task_label,
    variant_label,
)
from icl_gd.metrics import catalog
from icl_gd.report.figures.base import (
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
from icl_gd.report.selection import run_level

# ------------------------------------------------------------------ learning-rate sweeps


def lr_sweep_figure(
    summary: pd.DataFrame,
    model: str,
    sweep: pd.DataFrame,
    variant: str = "trained",
    metrics: Sequence[str] | None = None,
    *,
    ci_level: float = 0.95,
) -> Figure:
    """Layer-mean metrics (default: the catalog's ``lr_sweep_figure``) against the learning rate:
    :func:`_sweep_figure` with ``x="lr"``."""
    metrics = catalog.shown_in("lr_sweep_figure") if metrics is None else metrics
    return _sweep_figure(summary, model, sweep, "lr", variant, metrics, ci_level=ci_level)


def k_sweep_figure(
    summary: pd.DataFrame,
    model: str,
    sweep: pd.DataFrame,
    variant: str = "trained",
    metrics: Sequence[str] | None = None,
    *,
    ci_level: float = 0.95,
) -> Figure:
    """Accuracies and layer-mean similarities (default: the catalog's ``k_sweep_figure``) against the
    number of demonstrations k (log2 x): :func:`_sweep_figure` with ``x="k"``; ``sweep`` rows are
    (group, method, task, k), the ICL accuracy of each point is that of the method's own ICL
    setting (the same k demonstrations)."""
    metrics = catalog.shown_in("k_sweep_figure") if metrics is None else metrics
    return _sweep_figure(summary, model, sweep, "k", variant, metrics, ci_level=ci_level)


def sizes_figure(
    summary: pd.DataFrame,
    sizes: pd.DataFrame,
    variant: str = "trained",
    methods: Sequence[str] = ("gd",),
    metrics: Sequence[str] | None = None,
    *,
    ci_level: float = 0.95,
) -> Figure:
    """Accuracies and layer-mean similarities (default: the catalog's ``sizes_figure``) against each
    model's parameter count (log x; ``sizes``: model, n_parameters), one line per task (and method,
    as line style), one panel per metric: :func:`_sweep_figure` over (model, method) pairs, each
    placed at its model's size."""
    metrics = catalog.shown_in("sizes_figure") if metrics is None else metrics
    counts = dict(zip(sizes["model"], sizes["n_parameters"]))
    df = summary[summary["model"].isin(list(counts))].copy()
    df["method"] = df["model"] + "/" + df["method"]
    df["model"] = "models"
    tasks = order_tasks(df["task"].dropna().unique())
    sweep = pd.DataFrame(
        [
            dict(group=method_label(m), method=f"{model}/{m}", task=t, n_parameters=n)
            for m in methods
            for model, n in counts.items()
            for t in tasks
        ]
    )
    return _sweep_figure(
        df,
        "models",
        sweep,
        "n_parameters",
        variant,
        metrics,
        ci_level=ci_level,
        subject=f"{variant_label(variant)} models",
    )


_SWEEP_AXES = {
    "lr": ("Learning rate", "learning-rate sweep"),
    "k": ("Demonstrations (k)", "sweep over the demonstrations"),
    "n_parameters": ("Parameters", "metrics against model size"),
}


def _sweep_figure(
    summary: pd.DataFrame,
    model: str,
    sweep: pd.DataFrame,
    x: str,
    variant: str,
    metrics: Sequence[str],
    *,
    ci_level: float = 0.95,
    subject: str | None = None,
) -> Figure:
    """Layer-mean metrics against ``x`` (the learning rate ``lr``, the demonstrations ``k`` or
    ``n_parameters``; log axis), one panel per metric side by side; the title starts with
    ``subject`` (default: the model and variant).
    ``sweep`` has one row per (group, method, task, x): the methods of a group differ only in
    x. One line per (group, task) through its methods sorted by x,
    colour = task, line style = group; each an ``ErrorbarContainer`` labelled "{task}" or, with
    several groups, "{task}, {group}". Values are means over seeds, error bars by
    :func:`error_bars`. A SimAOU panel shows its random baseline per task (mean over the sweep's
    runs of the task: it does not depend on finetuning) as a dotted line in the task's colour
    across the task's rates."""
    df = run_level(summary, model)
    df = df[df["variant"] == variant]
    missing = {"group", "method", "task", x} - set(sweep.columns)
    if missing:
        raise ValueError(f"sweep table lacks columns {sorted(missing)}")
    df = df[df["method"].isin(sweep["method"].unique())]
    stats = summary_stats(df, ["task", "method", "metric"])
    tasks = order_tasks(sweep["task"].unique())
    groups = list(dict.fromkeys(sweep["group"]))
    task_colors = {t: f"C{i % 10}" for i, t in enumerate(tasks)}
    styles = ["-", "--", "-.", (0, (5, 1, 1, 1, 1, 1))]  # dotted is the random baseline
    markers = ["o", "s", "^", "D"]

    n = max(len(metrics), 1)
    fig, axes = plt.subplots(1, n, squeeze=False, figsize=(4.0 * n + 0.5, 4.2), layout="constrained")
    axes = axes[0]
    used_std = used_ci = False
    random_lines: dict[str, Line2D] = {}
    for ax, metric in zip(axes, metrics):
        scale = catalog.display_scale(metric)
        drawn = False
        for g, group in enumerate(groups):
            for task in tasks:
                rows = sweep[(sweep["group"] == group) & (sweep["task"] == task)].sort_values(x)
                if rows.empty:
                    continue
                s = series_from(stats, [(task, m, metric) for m in rows["method"]], scale)
                if not np.isfinite(s["mean"]).any():
                    continue
                label = task_label(task) if len(groups) == 1 else f"{task_label(task)}, {group}"
                cont = ax.errorbar(
                    rows[x].to_numpy(float),
                    s["mean"],
                    yerr=np.vstack([s["lower"], s["upper"]]),
                    color=task_colors[task],
                    ls=styles[g % len(styles)],
                    marker=markers[g % len(markers)],
                    ms=4,
                    lw=1.3,
                    elinewidth=0.8,
                    capsize=2.5,
                    label=label,
                )
                dash_ci(cont, s["from_ci"])
                shown = np.isfinite(s["lower"])
                used_ci |= bool((shown & s["from_ci"]).any())
                used_std |= bool((shown & ~s["from_ci"]).any())
                drawn = True
        baseline = catalog.random_baseline(metric)
        if drawn and baseline is not None:
            # per task, over the task's rates: the baseline differs between tasks, not between rates
            for task in tasks:
                rand = df.loc[(df["metric"] == baseline) & (df["task"] == task), "mean"]
                rates = sweep.loc[sweep["task"] == task, x]
                if rand.notna().any() and not rates.empty:
                    (line,) = ax.plot(
                        [rates.min(), rates.max()],
                        [rand.mean()] * 2,
                        color=task_colors[task],
                        ls=":",
                        lw=1.3,
                        label=catalog.figure_label(baseline),
                    )
                    random_lines.setdefault(line.get_label(), line)
        if not drawn:
            no_data(ax)
        if x == "k":
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(sweep["k"].unique()), [str(int(k)) for k in sorted(sweep["k"].unique())])
        else:
            ax.set_xscale("log")
        ax.set_xlabel(_SWEEP_AXES[x][0])
        ax.set_ylabel(catalog.axis_label(metric) + (" (mean over layers)" if scale == 1.0 else ""))
        style_axes(ax, grid_axis="both")
    handles = [Line2D([], [], color=task_colors[t], lw=2, label=task_label(t)) for t in tasks]
    if len(groups) > 1:
        handles += [
            Line2D([], [], color="0.2", ls=styles[g % len(styles)], marker=markers[g % len(markers)], label=group)
            for g, group in enumerate(groups)
        ]
    handles += [Line2D([], [], color="0.3", ls=":", lw=1.3, label=f"{label}, per task") for label in random_lines]
    fig.legend(handles=handles, loc="outside right upper", frameon=False)
    fig.suptitle(
        f"{subject or f'{model} ({variant_label(variant, in_text=True)})'}: {_SWEEP_AXES[x][1]}, mean over seeds\n"
        + error_note(used_std, used_ci, over="seeds", ci_level=ci_level),
        fontsize=11,
    )
    return fig


# ------------------------------------------------------------------------------- models


def models_figure(
    runs: pd.DataFrame,
    models: Sequence[str],
    variant: str = "trained",
    methods: Sequence[str] = ("gd", "lcgd"),
    metrics: Sequence[str] | None = None,
    *,
    tasks: Sequence[str] | None = None,
    ci_level: float = 0.95,
    kinds: dict[str, str] | None = None,
) -> Figure:
    """Layer-mean metrics (default: the catalog's ``models_figure``) per model (x, in the given order),
    one bar per method (a ``BarContainer`` labelled with the method), one panel per metric
    (stacked); each bar is the mean over the model's runs (tasks x seeds), error bars by
    :func:`error_bars` over those runs.
    A SimAOU panel marks its random baseline per model (mean over the same runs) with a dashed
    grey segment across the model's bars."""
    df = run_level(
        runs, required=("model", "variant", "task", "seed", "method", "metric", "layer", "value"), what="runs"
    )
    models = list(models)
    metrics = catalog.shown_in("models_figure") if metrics is None else metrics
    wanted = set(metrics) | ({catalog.random_baseline(m) for m in metrics} - {None})
    df = df[
        df["model"].isin(models)
        & (df["variant"] == variant)
        & df["method"].isin(list(methods))
        & df["metric"].isin(wanted)
    ]
    if tasks is not None:
        df = df[df["task"].isin(list(tasks))]
    stats = runs_stats(df, ["model", "method", "metric"])
    lookup = {k: (r["mean"], r["lower"], r["upper"], bool(r["from_ci"])) for k, r in stats.iterrows()}
    colors = method_colors(methods, kinds)
    n_tasks = df["task"].nunique()

    n = max(len(metrics), 1)
    width = max(6.0, (0.45 * len(methods) + 0.5) * len(models) + 2.5)
    fig, axes = plt.subplots(n, 1, sharex=True, squeeze=False, figsize=(width, 2.4 * n + 1.4), layout="constrained")
    axes = axes[:, 0]
    used_std = used_ci = False
    handles: dict[str, object] = {}
    for ax, metric in zip(axes, metrics):
        scale = catalog.display_scale(metric)
        ax.axhline(0.0, color="0.6", lw=0.8)
        series = [
            {
                "label": method_label(m),
                "color": colors[m],
                **series_from(lookup, [(mo, m, metric) for mo in models], scale),
            }
            for m in methods
        ]
        s, c = grouped_bars(ax, models, series)
        used_std, used_ci = used_std | s, used_ci | c
        if not any(np.isfinite(x["mean"]).any() for x in series):
            no_data(ax)
        baseline = catalog.random_baseline(metric)
        if baseline is not None:
            for i, mo in enumerate(models):
                rand = df.loc[(df["model"] == mo) & (df["metric"] == baseline), "value"]
                if rand.notna().any():
                    (line,) = ax.plot(
                        [i - 0.45, i + 0.45],
                        [rand.mean()] * 2,
                        color="0.45",
                        ls="--",
                        lw=1.2,
                        label=catalog.figure_label(baseline),
                    )
                    handles.setdefault(line.get_label(), line)
        ax.set_ylabel(catalog.axis_label(metric) + ("\n(mean over layers)" if scale == 1.0 else ""))
        style_axes(ax)
    axes[-1].set_xlabel("Model")
    bar_handles = [Patch(facecolor=colors[m], label=method_label(m)) for m in methods]
    legend = bar_handles + list(handles.values())
    legend_above(axes[0], legend, [h.get_label() for h in legend], ncol=min(len(legend), 4))
    fig.suptitle(
        f"Models compared ({variant_label(variant, in_text=True)}): mean over runs ({plural(n_tasks, 'task')} × seeds)\n"
        + error_note(used_std, used_ci, over="runs", ci_level=ci_level),
        fontsize=11,
    )
    return fig
