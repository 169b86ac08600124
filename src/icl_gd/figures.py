"""Paper-style figures from the runs and summary tables and the training logs.

* :func:`per_layer_figure` -- paper 001 Fig. 3: per-layer similarity, one panel per metric, one
  line per training method, mean over all runs (tasks x seeds) at that layer; the random
  SimAOU baseline as a dashed reference line on a SimAOU panel.
* :func:`accuracy_figure` -- grouped bars per task for ZSL / FT / ICL accuracy (%).
* :func:`alpha_figure` -- paper 001 Fig. 2: alpha (layer mean) per task, one bar per method.
* :func:`grad_norm_figure` -- paper 001 Fig. 4 / paper 003 Fig. 3: layer x training-step
  heatmaps of the K/V gradient norms, one panel per method, linear or log colour scale.
* :func:`prediction_changes_figure` -- paper 003 Fig. 1: per task, the ZSL predictions changed
  to a right / wrong label by ICL only, FT only or both.
* :func:`lr_sweep_figure` -- layer-mean metrics against the learning rate, one line per task.
* :func:`k_sweep_figure` -- accuracies and similarities against the number of demonstrations.
* :func:`sizes_figure` -- the same against each model's parameter count.
* :func:`models_figure` -- layer-mean metrics per model, one bar per method.
* :func:`reproduction_figure` -- the papers' published values against this run's, one panel per
  metric, with the identity line (``published.reproduction``).
* :func:`claims_figure` -- the papers' claims as a forest plot: per claim and task the paired
  difference and its interval, the claimed side shaded, the verdict coloured.
* :func:`write_figure` -- saves ``stem.png`` (150 dpi) and ``stem.pdf`` atomically, closes it.

Error bars follow one rule everywhere (:func:`error_bars`): the spread of what was averaged
(sample std over seeds, or over runs = tasks x seeds) where more than one value went into the
mean; where only one did, its bootstrap interval over the evaluation examples (``ci_low``,
``ci_high``), drawn dashed, so that a single seed still shows its uncertainty. The title of each
figure says which it drew. A bar or panel without data says so ("n/a", "no data"), never a
silent gap or a zero.

Inputs are the tidy runs table (``results/metrics/runs.parquet``: model, variant, task, seed,
method, metric, layer, value, ci_low, ci_high), the summary table
(``results/metrics/summary.parquet``: model, variant, task, method, metric, layer, mean, std, n,
ci_low, ci_high) and gradient-norm arrays. This module imports nothing of the package but the
display labels and the atomic writer, and reads no config; it renders with the non-interactive Agg
backend.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import LogNorm, Normalize  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from .atomic import atomic_path  # noqa: E402
from .labels import (  # noqa: E402
    axis_label,
    figure_metric_label,
    method_label,
    order_tasks,
    percent,
    task_label,
    variant_label,
)

__all__ = [
    "per_layer_figure",
    "accuracy_figure",
    "alpha_figure",
    "grad_norm_figure",
    "prediction_changes_figure",
    "lr_sweep_figure",
    "k_sweep_figure",
    "sizes_figure",
    "models_figure",
    "reproduction_figure",
    "claims_figure",
    "error_bars",
    "write_figure",
    "RANDOM_BASELINES",
    "CHANGE_PARTS",
]

# Paper 001 Fig. 3 colours: layer-causal GD blue, vanilla GD orange.
_METHOD_COLORS = {"gd": "tab:orange", "lcgd": "tab:blue"}
_SETTING_COLORS = {"acc_zsl": "0.65", "acc_ft": "tab:orange", "acc_icl": "tab:blue"}

# The random-update baseline each SimAOU variant is read against. The reference's uniform r is
# what the papers print next to SimAOU_norm. A centred Gaussian r is isotropic, so its cosine
# with any fixed update has the same distribution whether or not h was normalised: it is the
# null of the unnormalised SimAOU as well.
RANDOM_BASELINES = {"simaou_norm": "simaou_random", "simaou": "simaou_random_gaussian"}

# Paper 003 Fig. 1: the ZSL predictions that ICL and FT change, split by who changed them.
# Colours follow the settings (ICL blue, FT orange); a change both made lies between.
CHANGE_PARTS = {"icl_only": "ICL only", "both": "both (same label)", "ft_only": "FT only"}
_CHANGE_COLORS = {"icl_only": "tab:blue", "both": "tab:purple", "ft_only": "tab:orange"}
_CHANGE_SUBSETS = {"correct": "to the right label", "incorrect": "to a wrong label"}
_INCORRECT_HATCH = "////"

_NO_DATA = "no data"
_NOT_AVAILABLE = "n/a"


def _percent(metric: str) -> float:
    """Accuracies are stored as fractions and shown in percent."""
    return 100.0 if metric.startswith("acc_") else 1.0


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _check(df: pd.DataFrame, required: Sequence[str], what: str, model: str | None) -> pd.DataFrame:
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"{what} table lacks columns {missing}")
    if model is None:
        return df
    out = df[df["model"] == model]
    if out.empty:
        models = sorted(map(str, df["model"].dropna().unique()))
        raise ValueError(f"no rows for model {model!r} in the {what} table (models: {models})")
    return out


def _method_colors(methods: Sequence[str], kinds: dict[str, str] | None = None) -> dict[str, str]:
    """Paper 001's colours by a method's kind, not its name (names are the user's): the first
    method of kind gd orange, of kind lcgd blue; every other method a colour of the cycle."""
    kinds = kinds or {}
    fixed: dict[str, str] = {}
    for method in methods:
        color = _METHOD_COLORS.get(kinds.get(method, method))
        if color is not None and color not in fixed.values():
            fixed[method] = color
    cycle = [f"C{i}" for i in range(len(plt.rcParams["axes.prop_cycle"].by_key()["color"]))]
    taken = {"C0", "C1"} | set(fixed.values())  # tab:blue / tab:orange
    others = iter([c for c in cycle if c not in taken] + cycle * 4)
    return {m: fixed.get(m) or next(others) for m in methods}


def _no_data(ax, text: str = _NO_DATA) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")


def _style(ax, grid_axis: str = "y") -> None:
    ax.grid(axis=grid_axis, alpha=0.3)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)


def _legend_above(ax, handles: Sequence, labels: Sequence[str], ncol: int | None = None) -> None:
    # above the top panel, outside the data area (constrained layout makes room for it)
    ax.legend(list(handles), list(labels), loc="lower center", bbox_to_anchor=(0.5, 1.0),
              ncol=ncol or min(len(handles), 4), frameon=False)


# ----------------------------------------------------------------------------- error bars


def error_bars(mean, std, n, ci_low, ci_high) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower and upper error-bar lengths of each mean, and whether each is a bootstrap interval.

    ± the sample std where more than one value (seed, run) went into the mean; otherwise the
    bootstrap interval ``[ci_low, ci_high]`` of the single value; NaN where neither is defined.
    A percentile interval need not contain the mean of the values, so lengths are clipped at 0.
    """
    mean, std, n, low, high = (np.asarray(x, dtype=float) for x in (mean, std, n, ci_low, ci_high))
    use_std = (n > 1) & np.isfinite(std)
    use_ci = ~use_std & np.isfinite(low) & np.isfinite(high)
    lower = np.where(use_std, std, np.where(use_ci, mean - low, np.nan))
    upper = np.where(use_std, std, np.where(use_ci, high - mean, np.nan))
    return np.clip(lower, 0.0, None), np.clip(upper, 0.0, None), use_ci


def _draw_errors(ax, x, y, lower, upper, from_ci, **kwargs) -> ErrorbarContainer | None:
    """One errorbar call; bootstrap-interval bars dashed. Returns None when no bar is defined."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    shown = np.isfinite(y) & np.isfinite(lower) & np.isfinite(upper)
    if not shown.any():
        return None
    lower, upper = np.where(shown, lower, np.nan), np.where(shown, upper, np.nan)
    kwargs = {"fmt": "none", "ecolor": "0.15", "elinewidth": 0.9, "capsize": 2.5, **kwargs}
    cont = ax.errorbar(x, y, yerr=np.vstack([lower, upper]), **kwargs)
    _dash_ci(cont, from_ci)
    return cont


def _dash_ci(cont: ErrorbarContainer, from_ci) -> None:
    # matplotlib draws one segment per point (empty where undefined), so styles map to points
    for bars in cont.lines[2]:
        bars.set_linestyles(["--" if c else "-" for c in np.asarray(from_ci, bool)])


def _error_note(used_std: bool, used_ci: bool, *, over: str, ci_level: float) -> str:
    """What the error bars of a figure are, for its title."""
    ci = f"{percent(ci_level)} bootstrap CI over examples"
    one = "seed" if over == "seeds" else "run"
    if used_std and used_ci:
        return f"error bars: ± std over {over}; dashed: {ci} where only one {one} ran"
    if used_std:
        return f"error bars: ± std over {over}"
    if used_ci:
        return f"error bars (dashed): {ci} (one {one})"
    return "no error bars (no spread or interval defined)"


def _summary_stats(df: pd.DataFrame, keys: Sequence[str]) -> dict[tuple, tuple[float, float, float, bool]]:
    """{key values: (mean, lower, upper, from_ci)} of summary rows."""
    std = df["std"] if "std" in df.columns else pd.Series(np.nan, index=df.index)
    n = df["n"] if "n" in df.columns else pd.Series(1, index=df.index)
    low = df["ci_low"] if "ci_low" in df.columns else pd.Series(np.nan, index=df.index)
    high = df["ci_high"] if "ci_high" in df.columns else pd.Series(np.nan, index=df.index)
    lower, upper, from_ci = error_bars(df["mean"], std, n, low, high)
    index = zip(*(df[k] for k in keys)) if len(keys) > 1 else ((k,) for k in df[keys[0]])
    return {
        key: (float(mu), float(lo), float(hi), bool(ci))
        for key, mu, lo, hi, ci in zip(index, df["mean"], lower, upper, from_ci, strict=True)
    }


def _runs_stats(df: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Mean over runs per ``keys``, with the error bars of :func:`error_bars` (a single run's
    own bootstrap interval, where only one run went into the mean)."""
    agg = {"mean": ("value", "mean"), "std": ("value", "std"), "n": ("value", "count")}
    if {"ci_low", "ci_high"} <= set(df.columns):
        agg |= {"ci_low": ("ci_low", "first"), "ci_high": ("ci_high", "first")}
    stats = df.groupby(list(keys), dropna=False).agg(**agg)
    if "ci_low" not in stats:
        stats["ci_low"] = stats["ci_high"] = np.nan
    stats["lower"], stats["upper"], stats["from_ci"] = error_bars(
        stats["mean"], stats["std"], stats["n"], stats["ci_low"], stats["ci_high"])
    return stats


def _grouped_bars(ax, categories: Sequence[str], series: Sequence[dict]) -> tuple[bool, bool]:
    """Bars per category, one per series (label, color, mean, lower, upper, from_ci arrays,
    optional hatch); a missing value is marked "n/a". Returns whether any std / any bootstrap
    interval was drawn."""
    x = np.arange(len(categories), dtype=float)
    k = max(len(series), 1)
    width = 0.8 / k
    used_std = used_ci = False
    for i, s in enumerate(series):
        pos = x + (i - (k - 1) / 2) * width
        vals = np.asarray(s["mean"], float)
        ax.bar(pos, vals, width * 0.95, label=s["label"], color=s["color"], edgecolor="white",
               lw=0.5, hatch=s.get("hatch"))  # a NaN height draws nothing but keeps its patch
        cont = _draw_errors(ax, pos, vals, s["lower"], s["upper"], s["from_ci"])
        if cont is not None:
            shown = np.isfinite(vals) & np.isfinite(s["lower"])
            used_ci |= bool((shown & s["from_ci"]).any())
            used_std |= bool((shown & ~s["from_ci"]).any())
        for p, v in zip(pos, vals):
            if not np.isfinite(v):
                ax.text(p, 0.02, _NOT_AVAILABLE, transform=ax.get_xaxis_transform(), rotation=90,
                        ha="center", va="bottom", fontsize=7, color="0.35")
    ax.set_xlim(-0.6, len(categories) - 0.4)
    rotate = len(categories) > 8 or max((len(c) for c in categories), default=0) > 16
    ax.set_xticks(x, list(categories), rotation=30 if rotate else 0, ha="right" if rotate else "center")
    return used_std, used_ci


def _series_from(stats: Mapping[tuple, tuple], keys: Iterable[tuple], scale: float = 1.0) -> dict:
    """The (mean, lower, upper, from_ci) of ``keys`` as arrays for :func:`_grouped_bars`; a
    missing key gives NaN (an "n/a" bar)."""
    rows = np.array([stats.get(k, (np.nan, np.nan, np.nan, False)) for k in keys], dtype=float).reshape(-1, 4)
    return {"mean": rows[:, 0] * scale, "lower": rows[:, 1] * scale, "upper": rows[:, 2] * scale,
            "from_ci": rows[:, 3].astype(bool)}


# ------------------------------------------------------------------------------- per layer


def per_layer_figure(
    runs: pd.DataFrame,
    model: str,
    variant: str = "trained",
    methods: Sequence[str] = ("gd", "lcgd"),
    metrics: Sequence[str] = ("simaou", "simam_delta"),
    *,
    tasks: Sequence[str] | None = None,
    ci_level: float = 0.95,
    kinds: dict[str, str] | None = None,
) -> Figure:
    """Paper 001 Fig. 3: one panel per metric (stacked, shared layer axis), x = layer,
    y = metric; one line per method at the mean over all runs (tasks x seeds) of that layer's
    value, error bars = sample std over the same runs (a single run: its bootstrap interval).
    Each line is an ``ErrorbarContainer`` in ``ax.containers`` with the method's label. A SimAOU
    panel also shows its random baseline (:data:`RANDOM_BASELINES`, mean over the same runs) as a
    dashed grey line. The legend sits above the top panel.
    """
    df = _check(
        runs, ("model", "variant", "task", "seed", "method", "metric", "layer", "value"),
        "runs", model,
    )
    wanted = set(metrics) | {RANDOM_BASELINES[m] for m in metrics if m in RANDOM_BASELINES}
    df = df[
        (df["variant"] == variant)
        & df["method"].isin(list(methods))
        & df["metric"].isin(wanted)
        & df["layer"].notna()
    ]
    if tasks is not None:
        df = df[df["task"].isin(list(tasks))]
    df = df.assign(layer=df["layer"].astype("int64"))
    stats = _runs_stats(df, ["metric", "method", "layer"])
    plotted = df[df["metric"].isin(list(metrics))]
    n_runs = plotted.drop_duplicates(["method", "task", "seed"]).groupby("method").size()
    n_tasks = plotted["task"].nunique()
    layers = sorted(plotted["layer"].unique())

    n_panels = max(len(metrics), 1)
    width = float(np.clip(2.5 + 0.28 * max(len(layers), 1), 6.0, 12.0))
    fig, axes = plt.subplots(
        n_panels, 1, sharex=True, squeeze=False,
        figsize=(width, 2.4 * n_panels + 1.0), layout="constrained",
    )
    axes = axes[:, 0]
    spread = 0.2 if len(methods) > 1 else 0.0  # dodge the methods so error bars don't overlap
    offsets = np.linspace(-spread / 2, spread / 2, len(methods)) if methods else []
    colors = _method_colors(methods, kinds)

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
                x, s["mean"].to_numpy(), yerr=np.vstack([s["lower"], s["upper"]]),
                color=colors[method], marker="o", ms=3.5, lw=1.4,
                elinewidth=0.9, capsize=2.5, label=label,
            )
            _dash_ci(cont, s["from_ci"].to_numpy())
            shown = np.isfinite(s["lower"].to_numpy())
            used_ci |= bool((shown & s["from_ci"].to_numpy()).any())
            used_std |= bool((shown & ~s["from_ci"].to_numpy()).any())
            handles.setdefault(label, cont)
            drawn = True
        baseline = RANDOM_BASELINES.get(metric)
        if drawn and baseline is not None:
            rand = df[df["metric"] == baseline].groupby("layer")["value"].mean()
            if not rand.empty:
                (line,) = ax.plot(rand.index.to_numpy(dtype=float), rand.to_numpy(), color="0.45",
                                  ls="--", lw=1.1, label=figure_metric_label(baseline))
                handles.setdefault(line.get_label(), line)
        if not drawn:
            _no_data(ax)
        ax.set_ylabel(figure_metric_label(metric))
        _style(ax)
    axes[-1].set_xlabel("Layer")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    if layers:
        axes[-1].set_xlim(layers[0] - 0.5, layers[-1] + 0.5)
    if handles:
        _legend_above(axes[0], list(handles.values()), list(handles.keys()), ncol=min(len(handles), 3))
    fig.suptitle(
        f"{model} ({variant_label(variant, in_text=True)}): per-layer similarity, mean over runs "
        f"({_plural(n_tasks, 'task')} × seeds)\n"
        + _error_note(used_std, used_ci, over="runs", ci_level=ci_level),
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
    metrics: Sequence[str] = ("acc_zsl", "acc_ft", "acc_icl"),
    tasks: Sequence[str] | None = None,
    ci_level: float = 0.95,
) -> Figure:
    """Grouped bars per task (x, paper order) for ZSL / FT / ICL accuracy in percent, mean over
    seeds; error bars by :func:`error_bars`. One ``BarContainer`` per setting in
    ``ax.containers``; a missing value leaves a gap marked "n/a"."""
    df = _check(summary, ("model", "variant", "task", "method", "metric", "mean"), "summary",
                model)
    df = df[(df["variant"] == variant) & (df["method"] == method)]
    if "layer" in df.columns:
        df = df[df["layer"].isna()]
    if tasks is None:
        tasks = order_tasks(df["task"].dropna().unique())
    tasks = list(tasks)
    stats = _summary_stats(df, ["task", "metric"])

    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(tasks) + 2.0), 3.9), layout="constrained")
    series = [
        {"label": figure_metric_label(m), "color": _SETTING_COLORS.get(m, f"C{i + 2}"),
         **_series_from(stats, [(t, m) for t in tasks], scale=100.0)}
        for i, m in enumerate(metrics)
    ]
    used_std, used_ci = _grouped_bars(ax, [task_label(t) for t in tasks], series)
    top = max([100.0] + [float(np.nanmax(s["mean"] + np.nan_to_num(s["upper"])))
                         for s in series if np.isfinite(s["mean"]).any()])
    ax.set_ylim(0.0, top * 1.03)
    ax.set_ylabel("Accuracy (%)")
    ax.set_xlabel("Task")
    _style(ax)
    if not df["metric"].isin(list(metrics)).any():
        _no_data(ax)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=max(len(metrics), 1), frameon=False)
    fig.suptitle(
        f"{model} ({variant_label(variant, in_text=True)}, {method_label(method)}): accuracy per task, mean over seeds\n"
        + _error_note(used_std, used_ci, over="seeds", ci_level=ci_level),
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
    mean over seeds; error bars by :func:`error_bars`. The paper shows one seed per task."""
    df = _check(summary, ("model", "variant", "task", "method", "metric", "mean"), "summary", model)
    df = df[(df["variant"] == variant) & (df["metric"] == "alpha") & df["method"].isin(list(methods))]
    if "layer" in df.columns:
        df = df[df["layer"].isna()]
    if tasks is None:
        tasks = order_tasks(df["task"].dropna().unique())
    tasks = list(tasks)
    stats = _summary_stats(df, ["task", "method"])
    colors = _method_colors(methods, kinds)

    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(tasks) + 2.5), 3.8), layout="constrained")
    ax.axhline(0.0, color="0.6", lw=0.8)
    series = [
        {"label": method_label(m), "color": colors[m], **_series_from(stats, [(t, m) for t in tasks])}
        for m in methods
    ]
    used_std, used_ci = _grouped_bars(ax, [task_label(t) for t in tasks], series)
    if df.empty:
        _no_data(ax)
    ax.set_ylabel(axis_label("alpha") + " (mean over layers)")
    ax.set_xlabel("Task")
    _style(ax)
    if len(methods) > 1:
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(methods), frameon=False)
    shown = ", ".join(method_label(m) for m in methods) or "no method"
    base = method_label(baseline)
    fig.suptitle(
        f"{model} ({variant_label(variant, in_text=True)}): "
        rf"$\alpha$ = cos($m_\mathrm{{{shown}}} - m_\mathrm{{ZSL}}$, $m_\mathrm{{{base}}} - m_\mathrm{{ZSL}}$)"
        " per task, mean over seeds\n"
        + _error_note(used_std, used_ci, over="seeds", ci_level=ci_level),
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
    fig, grid = plt.subplots(nrows, ncols, squeeze=False, figsize=(4.6 * ncols + 0.6, 3.5 * nrows + 0.6),
                             layout="constrained")
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
            _no_data(ax)
            continue
        values = np.asarray(values, dtype=float)
        steps, layers = values.shape
        bad = ~np.isfinite(values) | ((values <= 0) if log else False)
        if bad.all():
            _no_data(ax, "no defined gradient norm")
            continue
        shown = np.ma.masked_array(values.T, mask=bad.T)  # rows = layers, columns = steps
        good = values[~bad]
        norm = LogNorm(good.min(), good.max()) if log else Normalize(good.min(), good.max())
        cmap = plt.get_cmap("viridis").with_extremes(bad="0.8")
        image = ax.imshow(shown, origin="lower", aspect="auto", interpolation="nearest", cmap=cmap,
                          norm=norm, extent=(0.5, steps + 0.5, -0.5, layers - 0.5))
        if bad.any():
            ax.set_title(ax.get_title() + f"\ngrey: undefined ({int(bad.sum())} cells)", fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        label = r"$\ell_2$ norm of the K/V gradient" + (" (log scale)" if log else "")
        fig.colorbar(image, ax=ax, label=label, fraction=0.08, pad=0.03)
    if not methods:
        _no_data(axes[0])
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
    df = _check(summary, ("model", "variant", "task", "method", "metric", "mean"), "summary", model)
    df = df[(df["variant"] == variant) & df["method"].isin(list(methods))
            & df["metric"].str.startswith("changes_")]
    if "layer" in df.columns:
        df = df[df["layer"].isna()]
    if tasks is None:
        tasks = order_tasks(df["task"].dropna().unique())
    tasks = list(tasks)
    means = {(t, me, mt): mu for t, me, mt, mu in zip(df["task"], df["method"], df["metric"], df["mean"])}
    seeds = df["n"] if "n" in df.columns else pd.Series(dtype=float)

    n = max(len(methods), 1)
    fig, axes = plt.subplots(n, 1, sharex=True, squeeze=False,
                             figsize=(max(5.5, 1.0 * len(tasks) + 2.5), 2.6 * n + 1.2), layout="constrained")
    axes = axes[:, 0]
    x = np.arange(len(tasks), dtype=float)
    width = 0.38
    for ax, method in zip(axes, methods):
        drawn = False
        top = 0.0
        for offset, subset in zip((-width / 2 - 0.01, width / 2 + 0.01), _CHANGE_SUBSETS):
            parts = np.array([[means.get((t, method, f"changes_{p}_{subset}"), np.nan) for t in tasks]
                              for p in CHANGE_PARTS], dtype=float).reshape(len(CHANGE_PARTS), len(tasks))
            complete = np.isfinite(parts).all(axis=0)
            parts[:, ~complete] = np.nan
            bottom = np.zeros(len(tasks))
            for part, heights in zip(CHANGE_PARTS, parts):
                ax.bar(x + offset, heights, width, bottom=bottom, color=_CHANGE_COLORS[part],
                       edgecolor="white", lw=0.5, label=f"{CHANGE_PARTS[part]} ({subset})",
                       hatch=_INCORRECT_HATCH if subset == "incorrect" else None)
                bottom = bottom + np.nan_to_num(heights)
            for p in x[~complete] + offset:
                ax.text(p, 0.02, _NOT_AVAILABLE, transform=ax.get_xaxis_transform(), rotation=90,
                        ha="center", va="bottom", fontsize=7, color="0.35")
            # the total on top, so that a bar of no change reads "0" rather than nothing
            for p, total in zip(x[complete] + offset, bottom[complete]):
                ax.text(p, total, f"{total:.4g}", ha="center", va="bottom", fontsize=7, color="0.25")
            drawn |= bool(complete.any())
            top = max(top, float(bottom[complete].max()) if complete.any() else 0.0)
        if not drawn:
            _no_data(ax)
        # zero-height segments on top of a stack pin autoscaling to its height: set the limit
        ax.set_ylim(0.0, max(top, 1.0) * 1.12)
        ax.set_ylabel(f"FT = {method_label(method)}\nchanged predictions\n(examples)")
        _style(ax)
    rotate = len(tasks) > 8
    axes[-1].set_xticks(x, [task_label(t) for t in tasks], rotation=30 if rotate else 0,
                        ha="right" if rotate else "center")
    axes[-1].set_xlim(-0.6, len(tasks) - 0.4)
    axes[-1].set_xlabel("Task")
    handles = [Patch(facecolor=_CHANGE_COLORS[p], label=label) for p, label in CHANGE_PARTS.items()]
    handles += [Patch(facecolor="white", edgecolor="0.3", label="left: to the right label"),
                Patch(facecolor="white", edgecolor="0.3", hatch=_INCORRECT_HATCH, label="right: to a wrong label")]
    _legend_above(axes[0], handles, [h.get_label() for h in handles], ncol=3)
    n_seeds = sorted({int(s) for s in seeds.dropna()})
    if len(n_seeds) > 1:
        seed_text = f"{n_seeds[0]}–{n_seeds[-1]} seeds"
    else:
        seed_text = _plural(n_seeds[0] if n_seeds else 0, "seed")
    fig.suptitle(
        f"{model} ({variant_label(variant, in_text=True)}): ZSL predictions changed by ICL and FT\n"
        f"numbers of evaluation examples (total on top), mean over {seed_text}, no error bars",
        fontsize=11,
    )
    return fig


# ------------------------------------------------------------------ learning-rate sweeps


def lr_sweep_figure(
    summary: pd.DataFrame,
    model: str,
    sweep: pd.DataFrame,
    variant: str = "trained",
    metrics: Sequence[str] = ("simaou_norm", "simam_delta", "acc_ft"),
    *,
    ci_level: float = 0.95,
) -> Figure:
    """Layer-mean metrics against the learning rate: :func:`_sweep_figure` with ``x="lr"``."""
    return _sweep_figure(summary, model, sweep, "lr", variant, metrics, ci_level=ci_level)


def k_sweep_figure(
    summary: pd.DataFrame,
    model: str,
    sweep: pd.DataFrame,
    variant: str = "trained",
    metrics: Sequence[str] = ("acc_zsl", "acc_icl", "acc_ft", "simaou_norm", "simam_delta"),
    *,
    ci_level: float = 0.95,
) -> Figure:
    """Accuracies and layer-mean similarities against the number of demonstrations k (log2 x):
    :func:`_sweep_figure` with ``x="k"``; ``sweep`` rows are (group, method, task, k), the ICL
    accuracy of each point is that of the method's own ICL setting (the same k demonstrations)."""
    return _sweep_figure(summary, model, sweep, "k", variant, metrics, ci_level=ci_level)


def sizes_figure(
    summary: pd.DataFrame,
    sizes: pd.DataFrame,
    variant: str = "trained",
    methods: Sequence[str] = ("gd",),
    metrics: Sequence[str] = ("acc_zsl", "acc_icl", "acc_ft", "simaou_norm", "simam_delta"),
    *,
    ci_level: float = 0.95,
) -> Figure:
    """Accuracies and layer-mean similarities against each model's parameter count (log x; ``sizes``:
    model, n_parameters), one line per task (and method, as line style), one panel per metric:
    :func:`_sweep_figure` over (model, method) pairs, each placed at its model's size."""
    counts = dict(zip(sizes["model"], sizes["n_parameters"]))
    df = summary[summary["model"].isin(list(counts))].copy()
    df["method"] = df["model"] + "/" + df["method"]
    df["model"] = "models"
    tasks = order_tasks(df["task"].dropna().unique())
    sweep = pd.DataFrame([dict(group=method_label(m), method=f"{model}/{m}", task=t, n_parameters=n)
                          for m in methods for model, n in counts.items() for t in tasks])
    return _sweep_figure(df, "models", sweep, "n_parameters", variant, metrics, ci_level=ci_level,
                         subject=f"{variant_label(variant)} models")


_SWEEP_AXES = {"lr": ("Learning rate", "learning-rate sweep"), "k": ("Demonstrations (k)", "sweep over the demonstrations"),
               "n_parameters": ("Parameters", "metrics against model size")}


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
    df = _check(summary, ("model", "variant", "task", "method", "metric", "mean"), "summary", model)
    df = df[df["variant"] == variant]
    if "layer" in df.columns:
        df = df[df["layer"].isna()]
    missing = {"group", "method", "task", x} - set(sweep.columns)
    if missing:
        raise ValueError(f"sweep table lacks columns {sorted(missing)}")
    df = df[df["method"].isin(sweep["method"].unique())]
    stats = _summary_stats(df, ["task", "method", "metric"])
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
        scale = _percent(metric)
        drawn = False
        for g, group in enumerate(groups):
            for task in tasks:
                rows = sweep[(sweep["group"] == group) & (sweep["task"] == task)].sort_values(x)
                if rows.empty:
                    continue
                s = _series_from(stats, [(task, m, metric) for m in rows["method"]], scale)
                if not np.isfinite(s["mean"]).any():
                    continue
                label = task_label(task) if len(groups) == 1 else f"{task_label(task)}, {group}"
                cont = ax.errorbar(rows[x].to_numpy(float), s["mean"],
                                   yerr=np.vstack([s["lower"], s["upper"]]), color=task_colors[task],
                                   ls=styles[g % len(styles)], marker=markers[g % len(markers)], ms=4,
                                   lw=1.3, elinewidth=0.8, capsize=2.5, label=label)
                _dash_ci(cont, s["from_ci"])
                shown = np.isfinite(s["lower"])
                used_ci |= bool((shown & s["from_ci"]).any())
                used_std |= bool((shown & ~s["from_ci"]).any())
                drawn = True
        baseline = RANDOM_BASELINES.get(metric)
        if drawn and baseline is not None:
            # per task, over the task's rates: the baseline differs between tasks, not between rates
            for task in tasks:
                rand = df.loc[(df["metric"] == baseline) & (df["task"] == task), "mean"]
                rates = sweep.loc[sweep["task"] == task, x]
                if rand.notna().any() and not rates.empty:
                    (line,) = ax.plot([rates.min(), rates.max()], [rand.mean()] * 2, color=task_colors[task],
                                      ls=":", lw=1.3, label=figure_metric_label(baseline))
                    random_lines.setdefault(line.get_label(), line)
        if not drawn:
            _no_data(ax)
        if x == "k":
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(sweep["k"].unique()), [str(int(k)) for k in sorted(sweep["k"].unique())])
        else:
            ax.set_xscale("log")
        ax.set_xlabel(_SWEEP_AXES[x][0])
        ax.set_ylabel(axis_label(metric) + (" (mean over layers)" if scale == 1.0 else ""))
        _style(ax, grid_axis="both")
    handles = [Line2D([], [], color=task_colors[t], lw=2, label=task_label(t)) for t in tasks]
    if len(groups) > 1:
        handles += [Line2D([], [], color="0.2", ls=styles[g % len(styles)], marker=markers[g % len(markers)],
                           label=group) for g, group in enumerate(groups)]
    handles += [Line2D([], [], color="0.3", ls=":", lw=1.3, label=f"{label}, per task")
                for label in random_lines]
    fig.legend(handles=handles, loc="outside right upper", frameon=False)
    fig.suptitle(
        f"{subject or f'{model} ({variant_label(variant, in_text=True)})'}: {_SWEEP_AXES[x][1]}, mean over seeds\n"
        + _error_note(used_std, used_ci, over="seeds", ci_level=ci_level),
        fontsize=11,
    )
    return fig


