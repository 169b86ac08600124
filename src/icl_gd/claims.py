"""The papers' qualitative claims, each tested on a run with the uncertainty its sample carries.

A claim compares two cells per task, ``a`` and ``b`` ((variant, published method, metric); ``b``
may be a constant, or several cells that must each hold), in a claimed direction, under a
quantifier the paper uses: on every task (but named ones), on all tasks but one, on most (more than
half), or on the mean over tasks.

Per task the difference a - b is that of the run's scores, seeds combined as the summary combines
them (the mean over seeds). Its interval is a paired two-level percentile bootstrap: every setting
and variant of a task and seed evaluates the same example ids, so a and b are resampled together,
by example id, within each seed; the seeds are drawn with replacement on top, their deviations
shrunk to the spread their examples do not explain (:func:`metrics.two_level_replicates`, as
``scoring.seed_mean_intervals`` does for one cell). Tasks are resampled independently, so a
replicate of the mean over tasks is the mean of the tasks'. Where an end of an interval that the
verdict reads lies within the bootstrap's own Monte Carlo error of zero, the claim draws more
replicates (the same streams, extended) until it does not, or says that it stayed unsettled.

The verdict, at the report's level 1 - alpha (``statistics.ci_level``), is read on the intervals:

* on the mean over tasks: the interval of the mean difference (at 1 - alpha/m for m cells b) lies
  on the claimed side: *supported*; on the other side: *contradicted*.
* the per-task quantifiers: each task's interval is at 1 - alpha/m, m = tasks x cells b
  (Bonferroni), so that all of a claim's per-task readings hold together with probability at least
  1 - alpha. A task *holds* where its intervals lie on the claimed side, *breaks* where one lies on
  the other. every: all hold / one breaks; all but one: all but one hold (and at least one) / two
  break (one, of a single task); most: more than half hold / at least half break.
* otherwise *inconclusive*; *not run* where the run lacks a cell. Claims are not corrected for
  one another: each is its own question.

For an inconclusive claim, :func:`needed_factor` says by how much the evaluation examples per task
and seed, or the seeds, would have to grow for the observed differences to give a verdict at the
same level, from the run's own variance: more seeds narrow the whole interval (as 1/sqrt(seeds)),
more examples only the part of it that the examples contribute.
"""

from __future__ import annotations

import logging
import math
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import labels, metrics
from .cache import atomic_write_frame
from .scoring import RunExamples, _layer_mean, _write_csv, positions_of, read_examples, run_key, runs_provenance

log = logging.getLogger(__name__)

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

    @property
    def against(self) -> list[Cell | float]:
        return list(self.b) if isinstance(self.b, tuple) else [self.b]


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
          "ICL is more accurate than finetuning, on average over tasks",
          ("trained", "gd", "acc_icl"), (("trained", "gd", "acc_ft"),), +1, "mean",
          note='the paper: "average difference of 19.38%"; its Table 1 gives a mean gap of 9.73 points'),
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
               "GD one demonstration at a time is order-sensitive too; needs orders > 1"),
)
QUANTIFIERS = {
    "every": "on every task",
    "all_but_one": "on all tasks but one",
    "most": "on most tasks",
    "mean": "on the mean over tasks",
}
VERDICTS = ("supported", "contradicted", "inconclusive", "not run")
MEAN = "mean"  # the task of a claim test's row for the mean over tasks
COLUMNS = ["model", "claim", "paper", "table", "quantifier", "comparison", "against", "task", "n_examples",
           "n_seeds", "a", "b", "difference", "ci_low", "ci_high", "level", "side", "seed_share", "n_replicates",
           "unit", "verdict", "settled", "redrawn", "factor", "n_needed", "resolves_to", "seed_factor", "seeds_needed",
           "seeds_resolve_to"]


def _percent(metric: str) -> bool:
    return metric in labels.FRACTION_METRICS


