"""The claims' definitions: the papers' qualitative claims, each tested on a run with the
uncertainty its sample carries. The claims and how an interval is read into a verdict are here;
the paired test on a run's examples in ``metrics.claim_testing``; the report's words on them in
``report.claim_wording``.

A claim compares two cells per task, ``a`` and ``b`` ((variant, published method, metric); ``b``
may be a constant, or several cells that must each hold), in a claimed direction, under a
quantifier the paper uses: on every task (but named ones), on all tasks but one, on most (more than
half), or on the mean over tasks. Each quotes the paper's sentence it encodes; where the paper
states no direction or no quantifier, ``note`` says how this project reads it.

Per task the difference a - b is that of the run's scores, seeds combined as the summary combines
them (the mean over seeds). Its interval is that of a crossed seeds x examples design
(:mod:`icl_gd.metrics.inference`): every seed, setting and variant of a task evaluates the same example
ids, so one resample of the task's examples is applied to a and b in every seed (paired by id),
and the seeds' spread enters as a Student t with seeds - 1 degrees of freedom. Tasks are
independent: a replicate of the mean over tasks is the mean of the tasks' examples' parts plus one t
for their seeds' parts together, with Welch-Satterthwaite degrees of freedom
(:func:`inference.mean_of_tasks`). Where an end of an
interval that the verdict reads lies within the bootstrap's own Monte Carlo error of the value it
is read against, the claim draws more replicates (the same streams, extended) until it does not,
or says that it stayed unsettled.

Two kinds of test. A *superiority* claim (a > b, or a < b) holds on an interval that lies on the
claimed side of zero. A *non-inferiority* claim (a no lower than b; paper 002's "similarity holds")
holds on an interval whose end on the other side lies within the smallest effect of interest
(:func:`catalog.margin`) of zero, and is *equivalent* where the whole interval lies within it.

The verdict, at the report's level 1 - alpha (``statistics.ci_level``), is read on the intervals:

* on the mean over tasks: the interval of the mean difference (at 1 - alpha/m for m cells b).
* the per-task quantifiers: each task's interval is at 1 - alpha/m, m = tasks x cells b
  (Bonferroni), so that all of a claim's per-task readings hold together with probability at least
  1 - alpha. A task *holds* where its intervals hold, *breaks* where one lies on the other side
  (beyond the margin, for a non-inferiority claim), is *negligible* where a superiority claim's
  interval lies within the margin of zero. every: all hold / one breaks; all but one: all but one
  hold (and at least one) / two break (one, of a single task); most: more than half hold / at
  least half break.
* *supported* where the holds suffice (*equivalent* for a non-inferiority claim whose holding
  intervals all lie within the margin); *contradicted* where the breaks suffice; *negligible*
  where breaks and negligible tasks together suffice (a superiority claim: no effect of interest
  where the claim needs one); otherwise *inconclusive*; *not run* where the run lacks a cell.
  A task some of whose seeds lack a cell or have an undefined score is *incomplete*: shown with
  its seeds, counted in the quantifier and the Bonferroni m, and read as open. A task where every
  seed's score is undefined (say, a Jaccard index with no prediction change) is shown as
  *undefined* and not counted. Claims are not corrected for one another: each is its own question.

For an inconclusive claim, :func:`needed_factor` says how many seeds, or examples per task and
seed, the claim would need for 80% power (:data:`inference.POWER`) at its own level to find an
effect the size of the larger of the smallest effect of interest and the observed difference, from
the run's own variance parts: more seeds narrow the seeds' part, more examples the examples' part.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from icl_gd.common import names
from icl_gd.metrics import catalog, inference
from icl_gd.metrics.catalog import in_percent

log = logging.getLogger(__name__)

Cell = tuple[str, str, str]  # (variant, published method, metric)
TESTS = ("superiority", "non_inferiority")


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    table: str
    text: str
    a: Cell
    b: tuple[Cell, ...] | float  # one or more cells (each must hold), or a constant
    direction: int  # +1: a > b claimed (a no lower than b, non-inferiority); -1: a < b
    quantifier: str  # "every", "all_but_one", "most", "mean"
    except_tasks: tuple[str, ...] = field(default=())
    note: str = ""
    quote: str = ""  # the paper's sentence this claim encodes, verbatim
    test: str = "superiority"  # or "non_inferiority" (:data:`TESTS`)

    def __post_init__(self):
        if self.test not in TESTS:
            raise ValueError(f"claim {self.id}: test must be one of {TESTS}, got {self.test!r}")
        if self.quantifier not in QUANTIFIERS:
            raise ValueError(
                f"claim {self.id}: quantifier must be one of {sorted(QUANTIFIERS)}, got {self.quantifier!r}"
            )

    @property
    def against(self) -> list[Cell | float]:
        return list(self.b) if isinstance(self.b, tuple) else [self.b]

    @property
    def cells(self) -> list[Cell]:
        """The cells it reads: a and each cell b (a constant b left out)."""
        return [c for c in (self.a, *self.against) if not isinstance(c, float)]

    @property
    def margin(self) -> float:
        """The smallest effect of interest of a - b, in the unit a is held in."""
        return catalog.margin(self.a[2])


QUANTIFIERS = {
    "every": "on every task",
    "all_but_one": "on all tasks but one",
    "most": "on most tasks",
    "mean": "on the mean over tasks",
}
_TABLE1_TASKS = "paper 001's Table 1 has SST-2, SST-5, MR, Subj and CB: AGNews is left out"
_SIGNIFICANTLY = (
    "'significantly lower' read on the mean over tasks, in paper 001 as in paper 003: both papers' "
    "tables show per-task gaps of 0.01 or less on SST-2 and SST-5 (ties by paper 001's own rule), "
    "so 'significantly' can describe only the average (001: 0.283 against 0.435; 003: 0.2845 against "
    "0.4427)"
)
_RESOLVE = (
    "'resolve' read two ways, both tested: the drop shrinks (clipped above unclipped layer-causal FT, as the "
    "paper's 0.4227 against 0.2844 shows) and the drop is gone (clipped no lower than standard FT, which "
    "the paper's 0.4227 against 0.4870 does not show); paper: Subj, one seed"
)

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "001-T1-untrained",
        "001",
        "Table 1",
        "In SimAOU the completely untrained model slightly exceeds the trained one (GD)",
        ("untrained", "gd", "simaou"),
        (("trained", "gd", "simaou"),),
        +1,
        "mean",
        except_tasks=("agnews",),
        note=_TABLE1_TASKS,
        quote="We find that in terms of SimAOU the untrained baselines slightly exceed vanilla GD.",
    ),
    Claim(
        "001-T1-trained-embeddings",
        "001",
        "Table 1",
        "In SimAOU the model with only its embeddings trained slightly exceeds the trained one (GD)",
        ("trained_embeddings", "gd", "simaou"),
        (("trained", "gd", "simaou"),),
        +1,
        "mean",
        except_tasks=("agnews",),
        note=_TABLE1_TASKS,
        quote="We find that in terms of SimAOU the untrained baselines slightly exceed vanilla GD.",
    ),
    Claim(
        "001-T2-simaou-norm",
        "001",
        "Table 2",
        "Layer-causal GD achieves higher SimAOU (normalised) than GD on every task",
        ("trained", "lcgd", "simaou_norm"),
        (("trained", "gd", "simaou_norm"),),
        +1,
        "every",
        note="the caption says SimAOU; it holds in the table for SimAOU_norm, not for raw SimAOU on AGNews",
        quote="Layer causal GD achieves higher SimAOU across all tasks, yet its SimAM is significantly lower.",
    ),
    Claim(
        "001-T2-simam",
        "001",
        "Table 2",
        "Layer-causal GD's SimAM is significantly lower than GD's (on the mean over tasks)",
        ("trained", "lcgd", "simam_after"),
        (("trained", "gd", "simam_after"),),
        -1,
        "mean",
        note=_SIGNIFICANTLY,
        quote="Layer causal GD achieves higher SimAOU across all tasks, yet its SimAM is significantly lower.",
    ),
    Claim(
        "001-T2-simam-delta",
        "001",
        "Table 2",
        "SimAM_delta is higher for layer-causal GD, except on AGNews",
        ("trained", "lcgd", "simam_delta"),
        (("trained", "gd", "simam_delta"),),
        +1,
        "every",
        except_tasks=("agnews",),
        quote="SimAM_Δ is higher for layer causal GD, except for AGNews.",
    ),
    Claim(
        "001-T1T2-lcgd-baselines",
        "001",
        "Tables 1, 2",
        "In SimAM_delta layer-causal GD is better than the untrained baselines on every task of Table 1",
        ("trained", "lcgd", "simam_delta"),
        (("untrained", "gd", "simam_delta"), ("trained_embeddings", "gd", "simam_delta")),
        +1,
        "every",
        except_tasks=("agnews",),
        note="'all datasets explored': the baselines' datasets; " + _TABLE1_TASKS,
        quote="In terms of SimAM_Δ [LCGD] is significantly better than any of the other baselines across all "
        "datasets explored.",
    ),
    Claim(
        "003-T1-icl-zsl",
        "003",
        "Table 1",
        "ICL is more accurate than zero-shot on every task",
        ("trained", "gd", "acc_icl"),
        (("trained", "gd", "acc_zsl"),),
        +1,
        "every",
        note="read from Table 1 (ICL above ZSL in every column); no sentence states it",
    ),
    Claim(
        "003-T1-icl-ft",
        "003",
        "Table 1",
        "ICL is more accurate than finetuning, on average over tasks",
        ("trained", "gd", "acc_icl"),
        (("trained", "gd", "acc_ft"),),
        +1,
        "mean",
        note='the paper: "average difference of 19.38%"; its Table 1 gives a mean gap of 9.73 points',
        quote="However, their results show a discrepancy between the accuracy of the finetuned model and the ICL "
        "setting, average difference of 19.38% relative to the original zero-shot accuracy (Table 1).",
    ),
    Claim(
        "003-T1-jaccard",
        "003",
        "Table 1",
        "ICL's and finetuning's prediction changes are poorly aligned on most tasks",
        ("trained", "gd", "jaccard_all"),
        0.5,
        -1,
        "most",
        note="'poorly aligned' read as a Jaccard index below 50%",
        quote="we show that ICL's and finetuning's predictions are poorly aligned on most tasks.",
    ),
    Claim(
        "003-T1-jaccard-incorrect",
        "003",
        "Table 1",
        "Erroneous prediction changes are aligned even less (Jaccard of incorrect changes below that of correct ones)",
        ("trained", "gd", "jaccard_incorrect"),
        (("trained", "gd", "jaccard_correct"),),
        -1,
        "most",
        quote="Our results show that both methods yield unique, different prediction updates, especially when "
        "taking erroneous changes into account.",
    ),
    Claim(
        "003-T2-simaou",
        "003",
        "Table 2",
        "Layer-causal FT achieves higher SimAOU (normalised) in 5 out of 6 tasks",
        ("trained", "lcgd", "simaou_norm"),
        (("trained", "gd", "simaou_norm"),),
        +1,
        "all_but_one",
        quote="Layer causal FT achieves higher SimAOU in 5 out of 6 tasks, but its SimAM is significantly lower.",
    ),
    Claim(
        "003-T2-simam",
        "003",
        "Table 2",
        "Layer-causal FT's SimAM is significantly lower than standard FT's (on the mean over tasks)",
        ("trained", "lcgd", "simam_after"),
        (("trained", "gd", "simam_after"),),
        -1,
        "mean",
        note=_SIGNIFICANTLY,
        quote="Layer causal FT achieves higher SimAOU in 5 out of 6 tasks, but its SimAM is significantly lower.",
    ),
    Claim(
        "003-T3-clip-simam",
        "003",
        "Table 3",
        "Gradient clipping shrinks layer-causal FT's drop in SimAM (clipped above unclipped)",
        ("trained", "lcgd_clip", "simam_after"),
        (("trained", "lcgd", "simam_after"),),
        +1,
        "every",
        note=_RESOLVE,
        quote="This results show that even arbitrary clipping may resolve the drop in SimAM shown in table 2.",
    ),
    Claim(
        "003-T3-clip-simam-ft",
        "003",
        "Table 3",
        "Gradient clipping removes layer-causal FT's drop in SimAM (clipped no lower than standard FT)",
        ("trained", "lcgd_clip", "simam_after"),
        (("trained", "gd", "simam_after"),),
        +1,
        "every",
        note=_RESOLVE,
        test="non_inferiority",
        quote="This results show that even arbitrary clipping may resolve the drop in SimAM shown in table 2.",
    ),
    Claim(
        "003-T3-clip-simaou",
        "003",
        "Table 3",
        "Clipped layer-causal FT keeps its SimAOU (normalised) above standard FT's",
        ("trained", "lcgd_clip", "simaou_norm"),
        (("trained", "gd", "simaou_norm"),),
        +1,
        "every",
        note="read from Table 3 (0.3480 against 0.1932, in bold); paper: Subj, one seed",
    ),
    Claim(
        "002-switch-icl",
        "002",
        "label switching",
        "False labels in the demonstrations change ICL: its accuracy drops",
        ("trained", "gd_switched", "acc_icl"),
        (("trained", "gd", "acc_icl"),),
        -1,
        "mean",
        note="the experiment's premise, this project's reading; paper 002 (a draft) reports no number",
        quote="we evaluated the change in similarity when providing false labels both in FT and ICL.",
    ),
    Claim(
        "002-switch-similarity",
        "002",
        "label switching",
        "With false labels in both FT and ICL, their similarity holds (SimAOU_norm no lower than with gold labels)",
        ("trained", "gd_switched", "simaou_norm"),
        (("trained", "gd", "simaou_norm"),),
        +1,
        "mean",
        note="this project's reading, tested as non-inferiority: paper 002 states no direction and reports no number",
        test="non_inferiority",
        quote="we evaluated the change in similarity when providing false labels both in FT and ICL.",
    ),
    Claim(
        "shen-output-distribution",
        "Shen et al.",
        "beyond the papers",
        "Finetuning moves the output distribution toward ICL's (KL(ICL || FT) below KL(ICL || ZSL))",
        ("trained", "gd", "kl_icl_ft"),
        (("trained", "gd", "kl_icl_zsl"),),
        -1,
        "most",
        note="Shen, Mishra and Khashabi (2023) find that ICL and GD change the output distribution differently; "
        "the label words' distributions, renormalised over them",
    ),
    Claim(
        "shen-order-sensitivity",
        "Shen et al.",
        "beyond the papers",
        "ICL is more sensitive to the order of its demonstrations than sequential GD (more predictions change "
        "across orders)",
        ("trained", "gd", "order_changed_icl"),
        (("trained", "gd", "order_changed_ft"),),
        +1,
        "most",
        note="Shen, Mishra and Khashabi (2023) argue ICL is order-sensitive and GD is not; paper 001 answers that "
        "GD one demonstration at a time is order-sensitive too; needs orders > 1",
        quote="However, this discrepancy can be mitigated easily by applying GD sequentially, as was done in the "
        "work of Dai et al. (2023) that we compare to. (paper 001, on Shen et al.)",
    ),
)
# supported and equivalent hold; contradicted and negligible do not; the last two say nothing yet
VERDICTS = ("supported", "equivalent", "contradicted", "negligible", "inconclusive", "not run")
MEAN = "mean"  # the task of a claim test's row for the mean over tasks
COLUMNS = [
    "model",
    "claim",
    "paper",
    "table",
    "quantifier",
    "test",
    "comparison",
    "against",
    "task",
    "n_examples",
    "n_seeds",
    "a",
    "b",
    "difference",
    "ci_low",
    "ci_high",
    "level",
    "margin",
    "side",
    "status",
    "incomplete",
    "seed_share",
    "df",
    "n_replicates",
    "unit",
    "verdict",
    "settled",
    "redrawn",
    "factor",
    "n_needed",
    "resolves_to",
    "seed_factor",
    "seeds_needed",
    "seeds_resolve_to",
]


# --------------------------------------------------------------------------------------------
# reading a quantifier on the intervals


def status(low: float, high: float, direction: int, test: str = "superiority", margin: float = 0.0) -> str:
    """One interval of a - b read for a claim, its claimed side first: "holds" (wholly on the
    claimed side of 0, however small), "breaks" (wholly on the other), "negligible" (a superiority
    claim's interval that straddles 0 within +-margin), "equivalent" (a non-inferiority claim's
    interval within +-margin: it holds), or "open" (also where undefined)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "open"
    lo, hi = sorted((direction * low, direction * high))  # the claimed side positive
    inside = -margin < lo and hi < margin
    if test == "non_inferiority":
        if inside:
            return "equivalent"
        return "holds" if lo > -margin else "breaks" if hi < -margin else "open"
    if lo > 0:
        return "holds"
    if hi < 0:
        return "breaks"
    return "negligible" if inside else "open"


