"""The premise table: per model and task, whether the model learns in context (the claims'
premise, ``metrics.premise``) beside how alike ICL and finetuning are, and finetuning's side of the
premise, whether each finetuning method learns; numbers in their own columns, so that reports of
several models can be set side by side (``report.side_by_side``). Like ``tables``, it takes
DataFrames and returns one.
"""

from __future__ import annotations

import math

import pandas as pd

from icl_gd.common.names import method_label, task_label
from icl_gd.metrics import catalog
from icl_gd.report import claim_wording
from icl_gd.report.selection import run_level
from icl_gd.report.tables import MISSING

NOT_RUN = "not run"  # a premise cell the run lacks (ICL on permuted labels, in a run before it was planned)

# The premise table's columns: the premise's intervals (points) and the similarity beside them.
PREMISE_COLUMNS = (
    "ICL (%)",
    "ZSL (%)",
    "Majority (%)",
    "ICL - ZSL",
    "ICL - ZSL low",
    "ICL - ZSL high",
    "ICL - majority",
    "ICL - majority low",
    "ICL - majority high",
    "ICL, permuted labels (%)",
    "Permuted - majority",
    "Permuted - majority low",
    "Permuted - majority high",
    "ICL, novel label words (%)",
    "Novel - majority",
    "Novel - majority low",
    "Novel - majority high",
    "Follows novel words",
    "Learns in context",
    "Learns in context, calibrated",
    "ICL's most-predicted label",
    "SimAOU_norm",
    "SimAOU_norm low",
    "SimAOU_norm high",
)