# --------------------------------------------------------------------------------------------
# reading a quantifier on the intervals


def side(difference_low: float, difference_high: float, direction: int) -> int:
    """+1 where the interval lies strictly on the claimed side of zero, -1 where strictly on the
    other, 0 where it holds zero (or is undefined)."""
    if not (math.isfinite(difference_low) and math.isfinite(difference_high)):
        return 0
    if direction * difference_low > 0 and direction * difference_high > 0:
        return 1
    if direction * difference_low < 0 and direction * difference_high < 0:
        return -1
    return 0


def read_quantifier(quantifier: str, task_sides: list[list[int]], mean_sides: list[int]) -> str:
    """The verdict from the sides (:func:`side`) of each task's intervals (one per cell b) and of
    the mean's: supported, contradicted or inconclusive."""
    if quantifier == "mean":
        if mean_sides and all(s == 1 for s in mean_sides):
            return "supported"
        return "contradicted" if any(s == -1 for s in mean_sides) else "inconclusive"
    n = len(task_sides)
    holds = sum(all(s == 1 for s in sides) for sides in task_sides)
    breaks = sum(any(s == -1 for s in sides) for sides in task_sides)
    supported, contradicted = {
        "every": (holds == n, breaks >= 1),
        "all_but_one": (holds >= max(n - 1, 1), breaks >= min(2, n)),
        "most": (holds > n / 2, breaks >= n / 2),
    }[quantifier]
    if n and supported:
        return "supported"
    return "contradicted" if n and contradicted else "inconclusive"


def _resolving_factor(difference: float, low: float, high: float, seed_share: float = 0.0,
                      currency: str = "examples") -> float:
    """By how much the evaluation examples per seed (``currency`` "examples") or the seeds
    ("seeds") must grow for an interval to exclude zero on the side of its point estimate; inf
    where the difference is zero, or where more examples cannot narrow it enough.

    The interval's half-width toward zero, h, follows its variance B + W (``seed_share`` = B /
    (B + W) from the seeds' spread, W from the examples); more seeds divide both, more examples
    W only. So with r = (d / h)^2: seeds x 1/r; examples x (1 - share) / (r - share), none where
    r <= share (the seeds' spread alone is wider than the difference)."""
    if not all(map(math.isfinite, (difference, low, high))) or difference == 0:
        return math.inf
    toward_zero = difference - low if difference > 0 else high - difference
    if toward_zero <= 0:
        return 1.0
    r = (difference / toward_zero) ** 2
    share = min(max(seed_share if math.isfinite(seed_share) else 0.0, 0.0), 1.0)
    if currency == "seeds" or share == 0.0:
        return 1.0 / r
    return (1.0 - share) / (r - share) if r > share else math.inf


def needed_factor(quantifier: str, tasks: list[list[tuple]], mean: list[tuple], direction: int, *,
                  currency: str = "examples") -> tuple[float, str]:
    """The smallest factor on the examples per task and seed (or on the seeds) at which the
    observed differences ((difference, low, high[, share of the seeds' spread]) per task and cell
    b, and of the mean) would give a verdict at the same level, and that verdict; (inf,
    "inconclusive") where no size would."""
    def factor(unit) -> float:
        return _resolving_factor(*unit[:3], *(unit[3:4] or [0.0]), currency=currency)

    units = [u for row in tasks for u in row] if quantifier != "mean" else list(mean)
    factors = [factor(u) for u in units]

    def verdict_at(f: float) -> str:
        def sides(row):  # an interval that only touches zero does not exclude it
            return [int(np.sign(u[0])) * direction if factor(u) < f else 0 for u in row]
        return read_quantifier(quantifier, [sides(row) for row in tasks], sides(mean))

    for f in sorted(max(f, 1.0) * (1 + 1e-9) for f in factors if math.isfinite(f)):
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
        return metrics.bootstrap_ratios(*terms, counts)
    return _layer_mean(metrics.bootstrap_means(terms, counts))


