"""The claims' wording: their tests as the report shows them, the claims table (each claim's
sentence, its reading and its verdict per task and on the mean), the counts of verdicts, and the
footnotes on intervals, replicates and what an inconclusive claim would need. The claims are
defined in ``metrics.claim_definitions`` and tested in ``metrics.claim_testing``; an edit of this
text reruns no test.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from icl_gd.common import names
from icl_gd.metrics import premise as premise_module
from icl_gd.metrics.claim_definitions import (
    CLAIMS,
    MAX_REPLICATES,
    MEAN,
    QUANTIFIERS,
    VERDICTS,
    Claim,
    against_label,
    cell_label,
)

# --------------------------------------------------------------------------------------------
# the report's table


def _decimals(unit: str, widths) -> int:
    """Enough decimals to show an interval's width: 1 for points, 3 for a score, more where an
    interval is narrower than that."""
    base = 1 if unit == "points" else 3
    widths = [w for w in widths if math.isfinite(w) and w > 0]
    if not widths:
        return base
    return int(min(max(base, math.ceil(-math.log10(min(widths))) + 1), base + 3))


def _interval(row, decimals: int) -> str:
    status = getattr(row, "status", "")
    if status == "undefined":
        return "undefined"
    if not math.isfinite(row.difference):
        return "—"
    text = f"{row.difference:+.{decimals}f} [{row.ci_low:+.{decimals}f}, {row.ci_high:+.{decimals}f}]"
    incomplete = getattr(row, "incomplete", "") or ""
    if status == "incomplete" and row.task != MEAN:
        return f"incomplete ({incomplete}): {text}"
    return text


def needed_text(row) -> str:
    """What an inconclusive claim would need, in words, in both currencies: seeds, or evaluation
    examples per task and seed, for 80% power at the claim's level (a claims row: verdict, factor,
    n_needed, resolves_to, seed_factor, seeds_needed, seeds_resolve_to, n_seeds)."""
    if row.verdict != "inconclusive":
        return ""
    if getattr(row, "status", "") == "undefined":
        return "none: the score is undefined on every task"
    examples_ok = math.isfinite(row.factor)
    seed_factor = getattr(row, "seed_factor", math.nan)
    seeds_ok = isinstance(seed_factor, float) and math.isfinite(seed_factor)
    n_seeds = getattr(row, "n_seeds", 2)
    one_seed = not pd.isna(n_seeds) and int(n_seeds) < 2
    parts = []
    if seeds_ok:
        parts.append(f"{int(row.seeds_needed)} seeds (x{seed_factor:.1f}) -> {row.seeds_resolve_to}")
    elif one_seed:
        parts.append("seeds: unknown with one seed (run two or more to measure their spread)")
    else:
        parts.append("no number of seeds (the examples every seed shares are too few)")
    if examples_ok:
        parts.append(f"{int(row.n_needed)} examples per seed (x{row.factor:.1f}) -> {row.resolves_to}")
    else:
        parts.append("no number of examples (the seeds' spread alone is too wide)")
    return "; or ".join(parts)


def status_counts(statuses) -> dict[str, int]:
    """How many tasks hold (or are equivalent), break, are negligible, or are open (or incomplete)."""
    statuses = list(statuses)
    return {
        "hold": sum(s in ("holds", "equivalent") for s in statuses),
        "break": statuses.count("breaks"),
        "negligible": statuses.count("negligible"),
        "open": sum(s in ("open", "incomplete") for s in statuses),
    }


def _read_on(claim: Claim, level: float, margin: float, unit: str) -> str:
    read = QUANTIFIERS[claim.quantifier]
    if claim.except_tasks:
        read += " but " + ", ".join(map(names.task_label, claim.except_tasks))
    shown = f"{margin:g} point{'s' if margin != 1 else ''}" if unit == "points" else f"{margin:g}"
    kind = "non-inferiority" if claim.test == "non_inferiority" else "superiority"
    return f"{read} ({percent_text(level)} intervals; {kind}, margin {shown})"


def claims_table(
    tests: pd.DataFrame,
    model: str,
    roles: dict[str, str],
    *,
    ci_level: float = 0.95,
    premise: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per claim and cell b: the test in words, the level each task's interval is read
    at and the smallest effect of interest, per task the difference a - b [interval] (a task with a
    seed missing or undefined marked incomplete, with the seed), the mean over tasks [interval],
    how many tasks hold, break, are negligible or open, the verdict, the verdict read over only the
    tasks where the model learns in context, and over only those where every finetuning method the
    claim reads learns as well, and what an inconclusive one would need. Footnotes
    count the verdicts, state the rule and, from ``premise`` (``claim_testing.evaluate``' premise
    table), where the model learns in context."""
    tests = tests[tests["model"] == model]
    tasks = names.order_tasks(t for t in tests["task"] if t not in ("", MEAN))
    again, both = premise_verdicts(tests), both_verdicts(tests)
    columns = [
        "Read on",
        *map(names.task_label, tasks),
        "Mean over tasks",
        "Tasks: hold / break / negligible / open",
        "Verdict",
        *([AGAIN] if again else []),
        *([BOTH] if both else []),
        "Needed for a verdict (80% power)",
    ]
    rows, keys, verdict_of = [], [], verdicts(tests)
    for claim in CLAIMS:
        found = tests[tests["claim"] == claim.id]
        text = claim_heading(claim)
        verdict = verdict_of[claim.id]
        for j in range(len(claim.against)):
            statement = claim_statement(claim, roles, j)
            keys.append((claim.paper, claim.table, text, statement))
            part = found[found["comparison"] == j]
            again_cell = ([again[claim.id]] if again else []) + ([both[claim.id]] if both else [])
            if verdict == "not run" or part.empty:
                rows.append([QUANTIFIERS[claim.quantifier], *["—"] * len(tasks), "—", "—", "not run", *again_cell, ""])
                continue
            by_task = {r.task: r for r in part.itertuples(index=False)}
            decimals = _decimals(part["unit"].iloc[0], (part["ci_high"] - part["ci_low"]).tolist())
            task_rows = [by_task[t] for t in tasks if t in by_task and by_task[t].status != "undefined"]
            first = task_rows[0] if task_rows else by_task[MEAN]
            counts = status_counts(r.status for r in task_rows).values()
            level = by_task[MEAN].level if claim.quantifier == "mean" else first.level
            read = _read_on(claim, level, float(by_task[MEAN].margin), part["unit"].iloc[0])
            needed = needed_text(first) if j == 0 else ""
            rows.append(
                [
                    read,
                    *[_interval(by_task[t], decimals) if t in by_task else "—" for t in tasks],
                    _interval(by_task[MEAN], decimals),
                    " / ".join(map(str, counts)),
                    verdict if _settled(first) else f"{verdict} (bootstrap-limited)",
                    *again_cell,
                    needed,
                ]
            )
    index = pd.MultiIndex.from_tuples(keys, names=["Paper", "Table", "Claim", "Test"])
    table = pd.DataFrame(rows, index=index, columns=columns, dtype=object)
    table.attrs.update(
        best=[],
        table="claims",
        blank_levels=3,
        footnotes=[
            counts_text(verdict_of) + ".",
            interval_text(tests) + f" Quantifiers over tasks read each task's interval at 1 - alpha/m (Bonferroni over "
            f"the m tasks x cells b; alpha = {1 - ci_level:.3g}); 'on the mean' reads the interval of the mean over "
            f"tasks at {percent_text(ci_level)} (1 - alpha/m for m cells b).",
            "A superiority claim holds where an interval lies on the claimed side of 0, breaks where it lies on the "
            "other, is negligible where it lies within the margin (the smallest effect of interest, docs/metrics.md) of 0; "
            "a non-inferiority claim (this project's reading where a paper states no direction) holds where the "
            "interval's end on the other side lies within the margin of 0, and is equivalent where the whole interval "
            "does. Supported (equivalent): enough tasks hold for the quantifier; contradicted: enough break to defeat "
            "it; negligible: breaks and negligible tasks together defeat it (no effect of interest where the claim "
            "needs one); else inconclusive. A task with a seed not run or undefined is incomplete: counted, and read as "
            "open; a task undefined in every seed is not counted. No correction across claims.",
            replicates_text(tests),
            needed_footnote(tests),
            *([premise_footnote(premise[premise["model"] == model])] if premise is not None else []),
            *([BOTH_FOOTNOTE] if both else []),
        ],
    )
    return table


