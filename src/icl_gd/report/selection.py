"""The rows a table or figure reads from a metric table: a model's rows, with the columns it needs
checked, and of those the run-level ones (``layer`` empty: a score of the whole run, where the
per-layer rows of the same metric carry their layer). Every table, figure and the reproduction
read the summary through :func:`run_level`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

SUMMARY_COLUMNS = ("model", "variant", "task", "method", "metric", "mean")


def model_rows(df: pd.DataFrame, required: Sequence[str], what: str, model: str | None) -> pd.DataFrame:
    """``df``'s rows of ``model`` (all rows where it is None); an error that names the table where
    a required column is missing or the model has no rows."""
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


def run_level(
    df: pd.DataFrame, model: str | None = None, *, required: Sequence[str] = SUMMARY_COLUMNS, what: str = "summary"
) -> pd.DataFrame:
    """The run-level rows of ``model`` (:func:`model_rows`): those whose ``layer`` is empty."""
    out = model_rows(df, required, what, model)
    return out[out["layer"].isna()] if "layer" in out.columns else out
