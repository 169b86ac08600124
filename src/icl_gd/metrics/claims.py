"""The papers' qualitative claims, each tested on a run with the uncertainty its sample carries.

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
(:data:`inference.MARGINS`) of zero, and is *equivalent* where the whole interval lies within it.

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
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from icl_gd.metrics import inference

from icl_gd.metrics import resampling

from icl_gd.metrics.units import display_scale, in_percent, metric_range
from icl_gd.common import names
from icl_gd.common.frames import atomic_write_frame
from icl_gd.metrics.scoring import RunExamples, layer_mean, positions_of, read_examples, run_key, runs_provenance
from icl_gd.common.frames import write_csv

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
            raise ValueError(f"claim {self.id}: quantifier must be one of {sorted(QUANTIFIERS)}, got {self.quantifier!r}")

    @property
    def against(self) -> list[Cell | float]:
        return list(self.b) if isinstance(self.b, tuple) else [self.b]

    @property
    def margin(self) -> float:
        """The smallest effect of interest of a - b, in the unit a is held in."""
        return inference.margin(self.a[2])


QUANTIFIERS = {
    "every": "on every task",
    "all_but_one": "on all tasks but one",
    "most": "on most tasks",
    "mean": "on the mean over tasks",
}
_TABLE1_TASKS = "paper 001's Table 1 has SST-2, SST-5, MR, Subj and CB: AGNews is left out"
_SIGNIFICANTLY = ("'significantly lower' read on the mean over tasks, in paper 001 as in paper 003: both papers' "
                  "tables show per-task gaps of 0.01 or less on SST-2 and SST-5 (ties by paper 001's own rule), "
                  "so 'significantly' can describe only the average (001: 0.283 against 0.435; 003: 0.2845 against "
                  "0.4427)")
_RESOLVE = ("'resolve' read two ways, both tested: the drop shrinks (clipped above unclipped layer-causal FT, as the "
            "paper's 0.4227 against 0.2844 shows) and the drop is gone (clipped no lower than standard FT, which "
            "the paper's 0.4227 against 0.4870 does not show); paper: Subj, one seed")

CLAIMS: tuple[Claim, ...] = (
    Claim("001-T1-untrained", "001", "Table 1",
          "In SimAOU the completely untrained model slightly exceeds the trained one (GD)",
          ("untrained", "gd", "simaou"), (("trained", "gd", "simaou"),), +1, "mean", except_tasks=("agnews",),
          note=_TABLE1_TASKS,
          quote="We find that in terms of SimAOU the untrained baselines slightly exceed vanilla GD."),
    Claim("001-T1-trained-embeddings", "001", "Table 1",
          "In SimAOU the model with only its embeddings trained slightly exceeds the trained one (GD)",
          ("trained_embeddings", "gd", "simaou"), (("trained", "gd", "simaou"),), +1, "mean",
          except_tasks=("agnews",), note=_TABLE1_TASKS,
          quote="We find that in terms of SimAOU the untrained baselines slightly exceed vanilla GD."),
    Claim("001-T2-simaou-norm", "001", "Table 2",
          "Layer-causal GD achieves higher SimAOU (normalised) than GD on every task",
          ("trained", "lcgd", "simaou_norm"), (("trained", "gd", "simaou_norm"),), +1, "every",
          note="the caption says SimAOU; it holds in the table for SimAOU_norm, not for raw SimAOU on AGNews",
          quote="Layer causal GD achieves higher SimAOU across all tasks, yet its SimAM is significantly lower."),
    Claim("001-T2-simam", "001", "Table 2",
          "Layer-causal GD's SimAM is significantly lower than GD's (on the mean over tasks)",
          ("trained", "lcgd", "simam_after"), (("trained", "gd", "simam_after"),), -1, "mean",
          note=_SIGNIFICANTLY,
          quote="Layer causal GD achieves higher SimAOU across all tasks, yet its SimAM is significantly lower."),
    Claim("001-T2-simam-delta", "001", "Table 2",
          "SimAM_delta is higher for layer-causal GD, except on AGNews",
          ("trained", "lcgd", "simam_delta"), (("trained", "gd", "simam_delta"),), +1, "every",
          except_tasks=("agnews",),
          quote="SimAM_Δ is higher for layer causal GD, except for AGNews."),
    Claim("001-T1T2-lcgd-baselines", "001", "Tables 1, 2",
          "In SimAM_delta layer-causal GD is better than the untrained baselines on every task of Table 1",
          ("trained", "lcgd", "simam_delta"),
          (("untrained", "gd", "simam_delta"), ("trained_embeddings", "gd", "simam_delta")), +1, "every",
          except_tasks=("agnews",), note="'all datasets explored': the baselines' datasets; " + _TABLE1_TASKS,
          quote="In terms of SimAM_Δ [LCGD] is significantly better than any of the other baselines across all "
                "datasets explored."),
    Claim("003-T1-icl-zsl", "003", "Table 1",
          "ICL is more accurate than zero-shot on every task",
          ("trained", "gd", "acc_icl"), (("trained", "gd", "acc_zsl"),), +1, "every",
          note="read from Table 1 (ICL above ZSL in every column); no sentence states it"),
    Claim("003-T1-icl-ft", "003", "Table 1",
          "ICL is more accurate than finetuning, on average over tasks",
          ("trained", "gd", "acc_icl"), (("trained", "gd", "acc_ft"),), +1, "mean",
          note='the paper: "average difference of 19.38%"; its Table 1 gives a mean gap of 9.73 points',
          quote="However, their results show a discrepancy between the accuracy of the finetuned model and the ICL "
                "setting, average difference of 19.38% relative to the original zero-shot accuracy (Table 1)."),
    Claim("003-T1-jaccard", "003", "Table 1",
          "ICL's and finetuning's prediction changes are poorly aligned on most tasks",
          ("trained", "gd", "jaccard_all"), 0.5, -1, "most",
          note="'poorly aligned' read as a Jaccard index below 50%",
          quote="we show that ICL's and finetuning's predictions are poorly aligned on most tasks."),
    Claim("003-T1-jaccard-incorrect", "003", "Table 1",
          "Erroneous prediction changes are aligned even less (Jaccard of incorrect changes below that of correct ones)",
          ("trained", "gd", "jaccard_incorrect"), (("trained", "gd", "jaccard_correct"),), -1, "most",
          quote="Our results show that both methods yield unique, different prediction updates, especially when "
                "taking erroneous changes into account."),
    Claim("003-T2-simaou", "003", "Table 2",
          "Layer-causal FT achieves higher SimAOU (normalised) in 5 out of 6 tasks",
          ("trained", "lcgd", "simaou_norm"), (("trained", "gd", "simaou_norm"),), +1, "all_but_one",
          quote="Layer causal FT achieves higher SimAOU in 5 out of 6 tasks, but its SimAM is significantly lower."),
    Claim("003-T2-simam", "003", "Table 2",
          "Layer-causal FT's SimAM is significantly lower than standard FT's (on the mean over tasks)",
          ("trained", "lcgd", "simam_after"), (("trained", "gd", "simam_after"),), -1, "mean",
          note=_SIGNIFICANTLY,
          quote="Layer causal FT achieves higher SimAOU in 5 out of 6 tasks, but its SimAM is significantly lower."),
    Claim("003-T3-clip-simam", "003", "Table 3",
          "Gradient clipping shrinks layer-causal FT's drop in SimAM (clipped above unclipped)",
          ("trained", "lcgd_clip", "simam_after"), (("trained", "lcgd", "simam_after"),), +1, "every",
          note=_RESOLVE,
          quote="This results show that even arbitrary clipping may resolve the drop in SimAM shown in table 2."),
    Claim("003-T3-clip-simam-ft", "003", "Table 3",
          "Gradient clipping removes layer-causal FT's drop in SimAM (clipped no lower than standard FT)",
          ("trained", "lcgd_clip", "simam_after"), (("trained", "gd", "simam_after"),), +1, "every",
          note=_RESOLVE, test="non_inferiority",
          quote="This results show that even arbitrary clipping may resolve the drop in SimAM shown in table 2."),
    Claim("003-T3-clip-simaou", "003", "Table 3",
          "Clipped layer-causal FT keeps its SimAOU (normalised) above standard FT's",
          ("trained", "lcgd_clip", "simaou_norm"), (("trained", "gd", "simaou_norm"),), +1, "every",
          note="read from Table 3 (0.3480 against 0.1932, in bold); paper: Subj, one seed"),
    Claim("002-switch-icl", "002", "label switching",
          "False labels in the demonstrations change ICL: its accuracy drops",
          ("trained", "gd_switched", "acc_icl"), (("trained", "gd", "acc_icl"),), -1, "mean",
          note="the experiment's premise, this project's reading; paper 002 (a draft) reports no number",
          quote="we evaluated the change in similarity when providing false labels both in FT and ICL."),
    Claim("002-switch-similarity", "002", "label switching",
          "With false labels in both FT and ICL, their similarity holds (SimAOU_norm no lower than with gold labels)",
          ("trained", "gd_switched", "simaou_norm"), (("trained", "gd", "simaou_norm"),), +1, "mean",
          note="this project's reading, tested as non-inferiority: paper 002 states no direction and reports no "
               "number", test="non_inferiority",
          quote="we evaluated the change in similarity when providing false labels both in FT and ICL."),
    Claim("shen-output-distribution", "Shen et al.", "beyond the papers",
          "Finetuning moves the output distribution toward ICL's (KL(ICL || FT) below KL(ICL || ZSL))",
          ("trained", "gd", "kl_icl_ft"), (("trained", "gd", "kl_icl_zsl"),), -1, "most",
          note="Shen, Mishra and Khashabi (2023) find that ICL and GD change the output distribution differently; "
               "the label words' distributions, renormalised over them"),
    Claim("shen-order-sensitivity", "Shen et al.", "beyond the papers",
          "ICL is more sensitive to the order of its demonstrations than sequential GD (more predictions change "
          "across orders)",
          ("trained", "gd", "order_changed_icl"), (("trained", "gd", "order_changed_ft"),), +1, "most",
          note="Shen, Mishra and Khashabi (2023) argue ICL is order-sensitive and GD is not; paper 001 answers that "
               "GD one demonstration at a time is order-sensitive too; needs orders > 1",
          quote="However, this discrepancy can be mitigated easily by applying GD sequentially, as was done in the "
                "work of Dai et al. (2023) that we compare to. (paper 001, on Shen et al.)"),
)
# supported and equivalent hold; contradicted and negligible do not; the last two say nothing yet
VERDICTS = ("supported", "equivalent", "contradicted", "negligible", "inconclusive", "not run")
MEAN = "mean"  # the task of a claim test's row for the mean over tasks
COLUMNS = ["model", "claim", "paper", "table", "quantifier", "test", "comparison", "against", "task", "n_examples",
           "n_seeds", "a", "b", "difference", "ci_low", "ci_high", "level", "margin", "side", "status",
           "incomplete", "seed_share", "df", "n_replicates", "unit", "verdict", "settled", "redrawn", "factor",
           "n_needed", "resolves_to", "seed_factor", "seeds_needed", "seeds_resolve_to"]


# --------------------------------------------------------------------------------------------
# reading a quantifier on the intervals


def status(low: float, high: float, direction: int, test: str = "superiority", margin: float = 0.0) -> str:
    """One interval of a - b read for a claim: "holds", "breaks", "negligible" (a superiority
    claim's interval within +-margin of zero), "equivalent" (a non-inferiority claim's: it holds),
    or "open" (also where undefined)."""
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


def side(difference_low: float, difference_high: float, direction: int, test: str = "superiority",
         margin: float = 0.0) -> int:
    """+1 where an interval holds for the claim (:func:`status`: holds or equivalent), -1 where it
    breaks it, 0 otherwise."""
    return _SIDES.get(status(difference_low, difference_high, direction, test, margin), 0)


_SIDES = {"holds": 1, "equivalent": 1, "breaks": -1}  # any other status: 0


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


def needed_factor(quantifier: str, tasks: list[list[Unit]], mean: list[Unit], direction: int, *,
                  currency: str = "seeds", test: str = "superiority", margin: float = 0.0) -> tuple[float, str]:
    """The smallest factor on the seeds (or on the examples per task and seed) at which the claim's
    test has :data:`inference.POWER` to give a verdict at its own level, and that verdict, planning
    for :func:`planned_effect` in each interval it reads; (inf, "inconclusive") where no size would
    (more examples cannot narrow the seeds' spread; one seed says nothing yet of how far seeds
    spread)."""
    units = [u for row in tasks for u in row] if quantifier != "mean" else list(mean)
    units = [u for u in units if u.status == "open"]  # a decided interval stays as it is; an incomplete
    # task's missing seed is not made up by more of the others
    effects = {id(u): planned_effect(u.difference, direction, test, margin) for u in units}
    factors = {id(u): inference.needed_factor(effects[id(u)], u.level, list(u.spreads), currency=currency)
               if math.isfinite(effects[id(u)]) else math.inf for u in units}

    def verdict_at(f: float) -> str:
        def read(row):
            return [u.status if id(u) not in factors else
                    ("holds" if effects[id(u)] * direction > 0 else "breaks") if factors[id(u)] <= f else "open"
                    for u in row]
        return read_quantifier(quantifier, [read(row) for row in tasks], read(mean), test)

    for f in sorted(f for f in factors.values() if math.isfinite(f)):
        verdict = verdict_at(f)
        if verdict != "inconclusive":
            return f, verdict
    return math.inf, "inconclusive"


# --------------------------------------------------------------------------------------------
# the paired bootstrap


def _cell_terms(ex: RunExamples, metric: str, rows: np.ndarray):
    """The per-example terms of a run score on the examples ``rows``: (numerator, denominator) of a
    ratio, or the (n, L) similarity values."""
    if metric in ex.similarities:
        return ex.similarities[metric][rows]
    num, den = ex.ratio_terms(metric)
    return num[rows], den[rows]


def _statistic(terms, counts: np.ndarray) -> np.ndarray:
    """The run score on each resample (rows of ``counts``): a ratio, or the layer mean of the
    per-layer means over examples, as the summary computes it."""
    if isinstance(terms, tuple):
        return resampling.bootstrap_ratios(*terms, counts)
    return layer_mean(resampling.bootstrap_means(terms, counts))


class _Replicates:
    """The bootstrap replicates of every cell of every (model, task, seed), drawn in chunks of
    ``chunk`` as they are asked for: asking for more extends the same streams (the first
    chunks are the same whatever the total), so a claim whose verdict the bootstrap's own noise
    could flip can draw more (:data:`MAX_REPLICATES`) without changing any other claim's. Every
    seed and cell of a task is resampled with the same counts: the crossed design."""

    def __init__(self, index, cells: set[tuple[str, str, str]], chunk: int, seed: int):
        self.index, self.cells, self.chunk, self.seed = index, cells, chunk, seed
        self._tasks: dict[tuple, tuple] = {}  # (model, task) -> (ids, {seed: terms per cell}, {seed: points})
        self._reps: dict[tuple, list[np.ndarray]] = {}  # (model, task, seed, *cell) -> chunks

    def _prepared(self, model: str, task: str):
        key = (model, task)
        if key not in self._tasks:
            by_seed = self.index[key]
            present = {s: {(v, m) for v, m, _ in self.cells if (v, m) in runs} for s, runs in by_seed.items()}
            ids = None
            for s, runs in sorted(by_seed.items()):
                for run in sorted(present[s]):
                    run_ids = np.asarray(runs[run].example_id)
                    ids = np.unique(run_ids) if ids is None else np.intersect1d(ids, run_ids)
            ids = ids if ids is not None else np.zeros(0, np.int64)
            if any(len(ids) != len(np.unique(runs[run].example_id)) for s, runs in by_seed.items() for run in present[s]):
                log.warning("%s/%s: the seeds and settings of this task evaluate different examples; the claims "
                            "pair the %d they share", model, task, len(ids))
            terms, points = {}, {}
            ones = np.ones((1, len(ids)))
            for s, runs in by_seed.items():
                rows = {run: positions_of(runs[run].example_id, ids) for run in present[s]}
                terms[s] = {c: _cell_terms(runs[c[:2]], c[2], rows[c[:2]]) for c in self.cells
                            if c[:2] in present[s]
                            and (c[2] in runs[c[:2]].ratio_names or c[2] in runs[c[:2]].similarities)}
                points[s] = {c: float(_statistic(t, ones)[0]) for c, t in terms[s].items()}
            self._tasks[key] = (ids, terms, points)
        return self._tasks[key]

    def seeds(self, model: str, task: str) -> list[int]:
        return sorted(self.index[(model, task)])

    def has(self, model: str, task: str, s: int, cell) -> bool:
        return cell in self._prepared(model, task)[1][s]

    def point(self, model: str, task: str, s: int, cell) -> float:
        return self._prepared(model, task)[2][s][cell]

    def get(self, model: str, task: str, seeds: list[int], cells: list, n_rep: int) -> dict:
        """{seed: {cell: (point, replicates[:n_rep], n examples)}} for ``cells`` of one task, every
        seed resampled alike."""
        ids, terms, points = self._prepared(model, task)
        n_chunks = -(-n_rep // self.chunk)
        wanted = [(s, c) for s in seeds for c in cells]
        for j in range(min((len(self._reps.setdefault((model, task, s, *c), [])) for s, c in wanted),
                           default=n_chunks), n_chunks):
            counts = resampling.bootstrap_counts(len(ids), self.chunk, np.random.default_rng(
                [self.seed, zlib.crc32(task.encode()), j]))
            for s, c in wanted:
                chunks = self._reps[(model, task, s, *c)]
                if len(chunks) == j:
                    chunks.append(_statistic(terms[s][c], counts))
        return {s: {c: (points[s][c], np.concatenate(self._reps[(model, task, s, *c)])[:n_rep], len(ids))
                    for c in cells} for s in seeds}

    def uniforms(self, task: str, n_rep: int) -> np.ndarray:
        """The quantiles of the seeds' Student t of a task's replicates, chunk by chunk as above."""
        return np.concatenate([
            inference.stratified_uniforms(self.chunk, np.random.default_rng([self.seed, zlib.crc32(task.encode()), j, 1]))
            for j in range(-(-n_rep // self.chunk))])[:n_rep]


# the most replicates a claim draws to settle an interval's end against its Monte Carlo error
MAX_REPLICATES = 2**20


def evaluate_claims(examples: list[RunExamples], roles: dict[str, str], *, n_boot: int = 1000, level: float = 0.95,
                    seed: int = 0, claims: tuple[Claim, ...] | None = None,
                    max_replicates: int = MAX_REPLICATES) -> pd.DataFrame:
    """Every claim on every model of ``examples``: one row per (claim, cell b, task), and one for
    the mean over tasks (task :data:`MEAN`), with the difference a - b (points for a percentage,
    else the score's own unit), its interval on the crossed seeds x examples design at the level its
    quantifier reads it, its status and side, and the claim's verdict; for an inconclusive claim,
    the factor on the seeds, and on the examples per task and seed, at which its test would have
    80% power, and the verdict each would resolve to. Where an end of an interval that the verdict
    reads lies within its Monte Carlo error of the value it is read against, the claim draws twice
    the replicates, up to ``max_replicates``, and says in ``settled`` whether that was enough. A
    claim the run has no cell of has one row, verdict "not run"."""
    claims = CLAIMS if claims is None else claims
    alpha = 1.0 - level
    index: dict[tuple[str, str], dict[int, dict[tuple[str, str], RunExamples]]] = {}
    for ex in examples:
        meta = ex.meta
        index.setdefault((meta["model"], meta["task"]), {}).setdefault(int(meta["seed"]), {})[
            (meta["variant"], meta["method"])] = ex
    models = sorted({m for m, _ in index})

    def run_cell(cell: Cell):
        variant, method, metric = cell
        return (variant, roles[method], metric) if method in roles else None

    needed = {run_cell(c) for claim in claims for c in [claim.a, *claim.against] if not isinstance(c, float)}
    needed.discard(None)
    values = _Replicates(index, needed, n_boot, seed)

    rows = []
    for model in models:
        tasks = names.order_tasks({t for m, t in index if m == model})
        for claim in claims:
            rows += _test_claim(claim, model, tasks, values, run_cell, level=level, alpha=alpha, n_boot=n_boot,
                                max_replicates=max_replicates)
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.astype({"comparison": "int64", "n_examples": "Int64", "n_seeds": "Int64", "side": "Int64",
                         "n_replicates": "Int64", "settled": "boolean", "redrawn": "boolean",
                         "status": object, "incomplete": object})


@dataclass
class _Task:
    """What a claim has of one task: the seeds it reads, and those it lacks (seed -> why)."""

    seeds: list[int]
    missing: dict[int, str]

    @property
    def incomplete(self) -> str:
        return "; ".join(f"seed {s}: {why}" for s, why in sorted(self.missing.items()))


def _seeds_of(claim: Claim, model: str, tasks: list[str], values: _Replicates, a_cell, b_cells) -> dict[str, _Task]:
    """Per task the claim covers: the seeds with every cell and a defined score, and the seeds that
    lack one ("not run") or whose score is undefined. A task no seed ran the cells of is not the
    claim's (say, a method run on some tasks only)."""
    run_cells = [c for c in [a_cell, *b_cells] if not isinstance(c, float)]
    found = {}
    for task in tasks:
        if task in claim.except_tasks or a_cell is None or any(b is None for b in b_cells):
            continue
        seeds, missing = [], {}
        for s in values.seeds(model, task):
            if not all(values.has(model, task, s, c) for c in run_cells):
                missing[s] = "not run"
            elif not all(math.isfinite(values.point(model, task, s, c)) for c in run_cells):
                missing[s] = "undefined"
            else:
                seeds.append(s)
        if seeds or "undefined" in missing.values():
            found[task] = _Task(seeds, missing)
    return found


def _test_claim(claim: Claim, model: str, tasks: list[str], values: _Replicates, run_cell, *, level: float,
                alpha: float, n_boot: int, max_replicates: int) -> list[dict]:
    scale = display_scale(claim.a[2])
    base = dict(model=model, claim=claim.id, paper=claim.paper, table=claim.table, quantifier=claim.quantifier,
                test=claim.test, unit="points" if scale == 100.0 else "score")
    a_cell = run_cell(claim.a)
    b_cells = [b if isinstance(b, float) else run_cell(b) for b in claim.against]
    covered = _seeds_of(claim, model, tasks, values, a_cell, b_cells)
    if not covered:
        return [dict(base, comparison=0, against=against_label(claim, 0), task="", verdict="not run")]
    n_cells = len(b_cells)
    counted = [t for t, found in covered.items() if found.seeds]  # a task whose every seed is undefined is not
    mean_level = 1.0 - alpha / n_cells
    task_level = 1.0 - alpha / (n_cells * max(len(counted), 1)) if claim.quantifier != "mean" else level

    # each interval gets as many replicates beyond its bounds as n_boot give a plain one (its level's
    # tails), times a power of two where its ends are not yet settled against Monte Carlo error
    times = 1
    while True:
        reps_task = min(times * _n_rep(n_boot, task_level, level), max_replicates)
        reps_mean = min(times * _n_rep(n_boot, mean_level, level), max_replicates)
        per_task = _differences(model, covered, values, a_cell, b_cells, max(reps_task, reps_mean))
        rows, task_units, mean_units, unsettled = _read(claim, covered, per_task, n_cells, task_level, mean_level,
                                                        reps_task, reps_mean, scale, base,
                                                        values.uniforms(MEAN, reps_mean))
        if not unsettled or max(reps_task, reps_mean) >= max_replicates:
            break
        times *= 2
    task_statuses = [[u.status for u in units] for units in task_units.values()]
    mean_statuses = [u.status for u in mean_units]
    verdict = read_quantifier(claim.quantifier, task_statuses, mean_statuses, claim.test)
    need = dict(factor=math.nan, n_needed=math.nan, resolves_to="", seed_factor=math.nan, seeds_needed=math.nan,
                seeds_resolve_to="")
    if verdict == "inconclusive" and any(per_task.values()):
        n_now = max(found[0].n_examples for found in per_task.values() if found)
        seeds_now = max(found[0].n_seeds for found in per_task.values() if found)
        plan_tasks = list(task_units.values())
        plan_mean = mean_units
        for currency, now, (f_key, n_key, r_key) in (
                ("examples", n_now, ("factor", "n_needed", "resolves_to")),
                ("seeds", seeds_now, ("seed_factor", "seeds_needed", "seeds_resolve_to"))):
            factor, resolves_to = needed_factor(claim.quantifier, plan_tasks, plan_mean, claim.direction,
                                                currency=currency, test=claim.test, margin=claim.margin)
            need.update({f_key: factor, r_key: resolves_to,
                         n_key: round(factor * now) if math.isfinite(factor) else math.inf})
    for row in rows:
        row.update(verdict=verdict, settled=not unsettled, redrawn=times > 1, **need)
    return rows


@dataclass(frozen=True)
class _Difference:
    """a - b on one task and cell b: the mean over the seeds it reads, its replicates, what it rests
    on, a and b (means over seeds), its variance parts and the examples' part of its replicates (what
    the mean over tasks combines)."""

    value: float
    replicates: np.ndarray
    n_examples: int
    n_seeds: int
    a: float
    b: float
    spread: inference.Spread
    examples: np.ndarray


def _differences(model: str, covered: dict[str, _Task], values: _Replicates, a_cell, b_cells, n_rep: int):
    """Per task, per cell b: the difference a - b (mean over the seeds it reads), its replicates on
    the crossed design, the examples and seeds it rests on, a and b (means over seeds), and its
    :class:`inference.Spread`. An empty list for a task with no seed to read."""
    per_task = {}
    for task, found in covered.items():
        if not found.seeds:
            per_task[task] = []
            continue
        cells = [a_cell, *[b for b in b_cells if not isinstance(b, float)]]
        got = values.get(model, task, found.seeds, cells, n_rep)
        uniforms = values.uniforms(task, n_rep)
        rows = []
        for b in b_cells:
            points_a, points_b, reps = [], [], []
            for s in found.seeds:
                value_a, reps_a, n = got[s][a_cell]
                value_b, reps_b = (b, b) if isinstance(b, float) else got[s][b][:2]
                points_a.append(value_a)
                points_b.append(value_b)
                reps.append(reps_a - reps_b)
            examples, spread = inference.crossed_replicates(np.subtract(points_a, points_b), np.stack(reps))
            spread = inference.Spread(*(float(np.asarray(x)) for x in (spread.n_seeds, spread.seeds_var,
                                                                        spread.shared, spread.unshared)), n_examples=n)
            replicates = examples + inference.seeds_part(spread, uniforms)
            replicates = resampling.within_range(replicates, *_difference_range(a_cell, b))
            rows.append(_Difference(float(np.mean(points_a) - np.mean(points_b)), replicates, n, len(found.seeds),
                                    float(np.mean(points_a)), float(np.mean(points_b)), spread, examples))
        per_task[task] = rows
    return per_task


def _difference_range(a_cell, b) -> tuple[float, float]:
    """The values a - b can take, a a cell and b a cell or a constant (``units.metric_range``)."""
    low_a, high_a = metric_range(a_cell[2])
    low_b, high_b = (b, b) if isinstance(b, float) else metric_range(b[2])
    return low_a - high_b, high_a - low_b


def _read(claim: Claim, covered: dict[str, _Task], per_task: dict, n_cells: int, task_level: float,
          mean_level: float, reps_task: int, reps_mean: int, scale: float, base: dict, mean_uniforms: np.ndarray):
    """The rows of a claim's tests; per task and for the mean, per cell b, the :class:`Unit` of each
    interval (its reading in ``status``); and whether an end of an interval the verdict reads lies within the
    bootstrap's Monte Carlo error of the value it is read against."""
    rows, task_units, mean_units = [], {t: [] for t, f in covered.items() if f.seeds}, []
    unsettled = False
    margin = claim.margin
    threshold = -claim.direction * margin if claim.test == "non_inferiority" else 0.0
    complete = all(not f.missing for t, f in covered.items() if f.seeds)
    for j in range(n_cells):
        for task, found in covered.items():
            row = dict(base, comparison=j, against=against_label(claim, j), task=task, level=task_level,
                       margin=scale * margin, incomplete=found.incomplete, n_seeds=len(found.seeds))
            if not found.seeds:
                rows.append(dict(row, difference=math.nan, ci_low=math.nan, ci_high=math.nan, side=0,
                                 status="undefined"))
                continue
            d = per_task[task][j]
            reps = d.replicates[:reps_task]
            low, high = resampling.percentile_interval(reps, task_level)
            read = status(low, high, claim.direction, claim.test, margin) if not found.missing else "incomplete"
            if claim.quantifier != "mean" and not found.missing:
                unsettled |= any(resampling.endpoint_unsettled(reps - threshold, task_level))
            task_units[task].append(Unit(d.value, task_level, (d.spread,), read))
            rows.append(dict(row, n_examples=d.n_examples, a=scale * d.a, b=scale * d.b,
                             difference=scale * d.value, ci_low=scale * low, ci_high=scale * high,
                             side=_SIDES.get(read, 0), status=read,
                             seed_share=_share(d.spread.between, d.spread.within),
                             df=inference.mean_variance([d.spread])[1], n_replicates=len(reps)))
        found_j = [per_task[t][j] for t in task_units]
        if not found_j:  # every task undefined: nothing to read
            mean_units.append(Unit(math.nan, mean_level, ()))
            rows.append(dict(base, comparison=j, against=against_label(claim, j), task=MEAN, level=mean_level,
                             margin=scale * margin, difference=math.nan, ci_low=math.nan, ci_high=math.nan, side=0,
                             status="undefined", incomplete=""))
            continue
        diff = float(np.mean([f.value for f in found_j]))
        spreads = tuple(f.spread for f in found_j)
        reps = inference.mean_of_tasks([f.examples[:reps_mean] for f in found_j], list(spreads),
                                       mean_uniforms[:reps_mean])
        reps = resampling.within_range(reps, *_difference_range(claim.a, claim.against[j]))
        low, high = resampling.percentile_interval(reps, mean_level)
        read = status(low, high, claim.direction, claim.test, margin) if complete else "incomplete"
        if claim.quantifier == "mean" and complete:
            unsettled |= any(resampling.endpoint_unsettled(reps - threshold, mean_level))
        mean_units.append(Unit(diff, mean_level, spreads, read))
        rows.append(dict(base, comparison=j, against=against_label(claim, j), task=MEAN,
                         n_examples=max(f.n_examples for f in found_j), n_seeds=max(f.n_seeds for f in found_j),
                         a=scale * float(np.mean([f.a for f in found_j])),
                         b=scale * float(np.mean([f.b for f in found_j])),
                         difference=scale * diff, ci_low=scale * low, ci_high=scale * high, level=mean_level,
                         margin=scale * margin, side=_SIDES.get(read, 0), status=read,
                         incomplete="" if complete else "a task is incomplete",
                         seed_share=_share(sum(float(s.between) for s in spreads), sum(float(s.within) for s in spreads)),
                         df=inference.mean_variance(list(spreads))[1], n_replicates=len(reps)))
    return rows, task_units, mean_units, unsettled


def _share(between, within) -> float:
    """The part of an interval's variance that the spread between seeds contributes."""
    between, within = float(between), float(within)
    total = between + within
    return between / total if total > 0 else 0.0


def _n_rep(n_boot: int, interval_level: float, level: float) -> int:
    """Replicates for an interval at ``interval_level``: as many beyond each bound as ``n_boot``
    give a plain interval at ``level``."""
    return max(n_boot, math.ceil(n_boot * (1.0 - level) / (1.0 - interval_level) - 1e-9))


def against_label(claim: Claim, j: int) -> str:
    b = claim.against[j]
    if isinstance(b, float):
        return f"{100 * b:g}%" if in_percent(claim.a[2]) else f"{b:g}"
    return cell_label(b, {})


def cell_label(cell: Cell, roles: dict[str, str]) -> str:
    variant, method, metric = cell
    return (f"{names.metric_label(metric)} ({names.method_label(roles.get(method, method))}, "
            f"{names.variant_label(variant, in_text=True)})")


def write_claim_tests(example_paths: list[str], parquet_path: str, csv_path: str, roles: dict[str, str], *,
                      order_paths: list[str] = (), n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """The claims evaluated (:func:`evaluate_claims`) on the runs' per-example files, as parquet and
    CSV. ``order_paths``: the runs that also ran in further orders (``orders.order_sensitivity``),
    which stand in for their own order's file."""
    with_orders = {run_key(ex.meta): ex for ex in map(read_examples, order_paths)}
    examples = [with_orders.get(run_key(ex.meta), ex) for ex in map(read_examples, example_paths)]
    table = evaluate_claims(examples, roles, n_boot=n_boot, level=level, seed=seed)
    atomic_write_frame(table, parquet_path, runs_provenance(examples))
    write_csv(table, csv_path)
    counts = table.drop_duplicates(["model", "claim"])["verdict"].value_counts().to_dict()
    log.info("claims: %s", ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS))
    return table
