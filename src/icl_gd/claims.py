"""The papers' qualitative claims, each written as a test over a run's per-task scores.

A claim compares two cells per task, ``a`` and ``b`` (variant, published method, metric; ``b`` may
be a constant), in a claimed direction, under a quantifier the paper uses: on every task, on every
task but named ones, on all but one, on most (more than half), or on the mean over tasks. The
verdict follows the papers' own reading of their tables (point estimates per task); where the
workflow has a paired test of the two cells (``comparisons``: two methods of one variant on the
same examples), the statistic also counts the tasks where the difference is significant.
A claim whose cells the run does not have is "not run".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from . import labels

Cell = tuple[str, str, str]  # (variant, published method, metric)


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    table: str
    text: str
    a: Cell
    b: tuple[Cell, ...] | float  # one or more cells (each must hold), or a constant
    direction: int  # +1: a > b claimed; -1: a < b
    quantifier: str  # "every", "all_but_one", "most", "mean"
    except_tasks: tuple[str, ...] = field(default=())
    note: str = ""


CLAIMS: tuple[Claim, ...] = (
    Claim("001-T1-untrained", "001", "Table 1",
          "In SimAOU the completely untrained model slightly exceeds the trained one (GD)",
          ("untrained", "gd", "simaou"), (("trained", "gd", "simaou"),), +1, "mean"),
    Claim("001-T1-trained-embeddings", "001", "Table 1",
          "In SimAOU the model with only its embeddings trained slightly exceeds the trained one (GD)",
          ("trained_embeddings", "gd", "simaou"), (("trained", "gd", "simaou"),), +1, "mean"),
    Claim("001-T2-simaou-norm", "001", "Table 2",
          "Layer-causal GD achieves higher SimAOU (normalised) than GD on every task",
          ("trained", "lcgd", "simaou_norm"), (("trained", "gd", "simaou_norm"),), +1, "every",
          note="the caption says SimAOU; it holds in the table for SimAOU_norm, not for raw SimAOU on AGNews"),
    Claim("001-T2-simam", "001", "Table 2",
          "Layer-causal GD's SimAM is lower than GD's (on every task in the table)",
          ("trained", "lcgd", "simam_after"), (("trained", "gd", "simam_after"),), -1, "every"),
    Claim("001-T2-simam-delta", "001", "Table 2",
          "SimAM_delta is higher for layer-causal GD, except on AGNews",
          ("trained", "lcgd", "simam_delta"), (("trained", "gd", "simam_delta"),), +1, "every",
          except_tasks=("agnews",)),
    Claim("001-T1T2-lcgd-baselines", "001", "Tables 1, 2",
          "In SimAM_delta layer-causal GD is better than the untrained baselines on every task",
          ("trained", "lcgd", "simam_delta"),
          (("untrained", "gd", "simam_delta"), ("trained_embeddings", "gd", "simam_delta")), +1, "every"),
    Claim("003-T1-icl-zsl", "003", "Table 1",
          "ICL is more accurate than zero-shot on every task",
          ("trained", "gd", "acc_icl"), (("trained", "gd", "acc_zsl"),), +1, "every"),
    Claim("003-T1-icl-ft", "003", "Table 1",
          "ICL is more accurate than finetuning (on average over tasks: 19.38 points in the paper)",
          ("trained", "gd", "acc_icl"), (("trained", "gd", "acc_ft"),), +1, "mean"),
    Claim("003-T1-jaccard", "003", "Table 1",
          "ICL's and finetuning's prediction changes are poorly aligned on most tasks",
          ("trained", "gd", "jaccard_all"), 0.5, -1, "most",
          note="'poorly aligned' read as a Jaccard index below 50%"),
    Claim("003-T1-jaccard-incorrect", "003", "Table 1",
          "Erroneous prediction changes are aligned even less (Jaccard of incorrect changes below that of correct ones)",
          ("trained", "gd", "jaccard_incorrect"), (("trained", "gd", "jaccard_correct"),), -1, "most"),
    Claim("003-T2-simaou", "003", "Table 2",
          "Layer-causal FT achieves higher SimAOU (normalised) in 5 out of 6 tasks",
          ("trained", "lcgd", "simaou_norm"), (("trained", "gd", "simaou_norm"),), +1, "all_but_one"),
    Claim("003-T2-simam", "003", "Table 2",
          "Layer-causal FT's SimAM is significantly lower than standard FT's (on average over tasks)",
          ("trained", "lcgd", "simam_after"), (("trained", "gd", "simam_after"),), -1, "mean"),
    Claim("003-T3-clip-simam", "003", "Table 3",
          "Gradient clipping resolves layer-causal FT's drop in SimAM",
          ("trained", "lcgd_clip", "simam_after"), (("trained", "lcgd", "simam_after"),), +1, "every",
          note="paper: Subj, one seed"),
    Claim("003-T3-clip-simaou", "003", "Table 3",
          "Clipped layer-causal FT keeps its SimAOU (normalised) above standard FT's",
          ("trained", "lcgd_clip", "simaou_norm"), (("trained", "gd", "simaou_norm"),), +1, "every",
          note="paper: Subj, one seed"),
    Claim("002-switch-icl", "002", "label switching",
          "False labels in the demonstrations change ICL: its accuracy drops",
          ("trained", "gd_switched", "acc_icl"), (("trained", "gd", "acc_icl"),), -1, "mean",
          note="the experiment's premise; paper 002 (a draft) reports no number"),
    Claim("002-switch-similarity", "002", "label switching",
          "With false labels in both FT and ICL, their similarity holds (SimAOU_norm no lower than with gold labels)",
          ("trained", "gd_switched", "simaou_norm"), (("trained", "gd", "simaou_norm"),), +1, "mean",
          note="the draft's hypothesis; paper 002 reports no number"),
)
QUANTIFIERS = {
    "every": "on every task",
    "all_but_one": "on all tasks but one",
    "most": "on most tasks",
    "mean": "on the mean over tasks",
}
VERDICTS = ("supported", "not supported", "not run")


def _cell_label(cell: Cell, roles: dict[str, str]) -> str:
    variant, method, metric = cell
    return f"{labels.metric_label(metric)} ({labels.method_label(roles.get(method, method))}, {labels.variant_label(variant, in_text=True)})"


def evaluate(claim: Claim, summary: pd.DataFrame, comparisons: pd.DataFrame | None, model: str,
             roles: dict[str, str], *, significance: float = 0.05) -> dict:
    """One claim on one run: per task the difference a - b (against each b), how many tasks go
    the claimed way, and the verdict."""
    run = summary[(summary["model"] == model) & summary["layer"].isna()]
    values = {(r.variant, r.task, r.method, r.metric): float(r.mean) for r in run.itertuples(index=False)}
    tasks = [t for t in labels.TASK_ORDER if t in set(run["task"])] + sorted(set(run["task"]) - set(labels.TASK_ORDER))
    tasks = [t for t in tasks if t not in claim.except_tasks]

    def value(cell: Cell, task: str) -> float:
        variant, method, metric = cell
        return values.get((variant, task, roles.get(method), metric), math.nan)

    others = [claim.b] if not isinstance(claim.b, tuple) else list(claim.b)
    diffs: dict[str, list[float]] = {}
    for task in tasks:
        a = value(claim.a, task)
        bs = [o if isinstance(o, float) else value(o, task) for o in others]
        if not math.isnan(a) and not any(math.isnan(b) for b in bs):
            diffs[task] = [a - b for b in bs]
    test = _statement(claim, roles)
    if not diffs:
        return {"claim": claim, "test": test, "statistic": "—", "verdict": "not run", "n_tasks": 0, "n_holding": 0}
    holds = {t: all(claim.direction * d > 0 for d in ds) for t, ds in diffs.items()}
    n, k = len(diffs), sum(holds.values())
    mean_diff = [sum(ds[j] for ds in diffs.values()) / n for j in range(len(others))]
    verdict_holds = {
        "every": k == n,
        "all_but_one": k >= n - 1,
        "most": k > n / 2,
        "mean": all(claim.direction * m > 0 for m in mean_diff),
    }[claim.quantifier]
    scale = 100.0 if claim.a[2].startswith(("acc_", "jaccard_")) else 1.0
    if isinstance(claim.b, tuple):
        per_task = ", ".join(
            f"{labels.task_label(t)} {'/'.join(f'{scale * d:+.2f}' for d in ds)}{_significance(claim, t, comparisons, model, roles, significance)}"
            for t, ds in diffs.items())
        statistic = f"a - b: {per_task}; mean {'/'.join(f'{scale * m:+.3f}' for m in mean_diff)}"
    else:  # a constant: a itself says more than its distance to the constant
        per_task = ", ".join(f"{labels.task_label(t)} {scale * (ds[0] + claim.b):.2f}" for t, ds in diffs.items())
        statistic = f"a: {per_task}"
    statistic += f"; {k} of {n} tasks go the claimed way"
    return {"claim": claim, "test": test, "statistic": statistic,
            "verdict": "supported" if verdict_holds else "not supported", "n_tasks": n, "n_holding": k}


def _significance(claim: Claim, task: str, comparisons, model: str, roles: dict[str, str], level: float) -> str:
    """'*' where the workflow's paired test of a against its single b is significant."""
    if comparisons is None or not isinstance(claim.b, tuple) or len(claim.b) != 1:
        return ""
    (variant_a, method_a, metric_a), (variant_b, method_b, metric_b) = claim.a, claim.b[0]
    if variant_a != variant_b or metric_a != metric_b or method_a == method_b:
        return ""
    rows = comparisons[(comparisons["model"] == model) & (comparisons["variant"] == variant_a)
                       & (comparisons["task"] == task) & (comparisons["metric"] == metric_a)
                       & (comparisons["method"] == roles.get(method_a)) & (comparisons["baseline"] == roles.get(method_b))]
    if rows.empty:
        return ""
    return "*" if float(rows["p_value"].iloc[0]) < level else ""