def deciding_ends(test: str, margin: float) -> tuple[tuple[int, float], ...]:
    """The interval ends whose side of a value decides its :func:`status`, as (end, value) in the
    claimed side's orientation (end 0 the lower, 1 the upper): for a superiority claim both ends
    against 0 (holds, breaks), the lower against -margin and the upper against +margin (negligible);
    for a non-inferiority claim both ends against -margin (holds, breaks) and the upper against
    +margin (equivalent)."""
    if test == "non_inferiority":
        return ((0, -margin), (1, -margin), (1, margin))
    ends = ((0, 0.0), (1, 0.0))
    return ends + ((0, -margin), (1, margin)) if margin > 0 else ends


def side(
    difference_low: float, difference_high: float, direction: int, test: str = "superiority", margin: float = 0.0
) -> int:
    """+1 where an interval holds for the claim (:func:`status`: holds or equivalent), -1 where it
    breaks it, 0 otherwise."""
    return SIDES.get(status(difference_low, difference_high, direction, test, margin), 0)


SIDES = {"holds": 1, "equivalent": 1, "breaks": -1}  # any other status: 0


def _combined(statuses: list[str]) -> str:
    """A task's status from its intervals (one per cell b): each must hold."""
    if any(s == "breaks" for s in statuses):
        return "breaks"
    if statuses and all(s in ("holds", "equivalent") for s in statuses):
        return "equivalent" if all(s == "equivalent" for s in statuses) else "holds"
    return "negligible" if any(s == "negligible" for s in statuses) else "open"


