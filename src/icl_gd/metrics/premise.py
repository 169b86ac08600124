"""The claims' premise: that the model learns in context on a task. The papers ask whether ICL
changes what a model computes the way finetuning does; on a task where ICL does no better than the
model without demonstrations, or than always answering the most frequent label, a similarity
between ICL and finetuning says nothing about ICL (paper 001's point: untrained models that show
no ICL score as high). The premise is a precondition of the claims, not one of them.

Per (model, task) it is tested as a claim on every task (``claim_testing`` reads it with the claims'
machinery, the crossed seeds x examples intervals at 1 - alpha/m, m = tasks x :data:`CELLS`, the
three comparisons below): ICL's accuracy minus ZSL's, and minus the majority-class rate of the
evaluation examples (:data:`MAJORITY`), both of the trained variant (:data:`PREMISE`); and the
*label-following* accuracy, ICL's with its demonstrations' labels permuted consistently (setting
icl_permuted: each class's label word given to the next class) against the permuted gold, minus
that gold's majority-class rate (:data:`FOLLOWS`). ICL above ZSL shows that the context changes the
model's answers, not that the model reads the demonstrations' labels: any context can shift a
model towards the right words (the task's format, its words' prior). A model that reads its labels
answers with the permuted word; one that a context only shifts keeps answering the original gold,
which the permutation makes wrong on every example. The model *learns in context* on a task where
all three intervals lie above 0; where ICL on permuted labels was not run (an older run), nowhere.
Beside it, ICL's most-predicted class and its share of the examples, pooled over seeds: a
*collapse* onto one label where that share is at least :data:`COLLAPSE_SHARE`. Every claim is then
read a second time over only the tasks where the premise holds (:func:`annotate`).

Finetuning's side of it: a claim on how alike ICL and finetuning are says little where finetuning
does not learn either. Per method of the trained variant (each method the run has, by the config's
name, whether or not it plays a published one), FT's accuracy minus ZSL's of that method's runs, on
the same crossed intervals at the premise's level (:func:`finetuning_claim`); the method *learns* on
a task where that interval lies above 0. Each claim that reads a finetuned model
(``catalog.finetuned``) is read a third time over only the tasks where the premise holds and every
method it reads learns (:func:`annotate_both`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from icl_gd.common import names
from icl_gd.metrics import catalog
from icl_gd.metrics.claim_definitions import MEAN, Claim

# A run's share of its evaluation examples whose gold label is the most frequent one: a pseudo-score
# that the claims' tests resample like an accuracy (``majority_terms``), in no metric table.
MAJORITY = "majority_rate"
# The same of the permuted gold (ICL on consistently permuted labels): what always answering one
# word scores against it. As a rate the same number (the permutation maps the majority class to
# the permuted gold's), but paired with the label-following accuracy by the examples it counts.
MAJORITY_PERMUTED = "majority_rate_permuted"
# each pseudo-score's gold: the attribute of a run's examples (``scoring.RunExamples``) it counts
MAJORITY_OF = {MAJORITY: "gold", MAJORITY_PERMUTED: "gold_permuted"}
COLLAPSE_SHARE = 0.9  # ICL's most-predicted class on this share of the examples or more: a collapse
NO_TASK = "no task where the model learns in context"

PREMISE = Claim(
    "premise",
    "",
    "premise",
    "The model learns in context: ICL is more accurate than zero-shot and than always answering the majority class",
    ("trained", "gd", "acc_icl"),
    (("trained", "gd", "acc_zsl"), ("trained", "gd", MAJORITY)),
    +1,
    "every",
    note="the claims' precondition, not a claim: read per task, each task's two intervals and its "
    "label-following one (FOLLOWS) at the level of a claim on every task, Bonferroni over the three",
)
FOLLOWS = Claim(
    "premise-labels",
    "",
    "premise",
    "The model follows its demonstrations' labels: with them permuted consistently, ICL answers with the "
    "permuted label more often than the permuted gold's majority class",
    ("trained", "gd", "acc_icl_permuted"),
    (("trained", "gd", MAJORITY_PERMUTED),),
    +1,
    "every",
    note="the claims' precondition, not a claim: ICL at the config's k with each class's label word given to "
    "the next class in every demonstration, read against the permuted gold; at the level of the premise's "
    "other two cells",
)
# The premise again with ZSL's and ICL's predictions calibrated (contextual calibration,
# ``metrics.calibration``): read beside the premise, at its level (tasks x CELLS), its label-following
# cell shared, so that where the two readings differ, calibration alone made the difference. The
# claims keep reading raw predictions, as the papers do.
CALIBRATED = Claim(
    "premise-calibrated",
    "",
    "premise",
    "With contextual calibration, the model learns in context: calibrated ICL is more accurate than calibrated "
    "zero-shot and than always answering the majority class",
    ("trained", "gd", "acc_icl_calibrated"),
    (("trained", "gd", "acc_zsl_calibrated"), ("trained", "gd", MAJORITY)),
    +1,
    "every",
    note="beside the premise, not part of it: its two cells at the premise's level, with the premise's "
    "label-following cell (FOLLOWS); not run where the caches recorded no content-free queries",
)
# Label following again, with label words the model never saw as labels (setting icl_novel: each
# class's word drawn from a held-out pool of the tokenizer's words, ``data.label_pools``), against the
# gold's majority class: read beside the premise at its level, not part of it. A model that reads
# its demonstrations' labels follows any word; one that learned its label words' roles in training
# follows those alone (Wei et al. 2023's semantically unrelated labels).
NOVEL = Claim(
    "premise-novel",
    "",
    "premise",
    "The model follows label words it never saw as labels: with its demonstrations labelled by words of a "
    "held-out pool, ICL answers with the gold class's word more often than the majority class",
    ("trained", "gd", "acc_icl_novel"),
    (("trained", "gd", MAJORITY),),
    +1,
    "every",
    note="beside the premise, not part of it: ICL at the config's k with each class's label word drawn per task and "
    "seed from the tokenizer's held-out pool (data/label_pools.py), at the level of the premise's cells",
)
CLAIMS = (PREMISE, FOLLOWS)  # tested together: one family of comparisons per task
CELLS = sum(len(c.against) for c in CLAIMS)  # 3: the premise's Bonferroni m is tasks x CELLS
ZSL, MAJORITY_CELL = 0, 1  # the premise's comparisons, in the order of PREMISE.b

COLUMNS = [
    "model",
    "task",
    "n_seeds",
    "n_examples",
    "level",
    "icl",
    "zsl",
    "majority",
    "icl_zsl",
    "icl_zsl_low",
    "icl_zsl_high",
    "icl_zsl_status",
    "icl_majority",
    "icl_majority_low",
    "icl_majority_high",
    "icl_majority_status",
    "icl_permuted",
    "icl_permuted_majority",
    "icl_permuted_majority_low",
    "icl_permuted_majority_high",
    "icl_permuted_majority_status",
    "incomplete",
    "learns",
    "top_class",
    "top_label",
    "top_share",
    "collapsed",
    "icl_calibrated",
    "zsl_calibrated",
    "icl_zsl_calibrated",
    "icl_zsl_calibrated_low",
    "icl_zsl_calibrated_high",
    "icl_zsl_calibrated_status",
    "icl_majority_calibrated",
    "icl_majority_calibrated_low",
    "icl_majority_calibrated_high",
    "icl_majority_calibrated_status",
    "learns_calibrated",
    "icl_novel",
    "icl_novel_majority",
    "icl_novel_majority_low",
    "icl_novel_majority_high",
    "icl_novel_majority_status",
    "follows_novel",
]
# the columns each claims row gains: the task's premise, and the claim read over the premise's tasks
CLAIM_COLUMNS = [
    "learns",
    "premise_verdict",
    "premise_status",
    "premise_difference",
    "premise_ci_low",
    "premise_ci_high",
    "premise_level",
]
# finetuning's side of the premise: one row per model, task and method of the trained variant
METHOD_COLUMNS = [
    "model",
    "task",
    "method",
    "n_seeds",
    "n_examples",
    "level",
    "ft",
    "zsl",
    "ft_zsl",
    "ft_zsl_low",
    "ft_zsl_high",
    "ft_zsl_status",
    "incomplete",
    "learns",
]
# the columns each claims row gains beside those: the claim read over the tasks where ICL and every
# finetuning method it reads learn
BOTH_COLUMNS = [
    "both_learn",
    "both_verdict",
    "both_status",
    "both_difference",
    "both_ci_low",
    "both_ci_high",
    "both_level",
]
BOTH_NO_TASK = "no task where ICL and finetuning both learn"
NOT_APPLICABLE = "not applicable"  # a claim that reads no finetuned model: no third reading


def finetuning_claim(method: str) -> Claim:
    """Finetuning's side of the premise for one of the config's methods (by its own name, not a
    published one): FT more accurate than ZSL, of that method's runs of the trained variant, on every
    task; ``claim_testing`` reads it at the premise's level."""
    return Claim(
        f"premise-ft-{method}",
        "",
        "premise",
        f"Finetuning ({method}) learns: FT is more accurate than zero-shot",
        ("trained", method, "acc_ft"),
        (("trained", method, "acc_zsl"),),
        +1,
        "every",
        note="finetuning's side of the premise, not a claim: each task's interval at the premise's level",
    )


