"""Paper-style figures from the runs and summary tables.

* :func:`per_layer_figure` -- paper 001 Fig. 3: per-layer similarity, one panel per metric, one
  line per training method, error bars = std over all runs (tasks x seeds) at that layer.
* :func:`accuracy_figure` -- grouped bars per task for ZSL / FT / ICL accuracy (%), error bars =
  sample std over seeds.
* :func:`write_figure` -- saves ``stem.png`` (150 dpi) and ``stem.pdf`` atomically, closes it.

Inputs are the tidy runs table (``results/metrics/runs.parquet``: model, variant, task, seed,
method, metric, layer, value) and the summary table (``results/metrics/summary.parquet``: model,
variant, task, method, metric, layer, mean, std, n). This module imports nothing of the package
and reads no config; it renders with the non-interactive Agg backend.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from .labels import method_label, order_tasks, task_label  # noqa: E402

__all__ = ["per_layer_figure", "accuracy_figure", "write_figure"]

# Display names of metrics and variants: mathtext here, plain text in the tables.
_METRIC_LABELS = {
    "simaou": "SimAOU",
    "simaou_norm": r"SimAOU$_\mathrm{norm}$",
    "simaou_random": "Random SimAOU",
    "simam_before": "SimAM (before FT)",
    "simam_after": "SimAM (after FT)",
    "simam_delta": r"SimAM$_\Delta$",
    "alpha": r"$\alpha$",
    "acc_zsl": "ZSL",
    "acc_ft": "FT",
    "acc_icl": "ICL",
}
_VARIANT_LABELS = {
    "trained": "trained",
    "trained_embeddings": "trained embeddings",
    "untrained": "no training",
    "layernorm_only": "layer-norm only",
}
# Paper 001 Fig. 3 colours: layer-causal GD blue, vanilla GD orange.
_METHOD_COLORS = {"gd": "tab:orange", "lcgd": "tab:blue"}
_SETTING_COLORS = {"acc_zsl": "0.65", "acc_ft": "tab:orange", "acc_icl": "tab:blue"}


def _metric_label(metric: str) -> str:
    return _METRIC_LABELS.get(metric, metric)


def _variant_label(variant: str) -> str:
    return _VARIANT_LABELS.get(variant, variant.replace("_", " "))


def _check(df: pd.DataFrame, required: Sequence[str], what: str, model: str) -> pd.DataFrame:
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"{what} table lacks columns {missing}")
    out = df[df["model"] == model]
    if out.empty:
        models = sorted(map(str, df["model"].dropna().unique()))
        raise ValueError(f"no rows for model {model!r} in the {what} table (models: {models})")
    return out


def _other_colors(used: Iterable[str]) -> Iterable[str]:
    cycle = [c for c in plt.rcParams["axes.prop_cycle"].by_key()["color"]]
    names = [f"C{i}" for i in range(len(cycle))]
    taken = set(used) | {"C0", "C1"}  # tab:blue / tab:orange
    return iter([n for n in names if n not in taken] + names)


# ------------------------------------------------------------------------------- per layer


def per_layer_figure(
    runs: pd.DataFrame,
    model: str,
    variant: str = "trained",
    methods: Sequence[str] = ("gd", "lcgd"),
    metrics: Sequence[str] = ("simaou", "simam_delta"),
    *,
    tasks: Sequence[str] | None = None,
) -> Figure:
    """Paper 001 Fig. 3: one panel per metric (stacked, shared layer axis), x = layer,
    y = metric; one line per method at the mean over all runs (tasks x seeds) of that layer's
    value, error bars = sample std over the same runs. Each line is an ``ErrorbarContainer``
    in ``ax.containers`` with the method's label; the legend sits above the top panel.
    """
    df = _check(
        runs, ("model", "variant", "task", "seed", "method", "metric", "layer", "value"),
        "runs", model,
    )
    df = df[
        (df["variant"] == variant)
        & df["method"].isin(list(methods))
        & df["metric"].isin(list(metrics))
        & df["layer"].notna()
    ]
    if tasks is not None:
        df = df[df["task"].isin(list(tasks))]
    df = df.assign(layer=df["layer"].astype("int64"))
    stats = df.groupby(["metric", "method", "layer"])["value"].agg(["mean", "std", "count"])
    n_runs = df.drop_duplicates(["method", "task", "seed"]).groupby("method").size()
    n_tasks = df["task"].nunique()
    layers = sorted(df["layer"].unique())

    n_panels = max(len(metrics), 1)
    width = float(np.clip(2.5 + 0.28 * max(len(layers), 1), 6.0, 12.0))
    fig, axes = plt.subplots(
        n_panels, 1, sharex=True, squeeze=False,
        figsize=(width, 2.4 * n_panels + 0.9), layout="constrained",
    )
    axes = axes[:, 0]
    spread = 0.2 if len(methods) > 1 else 0.0  # dodge the methods so error bars don't overlap
    offsets = np.linspace(-spread / 2, spread / 2, len(methods)) if methods else []
    others = _other_colors(_METHOD_COLORS.get(m, "") for m in methods)
    colors = {m: _METHOD_COLORS.get(m) or next(others) for m in methods}

    handles: dict[str, object] = {}
    for ax, metric in zip(axes, metrics):
        ax.axhline(0.0, color="0.75", lw=0.8, zorder=0)
        drawn = False
        for off, method in zip(offsets, methods):
            try:
                s = stats.loc[(metric, method)]
            except KeyError:
                continue
            label = f"{method_label(method)} ({int(n_runs.get(method, 0))} runs)"
            cont = ax.errorbar(
                s.index.to_numpy(dtype=float) + off,
                s["mean"].to_numpy(),
                yerr=s["std"].to_numpy(dtype=float),
                color=colors[method], marker="o", ms=3.5, lw=1.4,
                elinewidth=0.9, capsize=2.5, label=label,
            )
            handles.setdefault(label, cont)
            drawn = True
        if not drawn:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center",
                    color="0.4")
        ax.set_ylabel(_metric_label(metric))
        ax.grid(axis="y", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    axes[-1].set_xlabel("Layer")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    if layers:
        axes[-1].set_xlim(layers[0] - 0.5, layers[-1] + 0.5)
    if handles:
        # above the top panel, outside the data area (constrained layout makes room for it)
        axes[0].legend(list(handles.values()), list(handles.keys()), loc="lower center",
                       bbox_to_anchor=(0.5, 1.0), ncol=len(handles), frameon=False)
    fig.suptitle(
        f"{model} ({_variant_label(variant)}): per-layer similarity\n"
        f"mean ± std over runs ({n_tasks} task{'s' if n_tasks != 1 else ''} × seeds)",
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
) -> Figure:
    """Grouped bars per task (x, paper order) for ZSL / FT / ICL accuracy in percent, error bars
    = sample std over seeds (none when n = 1). One ``BarContainer`` per setting in
    ``ax.containers``; a missing value leaves a gap marked "n/a"."""
    df = _check(summary, ("model", "variant", "task", "method", "metric", "mean"), "summary",
                model)
    df = df[(df["variant"] == variant) & (df["method"] == method)]
    if "layer" in df.columns:
        df = df[df["layer"].isna()]
    if tasks is None:
        tasks = order_tasks(df["task"].dropna().unique())
    tasks = list(tasks)
    std = df["std"] if "std" in df.columns else pd.Series(np.nan, index=df.index)
    lookup = {
        (t, m): (mu, sd)
        for t, m, mu, sd in zip(df["task"], df["metric"], df["mean"], std, strict=True)
    }

    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(tasks) + 2.0), 3.9), layout="constrained")
    x = np.arange(len(tasks), dtype=float)
    k = max(len(metrics), 1)
    width = 0.8 / k
    others = _other_colors(_SETTING_COLORS.get(m, "") for m in metrics)
    top = 100.0
    for i, metric in enumerate(metrics):
        vals = np.array([lookup.get((t, metric), (np.nan, np.nan))[0] for t in tasks], float)
        errs = np.array([lookup.get((t, metric), (np.nan, np.nan))[1] for t in tasks], float)
        vals, errs = vals * 100.0, errs * 100.0
        pos = x + (i - (k - 1) / 2) * width
        has_err = np.isfinite(errs) & np.isfinite(vals)
        ax.bar(  # NaN heights / errors draw nothing (but keep one patch per task)
            pos, vals, width * 0.95, yerr=np.where(has_err, errs, np.nan),
            capsize=2.5, error_kw={"elinewidth": 0.9},
            label=_metric_label(metric),
            color=_SETTING_COLORS.get(metric) or next(others), edgecolor="white", lw=0.5,
        )
        for p, v in zip(pos, vals):
            if not np.isfinite(v):
                ax.text(p, 1.0, "n/a", rotation=90, ha="center", va="bottom", fontsize=7,
                        color="0.35")
        if np.isfinite(vals).any():
            top = max(top, float(np.nanmax(vals + np.where(has_err, errs, 0.0))))
    ax.set_xticks(x, [task_label(t) for t in tasks],
                  rotation=30 if len(tasks) > 8 else 0, ha="right" if len(tasks) > 8 else "center")
    ax.set_xlim(-0.6, len(tasks) - 0.4)
    ax.set_ylim(0.0, top * 1.03)
    ax.set_ylabel("Accuracy (%)")
    ax.set_xlabel("Task")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=k, frameon=False)
    fig.suptitle(
        f"{model} ({_variant_label(variant)}, {method_label(method)}): accuracy per task\n"
        "mean ± std over seeds",
        fontsize=11,
    )
    return fig


# --------------------------------------------------------------------------------- writing


def _atomic_savefig(fig: Figure, path: Path, fmt: str, **kwargs) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        fig.savefig(tmp, format=fmt, bbox_inches="tight", **kwargs)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_figure(fig: Figure, stem: str | os.PathLike) -> list[Path]:
    """Save ``stem.png`` (150 dpi) and ``stem.pdf`` (no creation date, so reruns give the same
    bytes), each atomically, then close the figure; returns the two paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, pdf = stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".pdf")
    try:
        _atomic_savefig(fig, png, "png", dpi=150)
        _atomic_savefig(fig, pdf, "pdf", metadata={"CreationDate": None})
    finally:
        plt.close(fig)
    return [png, pdf]
