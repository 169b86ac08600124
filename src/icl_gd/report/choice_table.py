"""Finetuning at a chosen setting, in the report: every grid point of each choice (rule
choose_finetuning, ``metrics.setting_choice``) as a table, and what was chosen in words for the
first page."""

from __future__ import annotations

import pandas as pd

from icl_gd.common import names


def read_choices(paths) -> pd.DataFrame:
    """The choice tables of a run, one after another (``setting_choice.FINETUNING_COLUMNS``)."""
    frames = [pd.read_parquet(p) for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _percent(x: float) -> str:
    return f"{100 * x:.1f}"


def choice_table(choices: pd.DataFrame) -> pd.DataFrame:
    """One row per model, variant, task, method and grid point (rate, epochs): the development
    accuracy per seed and their mean (%), the model's zero-shot accuracy on those rows, the last
    pass's mean loss over the seeds, and the chosen point marked."""
    rows = []
    keys = ["model", "variant", "task", "method"]
    order = {t: i for i, t in enumerate(names.order_tasks(choices["task"]))} if len(choices) else {}
    for key, found in sorted(
        choices.groupby(keys, sort=False), key=lambda kv: (kv[0][0], kv[0][1], order[kv[0][2]], kv[0][3])
    ):
        model, variant, task, method = key
        zsl = found["zsl_accuracy"].mean()
        for (lr, epochs), point in found.groupby(["lr", "epochs"], sort=True):
            point = point.sort_values("seed")
            rows.append(
                {
                    "Model": model,
                    "Variant": names.variant_label(variant),
                    "Task": names.task_label(task),
                    "Method": names.method_label(method),
                    "Learning rate": f"{lr:g}",
                    "Epochs": int(epochs),
                    "Seeds": ", ".join(str(int(s)) for s in point["seed"]),
                    "Development accuracy per seed (%)": " / ".join(_percent(a) for a in point["accuracy"]),
                    "Mean (%)": round(100 * point["mean_accuracy"].iloc[0], 1),
                    "ZSL (%)": round(100 * zsl, 1),
                    "Loss": round(float(point["loss"].mean()), 4),
                    "Chosen": "chosen" if bool(point["chosen"].iloc[0]) else "",
                }
            )
    index = ["Model", "Variant", "Task", "Method"]
    return (
        pd.DataFrame(rows).set_index(index) if rows else pd.DataFrame(index=pd.MultiIndex.from_tuples([], names=index))
    )


def chosen_rows(choices: pd.DataFrame) -> pd.DataFrame:
    """Per model, variant, task and method, the chosen point: rate, epochs, its mean development
    accuracy, the zero-shot accuracy on those rows, the number of grid points and of seeds."""
    keys = ["model", "variant", "task", "method"]
    grid = choices.groupby(keys, sort=False).apply(
        lambda f: pd.Series({"points": len(f[["lr", "epochs"]].drop_duplicates()), "seeds": f["seed"].nunique()}),
        include_groups=False,
    )
    chosen = (
        choices[choices["chosen"].astype(bool)]
        .groupby(keys, sort=False)
        .agg(
            lr=("lr", "first"),
            epochs=("epochs", "first"),
            accuracy=("mean_accuracy", "first"),
            zsl=("zsl_accuracy", "mean"),
            examples=("n_examples", "first"),
        )
    )
    return chosen.join(grid).reset_index()


def choice_text(choices: pd.DataFrame) -> list[str]:
    """What each choosing method chose, one sentence per model, variant and method: "GD_BEST, model
    tiny (trained), chosen on 100 development rows per task from learning rates ... x epochs ...,
    by its mean accuracy there over 3 seeds: SST2 lr 0.3, 1 epoch (99.0% against ZSL 8.0%); ..."."""
    if choices.empty:
        return []
    found = chosen_rows(choices)
    order = {t: i for i, t in enumerate(names.order_tasks(found["task"]))}
    sentences = []
    for (model, variant, method), rows in found.groupby(["model", "variant", "method"], sort=False):
        rows = rows.sort_values("task", key=lambda s: s.map(order))
        lrs = sorted(choices.loc[(choices["method"] == method) & (choices["model"] == model), "lr"].unique())
        epochs = sorted(choices.loc[(choices["method"] == method) & (choices["model"] == model), "epochs"].unique())
        grid = f"learning rates {', '.join(f'{x:g}' for x in lrs)} x epochs {', '.join(str(int(e)) for e in epochs)}"
        each = "; ".join(
            f"{names.task_label(r.task)} lr {r.lr:g}, {int(r.epochs)} epoch{'s' if r.epochs != 1 else ''} "
            f"({_percent(r.accuracy)}% against ZSL {_percent(r.zsl)}%)"
            for r in rows.itertuples(index=False)
        )
        examples = int(rows["examples"].max())
        sentences.append(
            f"{names.method_label(method)}, model {model} ({names.variant_label(variant, in_text=True)}), chosen on "
            f"{examples} development rows per task from {grid}, by its mean accuracy there over "
            f"{int(rows['seeds'].max())} seed{'s' if rows['seeds'].max() != 1 else ''}: {each}."
        )
    return sentences