def counts_text(verdict_of: dict[str, str]) -> str:
    """The verdicts counted, in words: '5 supported, 1 equivalent, ...  (of 19 claims)'."""
    counts = {v: sum(x == v for x in verdict_of.values()) for v in VERDICTS}
    shown = [f"{counts[v]} {v}" for v in VERDICTS if counts[v] or v in ("supported", "contradicted", "inconclusive")]
    return ", ".join(shown) + f" (of {len(verdict_of)} claims)"


def _settled(row) -> bool:
    return not (getattr(row, "settled", True) is False or getattr(row, "settled", True) is np.False_)


def interval_text(tests: pd.DataFrame) -> str:
    """How the claims' intervals were drawn, in words: with several seeds, on the crossed design;
    with one, the examples only."""
    seeds = tests["n_seeds"].dropna()
    if len(seeds) and int(seeds.max()) > 1:
        return (
            "Per task: a - b, mean over seeds (points for a percentage), with its paired interval on the crossed "
            "seeds x examples design: one resample of the task's examples applied to a and b in every seed (by "
            "example id), and the seeds' spread as a Student t with seeds - 1 degrees of freedom, so that the "
            "interval carries both which demonstrations were drawn and which examples were evaluated (its "
            "coverage measured by benchmarks/coverage.py)."
        )
    return (
        "Per task: a - b (points for a percentage), with its paired percentile bootstrap interval over the "
        "evaluation examples (a and b resampled by example id). One seed: the interval covers the examples "
        "only, not the spread between seeds (which demonstrations were drawn)."
    )