def premise_table(
    premise: pd.DataFrame, summary: pd.DataFrame, method: str | None, methods: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Paper 001's question per model and task: whether the model learns in context (the claims'
    premise, ``metrics.premise``: ICL against ZSL and against the majority class, and ICL on
    consistently permuted labels against the permuted gold's majority class, points, with the
    claims' crossed intervals at the premise's level; "not run" where the run lacks ICL on
    permuted labels, and then it does not learn) beside how alike ICL and finetuning are
    (SimAOU_norm, the catalog's ``premise``, of ``method``, the run's GD, trained model, layer mean,
    with the summary's interval), then finetuning's side of the premise from ``methods``
    (``premise.METHOD_COLUMNS``; None: a run before it was tested): per method of the trained
    variant, FT - ZSL with its interval and whether it learns (:func:`finetuning_columns`).
    Numbers in their own columns, so that reports of several models can be set side by side
    (``report.side_by_side``)."""
    (beside,) = catalog.shown_in("premise")
    similarity = run_level(summary)
    similarity = similarity[
        (similarity["variant"] == "trained") & (similarity["method"] == method) & (similarity["metric"] == beside)
    ].set_index(["model", "task"])
    rows, keys = [], []
    for row in premise.itertuples(index=False):
        keys.append((row.model, task_label(row.task)))
        sim = similarity.loc[(row.model, row.task)] if (row.model, row.task) in similarity.index else None
        top = (
            f"{row.top_label or row.top_class} ({100 * row.top_share:.0f}%)"
            if math.isfinite(row.top_share)
            else MISSING
        )
        numbers = [row.icl, row.zsl, row.majority, row.icl_zsl, row.icl_zsl_low, row.icl_zsl_high]
        numbers += [row.icl_majority, row.icl_majority_low, row.icl_majority_high]
        ends = ("", "_majority", "_majority_low", "_majority_high")
        follows = [getattr(row, f"icl_permuted{end}", math.nan) for end in ends]
        run = getattr(row, "icl_permuted_majority_status", "not run") != "not run"
        follows = [_number(x, 1) for x in follows] if run else [NOT_RUN] * 4
        novel = [getattr(row, f"icl_novel{end}", math.nan) for end in ends]
        if getattr(row, "icl_novel_majority_status", "not run") != "not run":
            novel = [_number(x, 1) for x in novel] + ["yes" if row.follows_novel else "no"]
        else:
            novel = [NOT_RUN] * 5
        learns = "yes" if row.learns and run else "no"
        calibrated = getattr(row, "icl_zsl_calibrated_status", "not run") != "not run"
        learns_calibrated = ("yes" if row.learns_calibrated and run else "no") if calibrated else NOT_RUN
        similarities = [MISSING] * 3 if sim is None else [f"{sim[c]:.3f}" for c in ("mean", "ci_low", "ci_high")]
        rows.append(
            [_number(x, 1) for x in numbers] + follows + novel + [learns, learns_calibrated, top] + similarities
        )
    columns, cells = finetuning_columns(premise, methods)
    rows = [row + more for row, more in zip(rows, cells, strict=True)]
    index = pd.MultiIndex.from_tuples(keys, names=["Model", "Task"]) if keys else None
    table = pd.DataFrame(rows, index=index, columns=[*PREMISE_COLUMNS, *columns], dtype=object)
    levels = sorted({float(x) for x in premise["level"].dropna()})
    footnotes = [
        f"The premise's intervals at {', '.join(map(claim_wording.percent_text, levels))} (a claim on every task, "
        "Bonferroni over the tasks and the three comparisons); learns in context: all three lower ends above 0. "
        "ICL, permuted labels: ICL with each demonstration's label word replaced by the next class's, scored against "
        "the permuted gold (the class whose word it then stands for); a model that follows its demonstrations' labels "
        "answers with the permuted word, one that a context only shifts does not. ICL, novel label words: ICL "
        "with each class's label word drawn from a held-out pool of the tokenizer's words (none a protocol label "
        "word; a reader trained on a pool of others never saw them as labels), scored against the gold; it follows "
        "novel words where the lower end of Novel - majority lies above 0 (beside the premise, at its level, not "
        "part of it). Calibrated: the same three "
        "tests with ZSL's and ICL's predictions calibrated (each label word's probability divided by its mean over "
        "three content-free queries in the same context, Zhao et al. 2021). SimAOU_norm's interval is the "
        "summary's."
    ]
    if columns:
        footnotes.append(
            "FT - ZSL (method): finetuning's side of the premise, FT's accuracy minus ZSL's in that method's runs of "
            "the trained model, points, on the premise's intervals at its level; FT learns where the lower end lies "
            "above 0. A claim that compares ICL with finetuning is read again over the tasks where the model learns "
            "in context and every finetuning method the claim reads learns."
        )
    if claim_wording.permuted_not_run(premise):
        footnotes.append(f"{NOT_RUN}: {claim_wording.PERMUTED_NOT_RUN}.")
    table.attrs.update(best=[], footnotes=footnotes, table="premise", blank_levels=1)
    return table


def finetuning_columns(premise: pd.DataFrame, methods: pd.DataFrame | None) -> tuple[list[str], list[list[str]]]:
    """The premise table's columns of finetuning's side, four per method in the order of
    ``methods`` (``premise.METHOD_COLUMNS``): "FT - ZSL (GD)", its low and high ends, "FT learns
    (GD)"; and their cells on each row of ``premise`` (points; "not run" where the method did not
    run on the task). None: no such columns."""
    if methods is None or methods.empty:
        return [], [[] for _ in range(len(premise))]
    order = list(dict.fromkeys(methods["method"]))
    found = methods.set_index(["model", "task", "method"])
    columns = []
    for name in map(method_label, order):
        columns += [f"FT - ZSL ({name})", f"FT - ZSL ({name}) low", f"FT - ZSL ({name}) high", f"FT learns ({name})"]
    cells = []
    for row in premise.itertuples(index=False):
        shown = []
        for method in order:
            if (row.model, row.task, method) not in found.index:
                shown += [NOT_RUN] * 4
                continue
            ft = found.loc[(row.model, row.task, method)]
            shown += [_number(ft[end], 1) for end in ("ft_zsl", "ft_zsl_low", "ft_zsl_high")]
            shown.append("yes" if bool(ft["learns"]) else "no")
        cells.append(shown)
    return columns, cells


def _number(x, decimals: int) -> str:
    return f"{x:.{decimals}f}" if x is not None and math.isfinite(x) else MISSING