def _statement(claim: Claim, roles: dict[str, str]) -> str:
    sign = ">" if claim.direction > 0 else "<"
    if isinstance(claim.b, tuple):
        right = " and ".join(_cell_label(c, roles) for c in claim.b)
    else:
        right = f"{100 * claim.b:g}%" if claim.a[2].startswith(("acc_", "jaccard_")) else f"{claim.b:g}"
    where = QUANTIFIERS[claim.quantifier]
    if claim.except_tasks:
        where += " but " + ", ".join(labels.task_label(t) for t in claim.except_tasks)
    return f"a = {_cell_label(claim.a, roles)} {sign} b = {right}, {where}"


def claims_table(summary: pd.DataFrame, comparisons: pd.DataFrame | None, model: str, roles: dict[str, str],
                 *, significance: float = 0.05) -> pd.DataFrame:
    """One row per claim: the claim in words, its paper and table, the test, the statistic and the
    verdict; footnotes say how many claims were supported."""
    rows = [evaluate(c, summary, comparisons, model, roles, significance=significance) for c in CLAIMS]
    table = pd.DataFrame(
        [[r["test"], r["statistic"], r["verdict"]] for r in rows],
        index=pd.MultiIndex.from_tuples(
            [(r["claim"].paper, r["claim"].table, r["claim"].text + (f" ({r['claim'].note})" if r["claim"].note else ""))
             for r in rows], names=["Paper", "Table", "Claim"]),
        columns=["Test", "Statistic", "Verdict"],
    )
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    table.attrs["footnotes"] = [
        f"{counts['supported']} supported, {counts['not supported']} not supported, {counts['not run']} not run "
        f"(of {len(rows)} claims). * the paired test (comparisons table) is significant at {significance:g}."]
    return table