# ------------------------------------------------------------------------------- models


def models_figure(
    runs: pd.DataFrame,
    models: Sequence[str],
    variant: str = "trained",
    methods: Sequence[str] = ("gd", "lcgd"),
    metrics: Sequence[str] = ("simaou_norm", "simam_delta", "acc_ft"),
    *,
    tasks: Sequence[str] | None = None,
    ci_level: float = 0.95,
    kinds: dict[str, str] | None = None,
) -> Figure:
    """Layer-mean metrics per model (x, in the given order), one bar per method (a
    ``BarContainer`` labelled with the method), one panel per metric (stacked); each bar is the
    mean over the model's runs (tasks x seeds), error bars by :func:`error_bars` over those runs.
    A SimAOU panel marks its random baseline per model (mean over the same runs) with a dashed
    grey segment across the model's bars."""
    df = _check(runs, ("model", "variant", "task", "seed", "method", "metric", "layer", "value"), "runs", None)
    models = list(models)
    wanted = set(metrics) | {RANDOM_BASELINES[m] for m in metrics if m in RANDOM_BASELINES}
    df = df[df["model"].isin(models) & (df["variant"] == variant) & df["method"].isin(list(methods))
            & df["metric"].isin(wanted) & df["layer"].isna()]
    if tasks is not None:
        df = df[df["task"].isin(list(tasks))]
    stats = _runs_stats(df, ["model", "method", "metric"])
    lookup = {k: (r["mean"], r["lower"], r["upper"], bool(r["from_ci"])) for k, r in stats.iterrows()}
    colors = _method_colors(methods, kinds)
    n_tasks = df["task"].nunique()

    n = max(len(metrics), 1)
    width = max(6.0, (0.45 * len(methods) + 0.5) * len(models) + 2.5)
    fig, axes = plt.subplots(n, 1, sharex=True, squeeze=False, figsize=(width, 2.4 * n + 1.4), layout="constrained")
    axes = axes[:, 0]
    used_std = used_ci = False
    handles: dict[str, object] = {}
    for ax, metric in zip(axes, metrics):
        scale = _percent(metric)
        ax.axhline(0.0, color="0.6", lw=0.8)
        series = [{"label": method_label(m), "color": colors[m],
                   **_series_from(lookup, [(mo, m, metric) for mo in models], scale)} for m in methods]
        s, c = _grouped_bars(ax, models, series)
        used_std, used_ci = used_std | s, used_ci | c
        if not any(np.isfinite(x["mean"]).any() for x in series):
            _no_data(ax)
        baseline = RANDOM_BASELINES.get(metric)
        if baseline is not None:
            for i, mo in enumerate(models):
                rand = df.loc[(df["model"] == mo) & (df["metric"] == baseline), "value"]
                if rand.notna().any():
                    (line,) = ax.plot([i - 0.45, i + 0.45], [rand.mean()] * 2, color="0.45", ls="--",
                                      lw=1.2, label=figure_metric_label(baseline))
                    handles.setdefault(line.get_label(), line)
        ax.set_ylabel(axis_label(metric) + ("\n(mean over layers)" if scale == 1.0 else ""))
        _style(ax)
    axes[-1].set_xlabel("Model")
    bar_handles = [Patch(facecolor=colors[m], label=method_label(m)) for m in methods]
    legend = bar_handles + list(handles.values())
    _legend_above(axes[0], legend, [h.get_label() for h in legend], ncol=min(len(legend), 4))
    fig.suptitle(
        f"Models compared ({variant_label(variant, in_text=True)}): mean over runs ({_plural(n_tasks, 'task')} × seeds)\n"
        + _error_note(used_std, used_ci, over="runs", ci_level=ci_level),
        fontsize=11,
    )
    return fig


