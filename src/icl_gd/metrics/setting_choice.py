"""The rules that pick a setting on a development set drawn from the train split, never on the
evaluation examples, each written down before it was run: a finetuning method's learning rate and
epochs (:func:`finetuning_choice`, issue 80, docs/configuration.md "GD at its best"), and, per
model and task, the prompt setting (separator and k) at which the premise is read beyond the
protocol's (:func:`choose`, issue 70, docs/tasks.md "A setting picked on held-out examples"):

1. Each candidate (separator, k) scores its *gain*: the mean over seeds of ICL's accuracy minus
   ZSL's with the same separator, on the development examples.
2. The candidate with the largest gain is chosen.
3. On a tie (gains within ``tolerance``), the one nearer the protocol: the reference's separator
   (eos) first, then the k nearest the protocol's (32), then the larger k.
4. Where no candidate gains (every gain at most 0), the protocol's setting is kept and the row says
   so (``gains`` False): a model that does not learn in context there gets no second chance.

Pure pandas; nothing else of the package.
"""

from __future__ import annotations

import pandas as pd

REFERENCE_SEPARATOR = "eos"
COLUMNS = ["model", "task", "separator", "k", "gain", "gains", "tied", "n_candidates"]


def candidate_gains(dev: pd.DataFrame) -> pd.DataFrame:
    """Per (model, task, separator, k): the mean over seeds of ICL - ZSL on the development set.
    ``dev`` has one row per (model, task, separator, k, seed) with columns ``icl`` and ``zsl``."""
    missing = {"model", "task", "separator", "k", "seed", "icl", "zsl"} - set(dev.columns)
    if missing:
        raise ValueError(f"the development table lacks columns {sorted(missing)}")
    gains = dev.assign(gain=dev["icl"] - dev["zsl"])
    return gains.groupby(["model", "task", "separator", "k"], as_index=False, sort=False)["gain"].mean()


def choose(dev: pd.DataFrame, protocol_k: int = 32, tolerance: float = 1e-9) -> pd.DataFrame:
    """One row per (model, task): the chosen separator and k, its gain, whether any candidate
    gained (``gains``), how many candidates tied at the top (``tied``) and how many there were."""
    rows = []
    for (model, task), group in candidate_gains(dev).groupby(["model", "task"], sort=False):
        best = group["gain"].max()
        top = group[group["gain"] >= best - tolerance]
        nearest = top.assign(
            other_separator=top["separator"] != REFERENCE_SEPARATOR,
            distance=(top["k"] - protocol_k).abs(),
            smaller=-top["k"],
        ).sort_values(["other_separator", "distance", "smaller"])
        chosen = nearest.iloc[0]
        gains = bool(best > tolerance)
        if not gains:  # nothing to choose between: the protocol's setting stands
            protocol = group[(group["separator"] == REFERENCE_SEPARATOR) & (group["k"] == protocol_k)]
            chosen = protocol.iloc[0] if len(protocol) else chosen
        rows.append(
            dict(
                model=model,
                task=task,
                separator=chosen["separator"],
                k=int(chosen["k"]),
                gain=float(chosen["gain"]),
                gains=gains,
                tied=int(len(top)) if gains else 0,
                n_candidates=int(len(group)),
            )
        )
    return pd.DataFrame(rows, columns=COLUMNS)


# The finetuning choice's table (rule choose_finetuning): one row per seed and grid point, the
# grid point's mean over the seeds beside it, and the chosen point marked.
FINETUNING_COLUMNS = [
    "model",
    "variant",
    "task",
    "method",
    "kind",
    "seed",
    "lr",
    "epochs",
    "n_examples",
    "accuracy",
    "zsl_accuracy",
    "loss",
    "skipped",
    "mean_accuracy",
    "chosen",
]


def finetuning_choice(grid: pd.DataFrame, tolerance: float = 1e-9) -> tuple[float, int]:
    """A finetuning method's (learning rate, epochs), from its grid's development accuracies
    (``grid``: one row per seed, ``lr`` and ``epochs``, column ``accuracy``):

    1. each grid point scores the mean over the seeds of its accuracy on the development rows;
    2. the point with the highest mean is chosen;
    3. on a tie (means within ``tolerance``), the smaller learning rate, then the fewer epochs:
       the smaller change to the model, and the nearer the papers' one epoch.
    """
    if grid.empty:
        raise ValueError("a finetuning choice needs at least one grid point's development accuracy")
    means = grid.groupby(["lr", "epochs"], as_index=False)["accuracy"].mean()
    top = means[means["accuracy"] >= means["accuracy"].max() - tolerance].sort_values(["lr", "epochs"])
    return float(top["lr"].iloc[0]), int(top["epochs"].iloc[0])


def mark_finetuning_choice(grid: pd.DataFrame, tolerance: float = 1e-9) -> pd.DataFrame:
    """``grid`` with each grid point's mean over the seeds (``mean_accuracy``) and the chosen
    point's rows marked (``chosen``, :func:`finetuning_choice`)."""
    lr, epochs = finetuning_choice(grid, tolerance)
    marked = grid.assign(
        mean_accuracy=grid.groupby(["lr", "epochs"])["accuracy"].transform("mean"),
        chosen=(grid["lr"] == lr) & (grid["epochs"] == epochs),
    )
    return marked[[c for c in FINETUNING_COLUMNS if c in marked.columns]]


def mark_finetuning_choices(grid: pd.DataFrame, tolerance: float = 1e-9) -> pd.DataFrame:
    """A choice job's grids (one per variant and method), each marked (:func:`mark_finetuning_choice`)."""
    marked = [mark_finetuning_choice(found, tolerance) for _, found in grid.groupby(["variant", "method"], sort=False)]
    return pd.concat(marked, ignore_index=True)


def chosen_of(table: pd.DataFrame) -> dict:
    """The chosen (``lr``, ``epochs``) of a finetuning choice's table (:func:`mark_finetuning_choice`)."""
    rows = table[table["chosen"].astype(bool)]
    if rows.empty or rows[["lr", "epochs"]].drop_duplicates().shape[0] != 1:
        raise ValueError("a finetuning choice's table marks no single chosen grid point")
    return {"lr": float(rows["lr"].iloc[0]), "epochs": int(rows["epochs"].iloc[0])}


def read_chosen(path, variant: str, method: str) -> dict:
    """The chosen (``lr``, ``epochs``) of a variant's method in a choice job's table file (rule
    choose_finetuning)."""
    table = pd.read_parquet(path, columns=["variant", "method", "lr", "epochs", "chosen"])
    return chosen_of(table[(table["variant"] == variant) & (table["method"] == method)])