def read_quantifier(quantifier: str, task_statuses: list[list], mean_statuses: list, test: str = "superiority") -> str:
    """The verdict from the statuses (:func:`status`; or sides, +1 / -1 / 0) of each task's intervals
    (one per cell b) and of the mean's: supported, equivalent, contradicted, negligible or
    inconclusive."""

    def named(s):
        return {1: "holds", -1: "breaks", 0: "open"}[int(s)] if not isinstance(s, str) else s

    rows = [mean_statuses] if quantifier == "mean" else task_statuses
    rule = "every" if quantifier == "mean" else quantifier
    combined = [_combined([named(s) for s in row]) for row in rows]
    n = len(combined)
    if n == 0:
        return "inconclusive"

    def enough_for(k: int) -> bool:
        return {"every": k == n, "all_but_one": k >= max(n - 1, 1), "most": k > n / 2}[rule]

    def enough_against(k: int) -> bool:
        return {"every": k >= 1, "all_but_one": k >= min(2, n), "most": k >= n / 2}[rule]

    holds = sum(c in ("holds", "equivalent") for c in combined)
    if enough_for(holds):
        equivalent = sum(c == "equivalent" for c in combined)
        return "equivalent" if test == "non_inferiority" and enough_for(equivalent) else "supported"
    breaks = sum(c == "breaks" for c in combined)
    if enough_against(breaks):
        return "contradicted"
    if test == "superiority" and enough_against(breaks + sum(c == "negligible" for c in combined)):
        return "negligible"
    return "inconclusive"


