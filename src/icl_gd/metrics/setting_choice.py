"""The rule that picks, per model and task, the prompt setting (separator and k) at which the
premise is read beyond the protocol's (issue 70, docs/tasks.md "A setting picked on held-out
examples"). Written down before it is run, and reading only a development set drawn from the train
split (never the evaluation examples):

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
