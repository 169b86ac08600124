"""How a built-in model learned to read its demonstrations: its training curve (``pretrain_curve``,
``training_curve.tsv`` in the model's folder; models/curve.py) as a figure and a table, with the
step where it starts to read its context.

    python -m icl_gd.report.training_curve resources/models/tiny/trained --figure docs/figures/training_curve

The onset (:func:`reading_onset`) is the first recorded step at which label following (ICL with the
demonstrations' labels permuted, scored against the permuted gold), averaged over the twins, lies
:data:`ONSET_MARGIN` points above what guessing gets (the mean over the twins of 100 / classes):
a model that follows the labels it reads does that; one that a context only shifts does not.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from icl_gd.common import names
from icl_gd.config.resolve import TASK_PRESETS

ONSET_MARGIN = 20.0  # points above the twins' mean chance rate: about 7 standard errors at 50 x 6 examples


def chance(task: str) -> float:
    return 100.0 / len(TASK_PRESETS[task]["label_words"])


def mean_curve(curve: pd.DataFrame) -> pd.DataFrame:
    """Per step: the loss, the mean over the twins of ZSL, ICL, ICL minus ZSL and label following
    (and of ICL on novel label words, where the curve read it), and the twins' mean chance rate."""
    table = curve.assign(gain=curve["icl"] - curve["zsl"], chance=curve["task"].map(chance))
    novel = ["icl_novel"] if "icl_novel" in curve else []
    return table.groupby("step", as_index=False)[
        ["loss", "zsl", "icl", "gain", "icl_permuted", *novel, "chance"]
    ].mean()


def reading_onset(curve: pd.DataFrame, margin: float = ONSET_MARGIN) -> int | None:
    """The first step whose mean label following lies ``margin`` points above the mean chance rate."""
    means = mean_curve(curve)
    above = means[means["icl_permuted"] >= means["chance"] + margin]
    return int(above["step"].iloc[0]) if len(above) else None


def markdown(curve: pd.DataFrame) -> str:
    """The mean curve as a Markdown table (for docs/results.md)."""
    means = mean_curve(curve)
    novel = "icl_novel" in means
    lines = [
        "| step | loss | ZSL (%) | ICL (%) | ICL - ZSL (points) | label following (%) |"
        + (" novel label words (%) |" if novel else ""),
        "|---:|---:|---:|---:|---:|---:|" + ("---:|" if novel else ""),
    ]
    for row in means.itertuples():
        lines.append(
            f"| {row.step} | {row.loss:.3f} | {row.zsl:.1f} | {row.icl:.1f} | {row.gain:+.1f} | {row.icl_permuted:.1f} |"
            + (f" {row.icl_novel:.1f} |" if novel else "")
        )
    return "\n".join(lines)


def training_curve_figure(curve: pd.DataFrame, stem) -> list[Path]:
    """Three panels against the step: the pretraining loss; ICL minus ZSL per twin; label following
    per twin with its chance rate; the mean over the twins drawn thick, the onset marked."""
    from icl_gd.report.figures.base import plt, style_axes, write_figure

    means = mean_curve(curve)
    onset = reading_onset(curve)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), sharex=True)
    axes[0].plot(means["step"], means["loss"], color="black")
    axes[0].set_ylabel("loss on the label words")
    tasks = names.order_tasks(curve["task"].unique())
    colors = plt.get_cmap("tab10")(np.arange(len(tasks)))
    for task, color in zip(tasks, colors):
        own = curve[curve["task"] == task].sort_values("step")
        label = names.task_label(task)
        axes[1].plot(own["step"], own["icl"] - own["zsl"], color=color, lw=1, alpha=0.7, label=label)
        axes[2].plot(own["step"], own["icl_permuted"], color=color, lw=1, alpha=0.7, label=label)
    axes[1].plot(means["step"], means["gain"], color="black", lw=2.5, label="mean")
    axes[1].axhline(0, color="grey", lw=0.8)
    axes[1].set_ylabel("ICL minus ZSL (points)")
    axes[2].plot(means["step"], means["icl_permuted"], color="black", lw=2.5, label="mean")
    if "icl_novel" in means:
        axes[2].plot(means["step"], means["icl_novel"], color="black", lw=1.5, ls="--", label="novel words (mean)")
    axes[2].plot(means["step"], means["chance"], color="grey", ls=":", label="chance (mean)")
    axes[2].set_ylabel("label following (%)")
    axes[2].set_ylim(0, 100)
    axes[2].legend(fontsize=7, ncol=2, loc="lower right")
    for ax in axes:
        style_axes(ax)
        ax.set_xlabel("pretraining step")
        if onset is not None:
            ax.axvline(onset, color="tab:red", ls="--", lw=1)
    said = f"reads its demonstrations from step {onset}" if onset is not None else "never reads its demonstrations"
    fig.suptitle(
        f"Held-out twin examples during pretraining: the model {said} (red: label following "
        f"{ONSET_MARGIN:.0f} points above chance on the mean)",
        fontsize=9,
    )
    fig.tight_layout()
    return write_figure(fig, stem)


def read_curve(path: str | Path) -> pd.DataFrame:
    """A model folder's training curve, or the TSV itself."""
    path = Path(path)
    return pd.read_csv(path / "training_curve.tsv" if path.is_dir() else path, sep="\t")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("curve", help="a built-in model's folder, or its training_curve.tsv")
    parser.add_argument("--figure", help="write the figure here (.png, and a .pdf beside it)")
    args = parser.parse_args()
    curve = read_curve(args.curve)
    if args.figure:
        stem = Path(args.figure)
        for path in training_curve_figure(curve, stem.with_suffix("") if stem.suffix in (".png", ".pdf") else stem):
            print(f"wrote {path}")
    onset = reading_onset(curve)
    print(f"reads its demonstrations from step {onset}" if onset is not None else "never reads its demonstrations")
    print(markdown(curve))


if __name__ == "__main__":
    main()