# --------------------------------------------------------------------------------------------
# what an inconclusive claim would need


@dataclass(frozen=True)
class Unit:
    """One interval a verdict reads, for planning: its observed difference, the level it is read at
    and the variance parts of its tasks (one, or every task for the mean over tasks)."""

    difference: float
    level: float
    spreads: tuple
    status: str = "open"  # as read now (:func:`status`); only an open interval is planned for


def planned_effect(difference: float, direction: int, test: str, margin: float) -> float:
    """The effect to plan for, as a distance from the value the test reads against (0, or -margin
    on the claimed side for non-inferiority): the observed one, or the smallest effect of interest
    on the claimed side where the observed one is smaller than that."""
    threshold = -direction * margin if test == "non_inferiority" else 0.0
    distance = difference - threshold if math.isfinite(difference) else math.nan
    if not math.isfinite(distance):
        return math.nan
    return distance if abs(distance) >= margin else direction * margin


def needed_factor(
    quantifier: str,
    tasks: list[list[Unit]],
    mean: list[Unit],
    direction: int,
    *,
    currency: str = "seeds",
    test: str = "superiority",
    margin: float = 0.0,
) -> tuple[float, str]:
    """The smallest factor on the seeds (or on the examples per task and seed) at which the claim's
    test has :data:`inference.POWER` to give a verdict at its own level, and that verdict, planning
    for :func:`planned_effect` in each interval it reads; (inf, "inconclusive") where no size would
    (more examples cannot narrow the seeds' spread; one seed says nothing yet of how far seeds
    spread)."""
    units = [u for row in tasks for u in row] if quantifier != "mean" else list(mean)
    units = [u for u in units if u.status == "open"]  # a decided interval stays as it is; an incomplete
    # task's missing seed is not made up by more of the others
    effects = {id(u): planned_effect(u.difference, direction, test, margin) for u in units}
    factors = {
        id(u): inference.needed_factor(effects[id(u)], u.level, list(u.spreads), currency=currency)
        if math.isfinite(effects[id(u)])
        else math.inf
        for u in units
    }

    def verdict_at(f: float) -> str:
        def read(row):
            return [
                u.status
                if id(u) not in factors
                else ("holds" if effects[id(u)] * direction > 0 else "breaks")
                if factors[id(u)] <= f
                else "open"
                for u in row
            ]

        return read_quantifier(quantifier, [read(row) for row in tasks], read(mean), test)

    for f in sorted(f for f in factors.values() if math.isfinite(f)):
        verdict = verdict_at(f)
        if verdict != "inconclusive":
            return f, verdict
    return math.inf, "inconclusive"


# the most replicates a claim draws to settle an interval's end against its Monte Carlo error
MAX_REPLICATES = 2**20


def against_label(claim: Claim, j: int) -> str:
    b = claim.against[j]
    if isinstance(b, float):
        return f"{100 * b:g}%" if in_percent(claim.a[2]) else f"{b:g}"
    return cell_label(b, {})


def cell_label(cell: Cell, roles: dict[str, str]) -> str:
    variant, method, metric = cell
    return (
        f"{catalog.label(metric)} ({names.method_label(roles.get(method, method))}, "
        f"{names.variant_label(variant, in_text=True)})"
    )