def replicates_text(tests: pd.DataFrame) -> str:
    """The footnote on the bootstrap's own Monte Carlo error."""
    claims = tests[tests["verdict"] != "not run"].drop_duplicates(["model", "claim"])
    more = [r.claim for r in claims.itertuples(index=False) if r.redrawn is True or r.redrawn is np.True_]
    unsettled = [r.claim for r in claims.itertuples(index=False) if not _settled(r)]
    text = (
        "Monte Carlo error: where an end of an interval that decides a status lay within 3 binomial standard "
        "errors of a value it is read against (0, or the margin on either side: the share of replicates beyond "
        f"it against the tail), the claim drew twice the replicates, up to {MAX_REPLICATES}"
    )
    text += f"; {len(more)} claim(s) needed more" if more else "; none needed more"
    if unsettled:
        text += f"; left unsettled at the cap (marked 'bootstrap-limited'): {', '.join(unsettled)}"
    return text + "."


def needed_footnote(tests: pd.DataFrame) -> str:
    n_examples, seeds = tests["n_examples"].dropna(), tests["n_seeds"].dropna()
    now = f"now {int(n_examples.max())}" if len(n_examples) else "none run"
    seeds_now = f"now {int(seeds.max())}" if len(seeds) else "none run"
    return (
        f"Needed for a verdict: the seeds ({seeds_now}), or the evaluation examples per task and seed ({now}), at "
        f"which the claim's test would have 80% power at its own level to find an effect the size of the larger "
        f"of the margin and the observed difference (on the claimed side where the observed one is smaller than "
        f"the margin), from the run's own variance parts, and the verdict it would then give: more seeds narrow "
        f"the seeds' part (and the t quantile's), more examples the examples' part, so none suffice where the "
        f"other part alone is too wide; with one seed, the seeds' spread is unknown."
    )


AGAIN = "Verdict where it learns in context"


BOTH = "Verdict where ICL and finetuning both learn"
BOTH_FOOTNOTE = (
    f"'{BOTH}': a claim that compares ICL with finetuning (one that reads a finetuned model) read again over only "
    "the tasks where the model learns in context and every finetuning method the claim reads learns as well (FT "
    "more accurate than ZSL on the premise's intervals, the premise table's FT - ZSL), Bonferroni over those tasks "
    f"alone; {premise_module.NOT_APPLICABLE} to a claim on ZSL and ICL alone."
)


def both_verdicts(tests: pd.DataFrame) -> dict[str, str]:
    """Each claim's verdict read over only the tasks where ICL and every finetuning method it reads
    learn (empty for a table written before finetuning's side of the premise was tested)."""
    if "both_verdict" not in tests:
        return {}
    found = tests.drop_duplicates("claim").set_index("claim")["both_verdict"].to_dict()
    return {claim.id: found.get(claim.id, "not run") for claim in CLAIMS}


def both_tasks(tests: pd.DataFrame, claim: str) -> list[str]:
    """The tasks of a claim's rows (one model's) where ICL and every finetuning method it reads learn."""
    learn = tests["both_learn"].astype("boolean").fillna(False).astype(bool)
    rows = tests[(tests["claim"] == claim) & (tests["task"] != MEAN) & learn]
    return names.order_tasks(rows["task"])