# ------------------------------------------------------------------------------ reproduction

_REPRODUCTION_METRICS = ("acc_zsl", "acc_icl", "acc_ft", "jaccard_all", "jaccard_correct", "jaccard_incorrect",
                         "simaou", "simaou_norm", "simaou_random", "simam_before", "simam_after", "simam_delta")
_CELL_MARKERS = {("trained", "gd"): "o", ("trained", "lcgd"): "s", ("trained", "lcgd_clip"): "^",
                 ("trained_embeddings", "gd"): "v", ("untrained", "gd"): "D"}


def reproduction_figure(cells: pd.DataFrame, model: str, *, ci_level: float = 0.95) -> Figure:
    """Published (x) against this run (y), one panel per metric, one point per published cell the
    run covers (``published.reproduction``): colour the task, marker the variant and method; the
    published ± as a horizontal bar, the run's interval as a vertical one; the identity line."""
    metrics = [m for m in _REPRODUCTION_METRICS if m in set(cells["metric"])]
    metrics += sorted(set(cells["metric"]) - set(metrics))
    n = max(len(metrics), 1)
    ncols = min(n, 4)
    nrows = -(-n // ncols)
    fig, grid = plt.subplots(nrows, ncols, squeeze=False, figsize=(3.4 * ncols + 1.8, 3.3 * nrows + 0.9),
                             layout="constrained")
    tasks = order_tasks(cells["task"].unique()) if len(cells) else []
    colors = {t: f"C{i}" if t != "average" else "black" for i, t in enumerate(tasks)}
    for ax, metric in zip(grid.flat, metrics):
        df = cells[cells["metric"] == metric]
        for row in df.itertuples(index=False):
            marker = _CELL_MARKERS.get((row.variant, row.method), "X")
            ax.errorbar(row.published, row.mean, xerr=0.0 if np.isnan(row.published_spread) else row.published_spread,
                        yerr=[[row.mean - row.ci_low], [row.ci_high - row.mean]], fmt=marker, color=colors[row.task],
                        markersize=5, elinewidth=0.8, capsize=2, mfc="none" if not row.within else colors[row.task])
        low = float(np.nanmin([df["published"].min(), df["ci_low"].min()]))
        high = float(np.nanmax([df["published"].max(), df["ci_high"].max()]))
        pad = 0.05 * (high - low or 1.0)
        ax.plot([low - pad, high + pad], [low - pad, high + pad], color="0.6", lw=0.8, ls="--", zorder=0)
        ax.set_xlim(low - pad, high + pad)
        ax.set_ylim(low - pad, high + pad)
        percent_unit = df["unit"].iloc[0] == "percent"
        ax.set_title(axis_label(metric) if metric.startswith("acc_") else
                     figure_metric_label(metric) + (" (%)" if percent_unit else ""), fontsize=10)
        ax.set_xlabel("published")
        ax.set_ylabel("this run")
        _style(ax, grid_axis="both")
    for ax in list(grid.flat)[len(metrics):]:
        ax.set_visible(False)
    if not metrics:
        grid.flat[0].set_visible(True)
        _no_data(grid.flat[0], "no published cell covered by this run")
    handles = [Line2D([], [], ls="", marker="o", color=colors[t],
                      label=task_label(t) if t != "average" else "average over tasks") for t in tasks]
    present = set(zip(cells["variant"], cells["method"]))
    handles += [Line2D([], [], ls="", marker=m, color="0.3", label=f"{variant_label(v, in_text=True)}, {method_label(k)}")
                for (v, k), m in _CELL_MARKERS.items() if (v, k) in present]
    handles.append(Line2D([], [], ls="", marker="o", color="0.3", mfc="none", label="not within (run and published uncertainty combined)"))
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

VERDICT_COLORS = {"supported": "tab:green", "contradicted": "tab:red", "inconclusive": "tab:orange",
                  "not run": "0.6"}
_CLAIMED_SIDE = "#d9f0d3"


def claims_figure(tests: pd.DataFrame, model: str, roles: Mapping[str, str], *, ci_level: float = 0.95) -> Figure:
    """A forest plot of the claims (``claims.evaluate_claims``): one panel per claim and cell b,
    a row per task and one for the mean over tasks, each difference a - b with its interval, the
    zero line, the claimed side shaded, the interval and the title in the verdict's colour."""
    from . import claims as claims_module  # the claims' texts; claims imports no figure code

    tests = tests[tests["model"] == model]
    panels = [(claim, j) for claim in claims_module.CLAIMS for j in range(len(claim.against))]
    sizes = []
    for claim, j in panels:
        rows = tests[(tests["claim"] == claim.id) & (tests["comparison"] == j) & (tests["task"] != "")]
        sizes.append(len(rows))
    ncols = 2
    nrows = -(-len(panels) // ncols)
    heights = [max(max(sizes[r * ncols:(r + 1) * ncols]), 1) * 0.17 + 0.75 for r in range(nrows)]
    fig = plt.figure(figsize=(14, sum(heights) + 1.0), layout="constrained")
    grid = fig.add_gridspec(nrows, ncols, height_ratios=heights)
    counts = {v: 0 for v in VERDICT_COLORS}
    for i, ((claim, j), n) in enumerate(zip(panels, sizes)):
        ax = fig.add_subplot(grid[i // ncols, i % ncols])
        rows = tests[(tests["claim"] == claim.id) & (tests["comparison"] == j) & (tests["task"] != "")]
        verdict = tests.loc[tests["claim"] == claim.id, "verdict"].iloc[0] if (tests["claim"] == claim.id).any() else "not run"
        if j == 0:
            counts[verdict] += 1
        color = VERDICT_COLORS[verdict]
        statement = claims_module._statement(claim, roles, j)
        title = f"{claim.paper} {claim.table}: {claim.text}" if j == 0 else "(continued)"
        title = f"{_wrap(title, 95)}\n{_wrap(statement, 105)} — {verdict}"
        first = tests[tests["claim"] == claim.id].iloc[0] if (tests["claim"] == claim.id).any() else None
        if verdict == "inconclusive" and j == 0:
            title += "\n" + _wrap("would need: " + claims_module.needed_text(
                verdict, first.factor, first.n_needed, first.resolves_to), 105)
        ax.set_title(title, fontsize=7.5, loc="left", color=color)
        ax.set_yticks([])
        if n == 0:
            _no_data(ax, "not run: the run has no such cell")
            ax.set_xticks([])
            continue
        order = [t for t in order_tasks(rows["task"]) if t != claims_module.MEAN] + [claims_module.MEAN]
        by_task = {r.task: r for r in rows.itertuples(index=False)}
        order = [t for t in order if t in by_task]
        ys = np.arange(len(order))[::-1].astype(float)
        decisive = claims_module.MEAN if claim.quantifier == "mean" else None
        for y, task in zip(ys, order):
            r = by_task[task]
            if not np.isfinite(r.difference):
                ax.text(0.0, y, "undefined", fontsize=6, va="center", color="0.5")
                continue
            strong = (task == decisive) or (decisive is None and task != claims_module.MEAN)
            ax.plot([r.ci_low, r.ci_high], [y, y], color=color if strong else "0.55", lw=2.0 if strong else 1.2)
            ax.plot([r.difference], [y], marker="D" if task == claims_module.MEAN else "o", ms=4,
                    color=color if strong else "0.55")
        lows = [by_task[t].ci_low for t in order if np.isfinite(by_task[t].ci_low)]
        highs = [by_task[t].ci_high for t in order if np.isfinite(by_task[t].ci_high)]
        low, high = min([0.0, *lows]), max([0.0, *highs])
        pad = 0.08 * ((high - low) or 1.0)
        ax.set_xlim(low - pad, high + pad)
        ax.axvspan(0, high + pad, color=_CLAIMED_SIDE, zorder=0) if claim.direction > 0 else ax.axvspan(
            low - pad, 0, color=_CLAIMED_SIDE, zorder=0)
        ax.axvline(0.0, color="0.2", lw=0.8)
        ax.set_yticks(ys, [task_label(t) if t != claims_module.MEAN else "mean over tasks" for t in order], fontsize=7)
        ax.set_ylim(-0.7, len(order) - 0.3)
        unit = rows["unit"].iloc[0]
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("a − b" + (" (points)" if unit == "points" else ""), fontsize=7)
    handles = [Patch(color=c, label=f"{v} ({counts[v]})") for v, c in VERDICT_COLORS.items()]
    handles.append(Patch(color=_CLAIMED_SIDE, label="the claimed side"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False, fontsize=8)
    fig.suptitle(
        f"The papers' claims on this run ({model}): each difference a − b with its paired bootstrap interval "
        f"over the evaluation examples\nper-task intervals at the level the claim's quantifier reads them "
        f"(Bonferroni over tasks; {percent(ci_level)} overall); thick: what the verdict reads",
        fontsize=9,
    )
    return fig


def _wrap(text: str, width: int) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(text, width))


# --------------------------------------------------------------------------------- writing


def _save(fig: Figure, path: Path, fmt: str, **kwargs) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, bbox_inches="tight", **kwargs)


def write_figure(fig: Figure, stem: str | os.PathLike) -> list[Path]:
    """Save ``stem.png`` (150 dpi) and ``stem.pdf`` (no creation date, so reruns give the same
    bytes), each atomically, then close the figure; returns the two paths."""
    stem = Path(stem)
    png, pdf = stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".pdf")
    try:
        _save(fig, png, "png", dpi=150)
        _save(fig, pdf, "pdf", metadata={"CreationDate": None})
    finally:
        plt.close(fig)
    return [png, pdf]