class _Replicates:
    """The bootstrap replicates of every cell of every (model, task, seed), drawn in chunks of
    ``chunk`` as they are asked for: asking for more extends the same streams (the first
    chunks are the same whatever the total), so a claim whose verdict the bootstrap's own noise
    could flip can draw more (:data:`MAX_REPLICATES`) without changing any other claim's."""

    def __init__(self, index, cells: set[tuple[str, str, str]], chunk: int, seed: int):
        self.index, self.cells, self.chunk, self.seed = index, cells, chunk, seed
        self._runs: dict[tuple, tuple] = {}  # (model, task, seed) -> (ids, terms per cell)
        self._reps: dict[tuple, list[np.ndarray]] = {}  # (model, task, seed, *cell) -> chunks

    def _prepared(self, model: str, task: str, s: int):
        key = (model, task, s)
        if key not in self._runs:
            runs = self.index[(model, task)][s]
            present = {(v, m) for v, m, _ in self.cells if (v, m) in runs}
            ids = None
            for run in sorted(present):
                run_ids = np.asarray(runs[run].example_id)
                ids = run_ids if ids is None else np.intersect1d(ids, run_ids)
            ids = np.unique(ids) if ids is not None else np.zeros(0, np.int64)
            for run in sorted(present):
                if len(ids) != len(runs[run].example_id):
                    log.warning("%s: the runs of this task and seed evaluate different examples; the claims pair "
                                "the %d they share", "/".join(run), len(ids))
            rows = {run: positions_of(runs[run].example_id, ids) for run in present}
            terms = {c: _cell_terms(runs[c[:2]], c[2], rows[c[:2]]) for c in self.cells
                     if c[:2] in present and (c[2] in runs[c[:2]].ratio_names or c[2] in runs[c[:2]].similarities)}
            ones = np.ones((1, len(ids)))
            points = {c: float(_statistic(t, ones)[0]) for c, t in terms.items()}
            self._runs[key] = (ids, terms, points)
        return self._runs[key]

    def has(self, model: str, task: str, s: int, cell) -> bool:
        return cell in self._prepared(model, task, s)[1]

    def get(self, model: str, task: str, s: int, cells: list, n_rep: int) -> dict:
        """{cell: (point, replicates[:n_rep], n examples)} for ``cells`` of one task and seed."""
        ids, terms, points = self._prepared(model, task, s)
        n_chunks = -(-n_rep // self.chunk)
        short = [c for c in cells if len(self._reps.setdefault((model, task, s, *c), [])) < n_chunks]
        for j in range(min((len(self._reps[(model, task, s, *c)]) for c in short), default=n_chunks), n_chunks):
            counts = metrics.bootstrap_counts(len(ids), self.chunk, np.random.default_rng(
                [self.seed, s, zlib.crc32(task.encode()), j]))
            for c in short:
                chunks = self._reps[(model, task, s, *c)]
                if len(chunks) == j:
                    chunks.append(_statistic(terms[c], counts))
        return {c: (points[c], np.concatenate(self._reps[(model, task, s, *c)])[:n_rep], len(ids)) for c in cells}

    def draws(self, task: str, n_seeds: int, n_rep: int) -> np.ndarray:
        """The seeds each replicate of a task draws (its second level), chunk by chunk as above."""
        return np.concatenate([
            metrics.seed_draws(n_seeds, self.chunk, np.random.default_rng([self.seed, zlib.crc32(task.encode()), j]))
            for j in range(-(-n_rep // self.chunk))])[:n_rep]


# the most replicates a claim draws to settle an interval's end against its Monte Carlo error
MAX_REPLICATES = 2**20


def evaluate_claims(examples: list[RunExamples], roles: dict[str, str], *, n_boot: int = 1000, level: float = 0.95,
                    seed: int = 0, claims: tuple[Claim, ...] | None = None,
                    max_replicates: int = MAX_REPLICATES) -> pd.DataFrame:
    """Every claim on every model of ``examples``: one row per (claim, cell b, task), and one for
    the mean over tasks (task :data:`MEAN`), with the difference a - b (points for a percentage,
    else the score's own unit), its paired two-level interval (examples within seeds, and seeds)
    at the level its quantifier reads it, the side it lies on, and the claim's verdict; for an
    inconclusive claim, the factor on the examples per task and seed, and on the seeds, that
    would resolve it and the verdict each would resolve to. Where an end of an interval that the
    verdict reads lies within its Monte Carlo error of zero, the claim draws twice the replicates,
    up to ``max_replicates``, and says in ``settled`` whether that was enough. A claim the run has
    no cell of has one row, verdict "not run"."""
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
        tasks = labels.order_tasks({t for m, t in index if m == model})
        for claim in claims:
            rows += _test_claim(claim, model, tasks, index, values, run_cell, level=level, alpha=alpha, n_boot=n_boot,
                                max_replicates=max_replicates)
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.astype({"comparison": "int64", "n_examples": "Int64", "n_seeds": "Int64", "side": "Int64",
                         "n_replicates": "Int64", "settled": "boolean",
                         "redrawn": "boolean"})


def _test_claim(claim: Claim, model: str, tasks: list[str], index, values: _Replicates, run_cell, *, level: float,
                alpha: float, n_boot: int, max_replicates: int) -> list[dict]:
    scale = 100.0 if _percent(claim.a[2]) else 1.0
    base = dict(model=model, claim=claim.id, paper=claim.paper, table=claim.table, quantifier=claim.quantifier,
                unit="points" if scale == 100.0 else "score")
    a_cell = run_cell(claim.a)
    b_cells = [b if isinstance(b, float) else run_cell(b) for b in claim.against]
    run_cells = [c for c in [a_cell, *b_cells] if not isinstance(c, float)]
    seeds_of = {}  # task -> the seeds that have every cell of the claim
    for task in tasks:
        if task in claim.except_tasks or a_cell is None or any(b is None for b in b_cells):
            continue
        seeds = [s for s in sorted(index[(model, task)])
                 if all(values.has(model, task, s, c) for c in run_cells)]
        if seeds:
            seeds_of[task] = seeds
    n_cells = len(b_cells)
    mean_level = 1.0 - alpha / n_cells

    def task_level(n_tasks: int) -> float:
        return 1.0 - alpha / (n_cells * max(n_tasks, 1)) if claim.quantifier != "mean" else level

    # each interval gets as many replicates beyond its bounds as n_boot give a plain one (its level's
    # tails), times a power of two where its ends are not yet settled against Monte Carlo error
    times = 1
    while True:
        drawn = times * max(_n_rep(n_boot, task_level(len(seeds_of)), level), _n_rep(n_boot, mean_level, level))
        per_task = _differences(model, seeds_of, values, a_cell, b_cells, min(drawn, max_replicates))
        if not per_task:
            return [dict(base, comparison=0, against=_against_label(claim, 0), task="", verdict="not run")]
        level_t = task_level(len(per_task))  # the tasks where a - b is defined
        reps_task = min(times * _n_rep(n_boot, level_t, level), max_replicates)
        reps_mean = min(times * _n_rep(n_boot, mean_level, level), max_replicates)
        rows, task_units, mean_units, unsettled = _read(claim, per_task, n_cells, level_t, mean_level,
                                                        reps_task, reps_mean, scale, base)
        if not unsettled or drawn >= max_replicates:
            break
        times *= 2
    task_sides = [[side(lo, hi, claim.direction) for _, lo, hi, _ in units] for units in task_units.values()]
    mean_sides = [side(lo, hi, claim.direction) for _, lo, hi, _ in mean_units]
    verdict = read_quantifier(claim.quantifier, task_sides, mean_sides)
    need = dict(factor=math.nan, n_needed=math.nan, resolves_to="", seed_factor=math.nan, seeds_needed=math.nan,
                seeds_resolve_to="")
    if verdict == "inconclusive":
        n_now = max(found[0][2] for found in per_task.values())
        seeds_now = max(found[0][3] for found in per_task.values())
        for currency, now, (f_key, n_key, r_key) in (
                ("examples", n_now, ("factor", "n_needed", "resolves_to")),
                ("seeds", seeds_now, ("seed_factor", "seeds_needed", "seeds_resolve_to"))):
            factor, resolves_to = needed_factor(claim.quantifier, list(task_units.values()), mean_units,
                                                claim.direction, currency=currency)
            need.update({f_key: factor, r_key: resolves_to,
                         n_key: math.ceil(factor * now) if math.isfinite(factor) else math.inf})
    for row in rows:
        row.update(verdict=verdict, settled=not unsettled, redrawn=times > 1, **need)
    return rows


def _differences(model: str, seeds_of: dict[str, list[int]], values: _Replicates, a_cell, b_cells, n_rep: int):
    """Per task, per cell b: the difference a - b (mean over seeds), its two-level replicates, the
    examples and seeds it rests on, a and b (means over seeds), and the variance of the mean that
    the seeds' spread and the examples contribute."""
    per_task = {}
    for task, seeds in seeds_of.items():
        got = {s: values.get(model, task, s, [a_cell, *[b for b in b_cells if not isinstance(b, float)]], n_rep)
               for s in seeds}
        draws = values.draws(task, len(seeds), n_rep)
        found = []
        for b in b_cells:
            points_a, points_b, reps, sizes = [], [], [], []
            for s in seeds:
                value_a, reps_a, n = got[s][a_cell]
                value_b, reps_b = (b, b) if isinstance(b, float) else got[s][b][:2]
                points_a.append(value_a)
                points_b.append(value_b)
                reps.append(reps_a - reps_b)
                sizes.append(n)
            replicates, between, within = metrics.two_level_replicates(
                np.subtract(points_a, points_b), np.stack(reps), draws)
            replicates = metrics.within_range(replicates, *_difference_range(a_cell, b))
            found.append((float(np.mean(points_a) - np.mean(points_b)), replicates, max(sizes), len(seeds),
                          float(np.mean(points_a)), float(np.mean(points_b)), float(between), float(within)))
        if all(math.isfinite(f[0]) for f in found):  # else a score undefined on this task (say, no change)
            per_task[task] = found
    return per_task


def _difference_range(a_cell, b) -> tuple[float, float]:
    """The values a - b can take, a a cell and b a cell or a constant (:func:`metrics.metric_range`)."""
    low_a, high_a = metrics.metric_range(a_cell[2])
    low_b, high_b = (b, b) if isinstance(b, float) else metrics.metric_range(b[2])
    return low_a - high_b, high_a - low_b


def _read(claim: Claim, per_task: dict, n_cells: int, task_level: float, mean_level: float, reps_task: int,
          reps_mean: int, scale: float, base: dict):
    """The rows of a claim's tests, the (difference, low, high, share of the seeds' spread) of the
    intervals per task and of the mean, and whether an end of an interval the verdict reads lies
    within the bootstrap's Monte Carlo error of zero."""
    rows, task_units, mean_units = [], {t: [] for t in per_task}, []
    unsettled = False
    for j in range(n_cells):
        for task, found in per_task.items():
            diff, reps, n, n_seeds, a, b, between, within = found[j]
            reps = reps[:reps_task]
            low, high = metrics.percentile_interval(reps, task_level)
            if claim.quantifier != "mean":
                unsettled |= any(metrics.endpoint_unsettled(reps, task_level))
            task_units[task].append((diff, low, high, _share(between, within)))
            rows.append(dict(base, comparison=j, against=_against_label(claim, j), task=task, n_examples=n,
                             n_seeds=n_seeds, a=scale * a, b=scale * b, difference=scale * diff,
                             ci_low=scale * low, ci_high=scale * high, level=task_level,
                             side=side(low, high, claim.direction), seed_share=_share(between, within),
                             n_replicates=len(reps)))
        found_j = [found[j] for found in per_task.values()]
        diff = float(np.mean([f[0] for f in found_j]))
        reps = np.mean(np.stack([f[1][:reps_mean] for f in found_j]), axis=0)
        low, high = metrics.percentile_interval(reps, mean_level)
        if claim.quantifier == "mean":
            unsettled |= any(metrics.endpoint_unsettled(reps, mean_level))
        share = _share(sum(f[6] for f in found_j), sum(f[7] for f in found_j))
        mean_units.append((diff, low, high, share))
        rows.append(dict(base, comparison=j, against=_against_label(claim, j), task=MEAN,
                         n_examples=max(f[2] for f in found_j), n_seeds=max(f[3] for f in found_j),
                         a=scale * float(np.mean([f[4] for f in found_j])),
                         b=scale * float(np.mean([f[5] for f in found_j])),
                         difference=scale * diff, ci_low=scale * low, ci_high=scale * high, level=mean_level,
                         side=side(low, high, claim.direction), seed_share=share, n_replicates=len(reps)))
    return rows, task_units, mean_units, unsettled


def _share(between: float, within: float) -> float:
    """The part of an interval's variance that the spread between seeds contributes."""
    total = between + within
    return between / total if total > 0 else 0.0


def _n_rep(n_boot: int, interval_level: float, level: float) -> int:
    """Replicates for an interval at ``interval_level``: as many beyond each bound as ``n_boot``
    give a plain interval at ``level``."""
    return max(n_boot, math.ceil(n_boot * (1.0 - level) / (1.0 - interval_level) - 1e-9))


def _against_label(claim: Claim, j: int) -> str:
    b = claim.against[j]
    if isinstance(b, float):
        return f"{100 * b:g}%" if _percent(claim.a[2]) else f"{b:g}"
    return _cell_label(b, {})


def _cell_label(cell: Cell, roles: dict[str, str]) -> str:
    variant, method, metric = cell
    return (f"{labels.metric_label(metric)} ({labels.method_label(roles.get(method, method))}, "
            f"{labels.variant_label(variant, in_text=True)})")


def write_claim_tests(example_paths: list[str], parquet_path: str, csv_path: str, roles: dict[str, str], *,
                      order_paths: list[str] = (), n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """The claims evaluated (:func:`evaluate_claims`) on the runs' per-example files, as parquet and
    CSV. ``order_paths``: the runs that also ran in further orders (``orders.order_sensitivity``),
    which stand in for their own order's file."""
    with_orders = {run_key(ex.meta): ex for ex in map(read_examples, order_paths)}
    examples = [with_orders.get(run_key(ex.meta), ex) for ex in map(read_examples, example_paths)]
    table = evaluate_claims(examples, roles, n_boot=n_boot, level=level, seed=seed)
    atomic_write_frame(table, parquet_path, runs_provenance(examples))
    _write_csv(table, csv_path)
    counts = table.drop_duplicates(["model", "claim"])["verdict"].value_counts().to_dict()
    log.info("claims: %s", ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS))
    return table


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
    if not math.isfinite(row.difference):
        return "—"
    return f"{row.difference:+.{decimals}f} [{row.ci_low:+.{decimals}f}, {row.ci_high:+.{decimals}f}]"


def needed_text(row) -> str:
    """What an inconclusive claim would need, in words, in both currencies: evaluation examples
    per task and seed, or seeds (a claims row: verdict, factor, n_needed, resolves_to,
    seed_factor, seeds_needed, seeds_resolve_to)."""
    if row.verdict != "inconclusive":
        return ""
    examples_ok = math.isfinite(row.factor)
    seed_factor = getattr(row, "seed_factor", math.nan)
    seeds_ok = isinstance(seed_factor, float) and math.isfinite(seed_factor)
    if not examples_ok and not seeds_ok:
        return "none: a difference of 0 (or too few defined) where the claim needs a side"
    parts = []
    if examples_ok:
        parts.append(f"{int(row.n_needed)} examples per seed (x{row.factor:.1f}) -> {row.resolves_to}")
    else:
        parts.append("no number of examples (the seeds' spread alone is too wide)")
    if seeds_ok:
        one_seed = int(getattr(row, "n_seeds", 2) or 2) < 2  # nothing yet says how far seeds spread
        parts.append(f"{int(row.seeds_needed)} seeds (x{seed_factor:.1f}) -> {row.seeds_resolve_to}"
                     + (" if seeds spread no more than their examples" if one_seed else ""))
    return "; or ".join(parts)


def claims_table(tests: pd.DataFrame, model: str, roles: dict[str, str], *, ci_level: float = 0.95) -> pd.DataFrame:
    """One row per claim and cell b: the test in words, the level each task's interval is read
    at, per task the difference a - b [interval], the mean over tasks [interval], how many tasks
    lie on the claimed side, on the other, or hold zero, the verdict, and what an inconclusive one
    would need. Footnotes count the verdicts and state the rule."""
    tests = tests[tests["model"] == model]
    tasks = labels.order_tasks(t for t in tests["task"] if t not in ("", MEAN))
    columns = ["Read on", *map(labels.task_label, tasks), "Mean over tasks", "Tasks: claimed / other / open",
               "Verdict", "Needed for a verdict"]
    rows, keys, verdict_of = [], [], verdicts(tests)
    for claim in CLAIMS:
        found = tests[tests["claim"] == claim.id]
        text = claim.text + (f" ({claim.note})" if claim.note else "")
        verdict = verdict_of[claim.id]
        for j in range(len(claim.against)):
            statement = _statement(claim, roles, j)
            keys.append((claim.paper, claim.table, text, statement))
            part = found[found["comparison"] == j]
            if verdict == "not run" or part.empty:
                rows.append([QUANTIFIERS[claim.quantifier], *["—"] * len(tasks), "—", "—", "not run", ""])
                continue
            by_task = {r.task: r for r in part.itertuples(index=False)}
            decimals = _decimals(part["unit"].iloc[0], (part["ci_high"] - part["ci_low"]).tolist())
            task_rows = [by_task[t] for t in tasks if t in by_task]
            first = task_rows[0] if task_rows else by_task[MEAN]
            counts = [sum(int(r.side) == s for r in task_rows) for s in (1, -1, 0)]
            read = QUANTIFIERS[claim.quantifier]
            if claim.except_tasks:
                read += " but " + ", ".join(map(labels.task_label, claim.except_tasks))
            level = by_task[MEAN].level if claim.quantifier == "mean" else first.level
            read += f" ({percent_text(level)} intervals)"
            needed = needed_text(first) if j == 0 else ""
            rows.append([read, *[_interval(by_task[t], decimals) if t in by_task else "—" for t in tasks],
                         _interval(by_task[MEAN], decimals), " / ".join(map(str, counts)),
                         verdict if _settled(first) else f"{verdict} (bootstrap-limited)", needed])
    index = pd.MultiIndex.from_tuples(keys, names=["Paper", "Table", "Claim", "Test"])
    table = pd.DataFrame(rows, index=index, columns=columns, dtype=object)
    counts = {v: sum(x == v for x in verdict_of.values()) for v in VERDICTS}
    table.attrs.update(best=[], table="claims", blank_levels=3, footnotes=[
        f"{counts['supported']} supported, {counts['contradicted']} contradicted, {counts['inconclusive']} "
        f"inconclusive, {counts['not run']} not run (of {len(CLAIMS)} claims).",
        interval_text(tests) + f" Quantifiers over tasks read each task's interval at 1 - alpha/m (Bonferroni over "
        f"the m tasks x cells b; alpha = {1 - ci_level:.3g}); 'on the mean' reads the interval of the mean over "
        f"tasks at {percent_text(ci_level)} (1 - alpha/m for m cells b). Supported: the claimed side holds wherever "
        f"the quantifier needs it; contradicted: the other side holds on enough tasks to break it; else "
        f"inconclusive. No correction across claims.",
        replicates_text(tests),
        needed_footnote(tests),
    ])
    return table


def _settled(row) -> bool:
    return not (getattr(row, "settled", True) is False or getattr(row, "settled", True) is np.False_)


def interval_text(tests: pd.DataFrame) -> str:
    """How the claims' intervals were drawn, in words: with several seeds, two levels; with one,
    the examples only."""
    seeds = tests["n_seeds"].dropna()
    if len(seeds) and int(seeds.max()) > 1:
        return ("Per task: a - b, mean over seeds (points for a percentage), with its paired two-level percentile "
                "bootstrap interval: the seeds drawn with replacement, their deviations shrunk to the spread that "
                "their examples do not explain, and the evaluation examples resampled within each seed (a and b "
                "by example id), so that the interval carries both which demonstrations were drawn and which "
                "examples were evaluated.")
    return ("Per task: a - b (points for a percentage), with its paired percentile bootstrap interval over the "
            "evaluation examples (a and b resampled by example id). One seed: the interval covers the examples "
            "only, not the spread between seeds (which demonstrations were drawn).")


def replicates_text(tests: pd.DataFrame) -> str:
    """The footnote on the bootstrap's own Monte Carlo error."""
    claims = tests[tests["verdict"] != "not run"].drop_duplicates(["model", "claim"])
    more = [r.claim for r in claims.itertuples(index=False) if r.redrawn is True or r.redrawn is np.True_]
    unsettled = [r.claim for r in claims.itertuples(index=False) if not _settled(r)]
    text = ("Monte Carlo error: where an end of an interval that a verdict reads lay within 3 binomial standard "
            "errors of zero (the share of replicates beyond zero against the tail), the claim drew twice the "
            f"replicates, up to {MAX_REPLICATES}")
    text += f"; {len(more)} claim(s) needed more" if more else "; none needed more"
    if unsettled:
        text += f"; left unsettled at the cap (marked 'bootstrap-limited'): {', '.join(unsettled)}"
    return text + "."


def needed_footnote(tests: pd.DataFrame) -> str:
    n_examples, seeds = tests["n_examples"].dropna(), tests["n_seeds"].dropna()
    now = f"now {int(n_examples.max())}" if len(n_examples) else "none run"
    seeds_now = f"now {int(seeds.max())}" if len(seeds) else "none run"
    return (f"Needed for a verdict: the evaluation examples per task and seed ({now}), or the seeds ({seeds_now}), "
            f"at which the observed differences would give a verdict at the same level, and that verdict: more "
            f"seeds narrow the whole interval (as 1/sqrt(seeds)), more examples only the examples' part of it, so "
            f"none suffice where the seeds' spread alone is wider than the difference.")


def verdicts(tests: pd.DataFrame) -> dict[str, str]:
    """Each claim's verdict in one model's tests (:func:`evaluate_claims`), "not run" where the
    tests have no row of it."""
    found = tests.drop_duplicates("claim").set_index("claim")["verdict"].to_dict()
    return {claim.id: found.get(claim.id, "not run") for claim in CLAIMS}


def percent_text(level: float) -> str:
    return f"{100 * level:.4g}%"


def _statement(claim: Claim, roles: dict[str, str], j: int) -> str:
    sign = ">" if claim.direction > 0 else "<"
    b = claim.against[j]
    right = _against_label(claim, j) if isinstance(b, float) else _cell_label(b, roles)
    return f"a = {_cell_label(claim.a, roles)} {sign} b = {right}"