def premise_verdicts(tests: pd.DataFrame) -> dict[str, str]:
    """Each claim's verdict read over only the tasks where the model learns in context (empty for
    a table written before the premise was tested)."""
    if "premise_verdict" not in tests:
        return {}
    found = tests.drop_duplicates("claim").set_index("claim")["premise_verdict"].to_dict()
    return {claim.id: found.get(claim.id, "not run") for claim in CLAIMS}


# The premise's three comparisons in words (the first page, the claims' and the premise table's footnotes).
PREMISE_RULE = (
    "ICL more accurate than zero-shot and than always answering the majority class of the evaluation "
    "examples, and, with its demonstrations' labels permuted consistently (each class's label word given to "
    "the next class), more accurate against the permuted gold than that gold's majority class"
)
# Where ICL on permuted labels was not run (a run made before the premise tested it).
PERMUTED_NOT_RUN = (
    "ICL on permuted labels was not run (the run predates it: rerun its config), so the model learns in "
    "context on no task: ICL above zero-shot shows that a context changes the model's answers, not that it "
    "follows the demonstrations' labels"
)


def permuted_not_run(premise: pd.DataFrame) -> bool:
    """Whether a premise table lacks ICL on permuted labels on some task (an older run's)."""
    column = "icl_permuted_majority_status"
    return column not in premise or bool((premise[column] == "not run").any())


def premise_task_text(row) -> str:
    """One task's premise (a row of the premise table) in words: ICL against ZSL and against the
    majority class, and ICL on permuted labels against the permuted gold's majority class, each
    difference in points with its interval, and ICL's most-predicted class."""
    if row.icl_zsl_status == "not run":
        return f"{names.task_label(row.task)}: not run"

    def gain(name: str) -> str:
        value, low, high = (getattr(row, f"{name}{end}") for end in ("", "_low", "_high"))
        return f"{value:+.1f} points [{low:+.1f}, {high:+.1f}]" if math.isfinite(value) else "undefined"

    if getattr(row, "icl_permuted_majority_status", "not run") == "not run":
        follows = "ICL on permuted labels not run"
    else:
        follows = (
            f"on permuted labels {row.icl_permuted:.1f}% right against the permuted gold "
            f"({gain('icl_permuted_majority')} over its majority class)"
        )
    incomplete = f" (incomplete: {row.incomplete})" if row.incomplete else ""
    return (
        f"{names.task_label(row.task)}{incomplete}: ICL {row.icl:.1f}% against ZSL {row.zsl:.1f}% "
        f"({gain('icl_zsl')}) and the majority class's {row.majority:.1f}% ({gain('icl_majority')}), "
        f"{follows}; ICL answers {premise_module.top_text(row)}"
    )


def premise_footnote(premise: pd.DataFrame) -> str:
    """The claims table's footnote on their premise, per task."""
    if premise.empty:
        return "The premise (that the model learns in context) was not tested: the run has no ICL of the trained model."
    level = percent_text(float(premise["level"].iloc[0]))
    return (
        f"The premise, not a claim: the model {premise_module.learns_text(premise)} ({PREMISE_RULE}: all three "
        f"{level} intervals above 0, as a claim on every task reads them"
        + (f"; {PERMUTED_NOT_RUN}" if permuted_not_run(premise) else "")
        + "). '"
        + AGAIN
        + "': the claim read again over only those tasks (Bonferroni over them alone). Per task: "
        + "; ".join(premise_task_text(r) for r in premise.itertuples(index=False))
        + "."
    )


def verdicts(tests: pd.DataFrame) -> dict[str, str]:
    """Each claim's verdict in one model's tests (:func:`evaluate_claims`), "not run" where the
    tests have no row of it."""
    found = tests.drop_duplicates("claim").set_index("claim")["verdict"].to_dict()
    return {claim.id: found.get(claim.id, "not run") for claim in CLAIMS}


def claim_heading(claim: Claim) -> str:
    """A claim as the claims table's Claim column names it: its text, then its note in brackets."""
    return claim.text + (f" ({claim.note})" if claim.note else "")


def percent_text(level: float) -> str:
    return f"{100 * level:.4g}%"


def claim_statement(claim: Claim, roles: dict[str, str], j: int) -> str:
    sign = ">" if claim.direction > 0 else "<"
    b = claim.against[j]
    right = against_label(claim, j) if isinstance(b, float) else cell_label(b, roles)
    if claim.test == "non_inferiority":
        return f"a = {cell_label(claim.a, roles)} {sign}= b = {right} {'-' if claim.direction > 0 else '+'} margin"
    return f"a = {cell_label(claim.a, roles)} {sign} b = {right}"
