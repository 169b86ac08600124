"""Beyond the papers: the tests of Shen, Mishra and Khashabi (2023) on the same runs. How far each
method's output distribution lies from ICL's, beside how far ZSL's does; how many predictions the
order of the demonstrations changes, for ICL and each method."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from icl_gd.common.names import method_label, order_tasks, percent, task_label, variant_label
from icl_gd.metrics import catalog
from icl_gd.report.figures.base import (
    error_note,
    grouped_bars,
    method_colors,
    no_data,
    series_from,
    style_axes,
    summary_stats,
)
from icl_gd.report.selection import model_rows, run_level

_ZSL_COLOR = "0.6"


def output_distributions_figure(
    summary: pd.DataFrame,
    model: str,
    variant: str = "trained",
    methods: Sequence[str] = ("gd", "lcgd"),
    *,
    tasks: Sequence[str] | None = None,
    ci_level: float = 0.95,
    kinds: dict[str, str] | None = None,
) -> Figure:
    """Grouped bars per task: KL(ICL || ZSL) (grey, from the first method's runs: it depends on
    ZSL and ICL alone) and KL(ICL || FT) per method, layer-free, mean over seeds, in nats. A bar
    below the grey one is a method whose finetuning moved the label distribution toward ICL's. The
    two are the catalog's ``output_distributions_figure``, in that order."""
    zsl, ft = catalog.shown_in("output_distributions_figure")
    df = run_level(summary, model)
    df = df[(df["variant"] == variant) & df["method"].isin(list(methods))]
    if tasks is None:
        tasks = order_tasks(df["task"].dropna().unique())
    tasks, methods = list(tasks), list(methods)
    stats = summary_stats(df, ["task", "method", "metric"])
    colors = method_colors(methods, kinds)
    series = []
    if methods:
        series.append(
            {"label": "ZSL", "color": _ZSL_COLOR, **series_from(stats, [(t, methods[0], zsl) for t in tasks])}
        )
    series += [
        {"label": method_label(m), "color": colors[m], **series_from(stats, [(t, m, ft) for t in tasks])}
        for m in methods
    ]

    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(tasks) + 2.0), 3.9), layout="constrained")
    used_std, used_ci = grouped_bars(ax, [task_label(t) for t in tasks], series)
    ax.set_ylim(bottom=0.0)
    ax.set_ylabel("KL(ICL$\\,\\|\\,\\cdot\\,$) over the label words (nats)")
    ax.set_xlabel("Task")
    style_axes(ax)
    if (
        not df["metric"].isin([ft, zsl]).any()
        or not np.isfinite(np.concatenate([s["mean"] for s in series] or [np.array([np.nan])])).any()
    ):
        no_data(ax)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=max(len(series), 1), frameon=False)
    fig.suptitle(
        f"{model} ({variant_label(variant, in_text=True)}): how far each setting's label distribution lies from ICL's\n"
        "(lower: closer to ICL; mean over seeds); " + error_note(used_std, used_ci, over="seeds", ci_level=ci_level),
        fontsize=10,
    )
    return fig


def orders_figure(
    orders: pd.DataFrame,
    model: str,
    variant: str = "trained",
    methods: Sequence[str] = ("gd",),
    *,
    tasks: Sequence[str] | None = None,
    ci_level: float = 0.95,
    kinds: dict[str, str] | None = None,
) -> Figure:
    """Grouped bars per task: the share of examples (%) whose prediction changes across the orders
    of the demonstrations, for ICL (grey, the first method's runs) and each finetuned method, mean
    over seeds, with the intervals of ``orders.order_table`` (solid: they carry the seeds' spread
    as well as the examples'). The two are the catalog's ``orders_figure``, ICL's then FT's."""
    icl, ft = catalog.shown_in("orders_figure")
    df = model_rows(orders, ("model", "variant", "task", "method", "metric", "mean"), "orders", model)
    df = df[(df["variant"] == variant) & df["method"].isin(list(methods))]
    if tasks is None:
        tasks = order_tasks(df["task"].dropna().unique())
    tasks, methods = list(tasks), list(methods)
    colors = method_colors(methods, kinds)

    def series(label, color, method, metric):
        rows = {t: df[(df["task"] == t) & (df["method"] == method) & (df["metric"] == metric)] for t in tasks}
        mean = np.array(
            [catalog.display_scale(metric) * r["mean"].iloc[0] if len(r) else np.nan for r in rows.values()]
        )
        low = np.array(
            [catalog.display_scale(metric) * r["ci_low"].iloc[0] if len(r) else np.nan for r in rows.values()]
        )
        high = np.array(
            [catalog.display_scale(metric) * r["ci_high"].iloc[0] if len(r) else np.nan for r in rows.values()]
        )
        return {
            "label": label,
            "color": color,
            "mean": mean,
            "lower": np.clip(mean - low, 0.0, None),
            "upper": np.clip(high - mean, 0.0, None),
            "from_ci": np.zeros(len(tasks), bool),
        }

    drawn = ([series("ICL", _ZSL_COLOR, methods[0], icl)] if methods else []) + [
        series(f"FT ({method_label(m)})", colors[m], m, ft) for m in methods
    ]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(tasks) + 2.0), 3.9), layout="constrained")
    grouped_bars(ax, [task_label(t) for t in tasks], drawn)
    ax.set_ylim(bottom=0.0)
    ax.set_ylabel("Predictions changed across orders (%)")
    ax.set_xlabel("Task")
    style_axes(ax)
    if not np.isfinite(np.concatenate([s["mean"] for s in drawn] or [np.array([np.nan])])).any():
        no_data(ax)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=max(len(drawn), 1), frameon=False)
    n_orders = sorted({int(n) for n in df.get("n_orders", pd.Series(dtype=float)).dropna()})
    which = f"{' or '.join(map(str, n_orders))} orders" if n_orders else "further orders"
    fig.suptitle(
        f"{model} ({variant_label(variant, in_text=True)}): how many predictions the order of the demonstrations "
        f"changes ({which})\nmean over seeds; error bars: {percent(ci_level)} intervals, seeds and examples "
        "crossed",
        fontsize=10,
    )
    return fig
