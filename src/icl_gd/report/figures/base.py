"""What every figure shares: the Agg backend, colours, error bars (one rule for all figures),
no-data panels, and the atomic writer."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from icl_gd.common.atomic import atomic_path  # noqa: E402
from icl_gd.common.names import (  # noqa: E402
    percent,
)

# Paper 001 Fig. 3 colours: layer-causal GD blue, vanilla GD orange.
_METHOD_COLORS = {"gd": "tab:orange", "lcgd": "tab:blue"}

# Paper 003 Fig. 1: the ZSL predictions that ICL and FT change, split by who changed them.
# Colours follow the settings (ICL blue, FT orange); a change both made lies between.
CHANGE_PARTS = {"icl_only": "ICL only", "both": "both (same label)", "ft_only": "FT only"}
CHANGE_COLORS = {"icl_only": "tab:blue", "both": "tab:purple", "ft_only": "tab:orange"}
CHANGE_SUBSETS = {"correct": "to the right label", "incorrect": "to a wrong label"}
INCORRECT_HATCH = "////"

_NO_DATA = "no data"
NOT_AVAILABLE = "n/a"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def method_colors(methods: Sequence[str], kinds: dict[str, str] | None = None) -> dict[str, str]:
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


def no_data(ax, text: str = _NO_DATA) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")


def style_axes(ax, grid_axis: str = "y") -> None:
    ax.grid(axis=grid_axis, alpha=0.3)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)


def legend_above(ax, handles: Sequence, labels: Sequence[str], ncol: int | None = None) -> None:
    # above the top panel, outside the data area (constrained layout makes room for it)
    ax.legend(
        list(handles),
        list(labels),
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=ncol or min(len(handles), 4),
        frameon=False,
    )


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
    dash_ci(cont, from_ci)
    return cont


def dash_ci(cont: ErrorbarContainer, from_ci) -> None:
    # matplotlib draws one segment per point (empty where undefined), so styles map to points
    for bars in cont.lines[2]:
        bars.set_linestyles(["--" if c else "-" for c in np.asarray(from_ci, bool)])


def error_note(used_std: bool, used_ci: bool, *, over: str, ci_level: float) -> str:
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


def summary_stats(df: pd.DataFrame, keys: Sequence[str]) -> dict[tuple, tuple[float, float, float, bool]]:
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


def runs_stats(df: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Mean over runs per ``keys``, with the error bars of :func:`error_bars` (a single run's
    own bootstrap interval, where only one run went into the mean)."""
    agg = {"mean": ("value", "mean"), "std": ("value", "std"), "n": ("value", "count")}
    if {"ci_low", "ci_high"} <= set(df.columns):
        agg |= {"ci_low": ("ci_low", "first"), "ci_high": ("ci_high", "first")}
    stats = df.groupby(list(keys), dropna=False).agg(**agg)
    if "ci_low" not in stats:
        stats["ci_low"] = stats["ci_high"] = np.nan
    stats["lower"], stats["upper"], stats["from_ci"] = error_bars(
        stats["mean"], stats["std"], stats["n"], stats["ci_low"], stats["ci_high"]
    )
    return stats


def grouped_bars(ax, categories: Sequence[str], series: Sequence[dict]) -> tuple[bool, bool]:
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
        ax.bar(
            pos, vals, width * 0.95, label=s["label"], color=s["color"], edgecolor="white", lw=0.5, hatch=s.get("hatch")
        )  # a NaN height draws nothing but keeps its patch
        cont = _draw_errors(ax, pos, vals, s["lower"], s["upper"], s["from_ci"])
        if cont is not None:
            shown = np.isfinite(vals) & np.isfinite(s["lower"])
            used_ci |= bool((shown & s["from_ci"]).any())
            used_std |= bool((shown & ~s["from_ci"]).any())
        for p, v in zip(pos, vals):
            if not np.isfinite(v):
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
    ax.set_xlim(-0.6, len(categories) - 0.4)
    rotate = len(categories) > 8 or max((len(c) for c in categories), default=0) > 16
    ax.set_xticks(x, list(categories), rotation=30 if rotate else 0, ha="right" if rotate else "center")
    return used_std, used_ci


def series_from(stats: Mapping[tuple, tuple], keys: Iterable[tuple], scale: float = 1.0) -> dict:
    """The (mean, lower, upper, from_ci) of ``keys`` as arrays for :func:`grouped_bars`; a
    missing key gives NaN (an "n/a" bar)."""
    rows = np.array([stats.get(k, (np.nan, np.nan, np.nan, False)) for k in keys], dtype=float).reshape(-1, 4)
    return {
        "mean": rows[:, 0] * scale,
        "lower": rows[:, 1] * scale,
        "upper": rows[:, 2] * scale,
        "from_ci": rows[:, 3].astype(bool),
    }


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