def majority_terms(gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per example (numerator, denominator) of the majority-class rate: whether its gold label is
    the most frequent one of these examples (the smallest such label on a tie)."""
    gold = np.asarray(gold, dtype=np.int64)
    if not len(gold):
        return np.zeros(0), np.zeros(0)
    return (gold == np.bincount(gold).argmax()).astype(np.float64), np.ones(len(gold))


def top_prediction(predictions: list[np.ndarray]) -> tuple[int, float]:
    """The class predicted most often over every seed's examples, and its share of them."""
    pooled = np.concatenate([np.asarray(p, dtype=np.int64) for p in predictions])
    if not len(pooled):
        return -1, math.nan
    counts = np.bincount(pooled)
    return int(counts.argmax()), float(counts.max() / len(pooled))


def learning_tasks(reading: list[dict]) -> dict[str, bool]:
    """Per task of the premise's rows (``claim_testing``' rows of :data:`CLAIMS`): whether all its
    :data:`CELLS` intervals hold, ICL above ZSL and above the majority class, and label-following
    above the permuted gold's majority class (a task without the last, not run, does not learn)."""
    statuses: dict[str, list[str]] = {}
    for row in reading:
        if row["task"] not in ("", MEAN):
            statuses.setdefault(row["task"], []).append(row.get("status", ""))
    return {t: len(s) == CELLS and all(x == "holds" for x in s) for t, s in statuses.items()}


def premise_rows(
    reading: list[dict],
    tops: dict[str, tuple[int, float]],
    labels: dict[str, list[str]],
    calibrated: list[dict] | None = None,
    novel: list[dict] | None = None,
) -> list[dict]:
    """One row per task of the premise (:data:`COLUMNS`), from its tests' rows (of :data:`CLAIMS`),
    ICL's most-predicted class per task (:func:`top_prediction`), the tasks' label words (class ->
    word), the calibrated reading's rows (of :data:`CALIBRATED`; none: not run) and the novel label
    words' (of :data:`NOVEL`; none: not run)."""
    learns = learning_tasks(reading)
    learns_calibrated = calibrated_learning(reading, calibrated or [])
    by_task: dict[str, dict[tuple[str, int], dict]] = {}
    for row in [*reading, *(calibrated or []), *(novel or [])]:
        if row["task"] not in ("", MEAN):
            by_task.setdefault(row["task"], {})[(row["claim"], row["comparison"])] = row
    rows = []
    for task in names.order_tasks(by_task):
        cells = by_task[task]
        zsl, majority = cells.get((PREMISE.id, ZSL), {}), cells.get((PREMISE.id, MAJORITY_CELL), {})
        follows = cells.get((FOLLOWS.id, 0), {})
        calibrated_zsl = cells.get((CALIBRATED.id, ZSL), {})
        calibrated_majority = cells.get((CALIBRATED.id, MAJORITY_CELL), {})
        novel_majority = cells.get((NOVEL.id, 0), {})
        top_class, top_share = tops.get(task, (-1, math.nan))
        words = labels.get(task, [])
        rows.append(
            dict(
                model=zsl.get("model", majority.get("model")),
                task=task,
                n_seeds=zsl.get("n_seeds"),
                n_examples=zsl.get("n_examples"),
                level=zsl.get("level"),
                icl=zsl.get("a", math.nan),
                zsl=zsl.get("b", math.nan),
                majority=majority.get("b", math.nan),
                **_interval("icl_zsl", zsl),
                **_interval("icl_majority", majority),
                icl_permuted=follows.get("a", math.nan),
                **_interval("icl_permuted_majority", follows),
                incomplete=_incomplete(zsl, follows),
                learns=learns[task],
                top_class=top_class,
                top_label=words[top_class] if 0 <= top_class < len(words) else "",
                top_share=top_share,
                collapsed=bool(top_share >= COLLAPSE_SHARE),
                icl_calibrated=calibrated_zsl.get("a", math.nan),
                zsl_calibrated=calibrated_zsl.get("b", math.nan),
                **_interval("icl_zsl_calibrated", calibrated_zsl),
                **_interval("icl_majority_calibrated", calibrated_majority),
                learns_calibrated=learns_calibrated.get(task, False),
                icl_novel=novel_majority.get("a", math.nan),
                **_interval("icl_novel_majority", novel_majority),
                follows_novel=novel_majority.get("status") == "holds",
            )
        )
    return rows


def finetuning_rows(readings: dict[str, list[dict]]) -> list[dict]:
    """One row per task and method (:data:`METHOD_COLUMNS`), from each method's rows of
    :func:`finetuning_claim` (method -> rows), the tasks in paper order, the methods in the given
    one within a task."""
    rows = [
        dict(
            model=row["model"],
            task=row["task"],
            method=method,
            n_seeds=row.get("n_seeds"),
            n_examples=row.get("n_examples"),
            level=row.get("level"),
            ft=row.get("a", math.nan),
            zsl=row.get("b", math.nan),
            **_interval("ft_zsl", row),
            incomplete=row.get("incomplete", ""),
            learns=row.get("status") == "holds",
        )
        for method, reading in readings.items()
        for row in reading
        if row["task"] not in ("", MEAN)
    ]
    order = {t: i for i, t in enumerate(names.order_tasks(r["task"] for r in rows))}
    return sorted(rows, key=lambda r: order[r["task"]])


def finetuning_learns(reading: list[dict]) -> dict[str, bool]:
    """Per task of a method's rows of :func:`finetuning_claim`: whether it learns (FT above ZSL, an
    incomplete task not)."""
    return {r["task"]: r.get("status") == "holds" for r in reading if r["task"] not in ("", MEAN)}


def finetuned_methods(claim: Claim, roles: dict[str, str]) -> list[str]:
    """The config's methods (``roles``: published method -> the run's) whose finetuned model a claim
    reads: those of its cells on a score of a finetuned model (``catalog.finetuned``); none for a
    claim on ZSL and ICL alone. A cell of another variant is read by its method's learning on the
    trained model, as the premise is the trained model's."""
    return list(dict.fromkeys(roles.get(m, m) for _, m, metric in claim.cells if catalog.finetuned(metric)))


def both_learning(
    learns: dict[str, bool], by_method: dict[str, dict[str, bool]], methods: list[str]
) -> dict[str, bool]:
    """Per task of the premise: whether the model learns in context there and each of ``methods``
    learns by finetuning (``by_method``: :func:`finetuning_learns` per method; a method not run on a
    task does not)."""
    return {t: bool(ok) and all(by_method.get(m, {}).get(t, False) for m in methods) for t, ok in learns.items()}


def calibrated_learning(reading: list[dict], calibrated: list[dict]) -> dict[str, bool]:
    """Per task: whether it learns in context read with calibrated predictions, its two calibrated
    cells (:data:`CALIBRATED`) and the premise's label-following cell all holding: the premise's own
    rule (:func:`learning_tasks`) on those :data:`CELLS` cells."""
    return learning_tasks([*calibrated, *(r for r in reading if r["claim"] == FOLLOWS.id)])


def calibration_changes(premise: pd.DataFrame) -> list[tuple[str, str, bool, bool]]:
    """The (model, task, learns, learns calibrated) of the premise rows whose verdict calibration
    changes, where the calibrated reading ran."""
    ran = premise[premise["icl_zsl_calibrated_status"] != "not run"] if len(premise) else premise
    changed = ran[ran["learns"].astype(bool) != ran["learns_calibrated"].astype(bool)]
    return [(r.model, r.task, bool(r.learns), bool(r.learns_calibrated)) for r in changed.itertuples(index=False)]


def _incomplete(zsl: dict, follows: dict) -> str:
    """The seeds a task's premise lacks: ICL's and ZSL's, and where they differ, those of ICL on
    permuted labels."""
    own, permuted = zsl.get("incomplete", ""), follows.get("incomplete", "")
    return "; ".join(filter(None, (own, f"permuted labels: {permuted}" if permuted and permuted != own else "")))


def _interval(name: str, row: dict) -> dict:
    return {
        name: row.get("difference", math.nan),
        f"{name}_low": row.get("ci_low", math.nan),
        f"{name}_high": row.get("ci_high", math.nan),
        f"{name}_status": row.get("status", "not run"),
    }


def annotate(first: list[dict], second: list[dict] | None, learns: dict[str, bool]) -> list[dict]:
    """A claim's rows, each with the task's premise (``learns``; empty on the mean's row) and the
    claim read a second time over only the tasks where the premise holds (``second``: its rows on
    those tasks; None where there is none): the verdict of that reading, and per task and for their
    mean the status and interval at its own level."""
    verdict, again = _reading(first, second, bool(learns), NO_TASK)
    return [
        dict(
            row,
            learns=learns.get(row["task"], pd.NA),
            premise_verdict=verdict,
            **_again("premise", again.get((row["comparison"], row["task"]), {})),
        )
        for row in first
    ]


def annotate_both(rows: list[dict], third: list[dict] | None, both: dict[str, bool], methods: list[str]) -> list[dict]:
    """A claim's rows (:func:`annotate`'s), each with whether ICL and every finetuning method the
    claim reads (``methods``, :func:`finetuned_methods`) learn on its task (``both``:
    :func:`both_learning`), and the claim read a third time over only those tasks (``third``: its
    rows on them; None where there is none), as :func:`annotate` reads the second time.
    :data:`NOT_APPLICABLE` for a claim that reads no finetuned model."""
    verdict, again = _reading(rows, third, bool(both), BOTH_NO_TASK) if methods else (NOT_APPLICABLE, {})
    return [
        dict(
            row,
            both_learn=both.get(row["task"], pd.NA) if methods else pd.NA,
            both_verdict=verdict,
            **_again("both", again.get((row["comparison"], row["task"]), {})),
        )
        for row in rows
    ]


def _reading(first: list[dict], again: list[dict] | None, read: bool, no_task: str) -> tuple[str, dict]:
    """The verdict of a claim read again over a subset of the tasks (``again``: its rows there; None
    where the subset is empty), and those rows by (cell b, task). "not run" where the claim lacks a
    cell, or the subset could not be ``read`` (the premise lacks one); ``no_task`` where it is empty."""
    if first[0]["verdict"] == "not run" or not read:
        verdict = "not run"
    elif not again or again[0]["verdict"] == "not run":
        verdict = no_task
    else:
        verdict = again[0]["verdict"]
    return verdict, {(r["comparison"], r["task"]): r for r in again or [] if r["task"]}


def _again(prefix: str, match: dict) -> dict:
    """A row's reading over a subset of tasks (``match``: that reading's row of its task and cell b;
    empty where the task is not among them)."""
    return {
        f"{prefix}_status": match.get("status", ""),
        f"{prefix}_difference": match.get("difference", math.nan),
        f"{prefix}_ci_low": match.get("ci_low", math.nan),
        f"{prefix}_ci_high": match.get("ci_high", math.nan),
        f"{prefix}_level": match.get("level", math.nan),
    }


def where_text(rows: pd.DataFrame, column: str) -> str:
    """On which of ``rows``' tasks ``column`` holds, in words: "on 2 of 6 tasks: SST2, Subj", or
    "on none of 6 tasks"."""
    tasks = names.order_tasks(rows["task"])
    holding = set(rows.loc[rows[column].astype(bool), "task"])
    shown = [names.task_label(t) for t in tasks if t in holding]
    of = f"{len(tasks)} task{'s' if len(tasks) != 1 else ''}"
    return f"on {len(shown)} of {of}: {', '.join(shown)}" if shown else f"on none of {of}"


def learns_text(premise: pd.DataFrame) -> str:
    """One model's premise in words: "learns in context on 2 of 6 tasks: SST2, Subj"."""
    return "learns in context " + where_text(premise, "learns")


def finetuning_text(methods: pd.DataFrame) -> str:
    """One model's finetuning side of the premise in words (rows of :data:`METHOD_COLUMNS`): "GD on
    1 of 6 tasks: Subj; LCGD on none of 6 tasks"."""
    return "; ".join(
        f"{names.method_label(method)} {where_text(found, 'learns')}"
        for method, found in methods.groupby("method", sort=False)
    )


def top_text(row) -> str:
    """ICL's most-predicted class of a premise row, in words ("'Business' for 100% of the examples")."""
    if not math.isfinite(row.top_share):
        return "no prediction"
    label = f"'{row.top_label}'" if row.top_label else f"class {int(row.top_class)}"
    return f"{label} for {100 * row.top_share:.0f}% of the examples" + (", collapsed" if row.collapsed else "")
