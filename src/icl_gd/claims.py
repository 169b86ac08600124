"""The papers' qualitative claims, each tested on a run with the uncertainty its sample carries.

A claim compares two cells per task, ``a`` and ``b`` ((variant, published method, metric); ``b``
may be a constant, or several cells that must each hold), in a claimed direction, under a
quantifier the paper uses: on every task (but named ones), on all tasks but one, on most (more than
half), or on the mean over tasks.

Per task the difference a - b is that of the run's scores, seeds combined as the summary combines
them (the mean over seeds). Its interval is a paired percentile bootstrap over the evaluation
examples: every setting and variant of a task and seed evaluates the same example ids, so a and b
are resampled together, by example id, within each seed, and a replicate of the seed mean is the
mean of the seeds' replicates (as ``scoring.seed_mean_intervals`` does for one cell). Tasks are
resampled independently, so a replicate of the mean over tasks is the mean of the tasks'.

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
and seed (or, equally, the seeds) would have to grow for the observed differences to give a
verdict at the same level, from the run's own variance (an interval's width shrinks as 1/sqrt(n)).
"""

from __future__ import annotations

import logging
import math
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import labels, metrics
from .cache import atomic_write_frame
from .scoring import RATIOS, RunExamples, _layer_mean, _write_csv, positions_of, read_examples, runs_provenance

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
           "n_seeds", "a", "b", "difference", "ci_low", "ci_high", "level", "side", "unit", "verdict", "factor",
           "n_needed", "resolves_to"]


def _percent(metric: str) -> bool:
    return metric.startswith(("acc_", "jaccard_", "rec2ftp"))


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


def _resolving_factor(difference: float, low: float, high: float) -> float:
    """How many times the examples an interval needs to exclude zero on the side of its point
    estimate, its width shrinking as 1/sqrt(n); inf where the difference is zero."""
    if not all(map(math.isfinite, (difference, low, high))) or difference == 0:
        return math.inf
    toward_zero = difference - low if difference > 0 else high - difference
    return (toward_zero / difference) ** 2


def needed_factor(quantifier: str, tasks: list[list[tuple[float, float, float]]],
                  mean: list[tuple[float, float, float]], direction: int) -> tuple[float, str]:
    """The smallest factor on the examples per task and seed at which the observed differences
    ((difference, low, high) per task and cell b, and of the mean) would give a verdict at the
    same level, and that verdict; (inf, "inconclusive") where no size would."""
    units = [u for row in tasks for u in row] if quantifier != "mean" else list(mean)
    factors = [_resolving_factor(*u) for u in units]

    def verdict_at(f: float) -> str:
        def sides(row):  # an interval that only touches zero does not exclude it
            return [int(np.sign(d)) * direction if _resolving_factor(d, lo, hi) < f else 0 for d, lo, hi in row]
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


def _replicates(runs: dict[tuple[str, str], RunExamples], cells: set[tuple[str, str, str]], n_rep: int,
                chunk: int, rng_key: list[int]) -> dict[tuple[str, str, str], tuple[float, np.ndarray, int]]:
    """For each cell (variant, run method, metric) of one model, task and seed: its point value and
    ``n_rep`` bootstrap replicates, all cells resampled with the same counts over the example ids
    they share, and how many examples that is."""
    present = {(v, m) for v, m, _ in cells if (v, m) in runs}
    if not present:
        return {}
    ids = None
    for key in sorted(present):
        run_ids = np.asarray(runs[key].example_id)
        ids = run_ids if ids is None else np.intersect1d(ids, run_ids)
    ids = np.unique(ids)
    for key in sorted(present):
        if len(ids) != len(runs[key].example_id):
            log.warning("%s: the runs of this task and seed evaluate different examples; the claims pair the %d "
                        "they share", "/".join(key), len(ids))
    rows = {key: positions_of(runs[key].example_id, ids) for key in present}
    terms = {c: _cell_terms(runs[c[:2]], c[2], rows[c[:2]]) for c in cells
             if c[:2] in present and (c[2] in RATIOS or c[2] in runs[c[:2]].similarities)}
    reps: dict[tuple, list[np.ndarray]] = {c: [] for c in terms}
    for start in range(0, n_rep, chunk):  # the first chunks are the same whatever n_rep
        counts = metrics.bootstrap_counts(len(ids), min(chunk, n_rep - start),
                                          np.random.default_rng([*rng_key, start // chunk]))
        for c, t in terms.items():
            reps[c].append(_statistic(t, counts))
    ones = np.ones((1, len(ids)))
    return {c: (float(_statistic(t, ones)[0]), np.concatenate(reps[c]), len(ids)) for c, t in terms.items()}


def evaluate_claims(examples: list[RunExamples], roles: dict[str, str], *, n_boot: int = 1000, level: float = 0.95,
                seed: int = 0, claims: tuple[Claim, ...] | None = None) -> pd.DataFrame:
    """Every claim on every model of ``examples``: one row per (claim, cell b, task), and one for
    the mean over tasks (task :data:`MEAN`), with the difference a - b (points for a percentage,
    else the score's own unit), its paired interval at the level its quantifier reads it, the
    side it lies on, and the claim's verdict, the factor on the examples per task and seed that
    would resolve it and the verdict it would resolve to. A claim the run has no cell of has one
    row, verdict "not run"."""
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
    n_tasks = max([len({t for m, t in index if m == model}) for model in models] or [1])
    # the narrowest interval any claim reads, and as many replicates beyond its bounds as a plain one has
    n_rep = n_boot * max((len(c.against) * (n_tasks if c.quantifier != "mean" else 1) for c in claims), default=1)
    values = {}
    for (model, task), seeds in index.items():
        for s, runs in seeds.items():
            key = [seed, s, zlib.crc32(task.encode())]
            for cell, value in _replicates(runs, needed, n_rep, n_boot, key).items():
                values[(model, task, s, *cell)] = value

    rows = []
    for model in models:
        tasks = labels.order_tasks({t for m, t in index if m == model})
        for claim in claims:
            rows += _test_claim(claim, model, tasks, index, values, run_cell, level=level, alpha=alpha, n_boot=n_boot)
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.astype({"comparison": "int64", "n_examples": "Int64", "n_seeds": "Int64", "side": "Int64"})


def _test_claim(claim: Claim, model: str, tasks: list[str], index, values, run_cell, *, level: float, alpha: float,
                n_boot: int) -> list[dict]:
    scale = 100.0 if _percent(claim.a[2]) else 1.0
    base = dict(model=model, claim=claim.id, paper=claim.paper, table=claim.table, quantifier=claim.quantifier,
                unit="points" if scale == 100.0 else "score")
    a_cell = run_cell(claim.a)
    b_cells = [b if isinstance(b, float) else run_cell(b) for b in claim.against]
    per_task = {}  # task -> [(point diff, replicates, n_examples, n_seeds, a, b) per cell b]
    for task in tasks:
        if task in claim.except_tasks or a_cell is None or any(b is None for b in b_cells):
            continue
        seeds = [s for s in sorted(index[(model, task)]) if (model, task, s, *a_cell) in values and all(
            isinstance(b, float) or (model, task, s, *b) in values for b in b_cells)]
        if not seeds:
            continue
        found = []
        for b in b_cells:
            points_a, points_b, reps, sizes = [], [], [], []
            for s in seeds:
                value_a, reps_a, n = values[(model, task, s, *a_cell)]
                value_b, reps_b = (b, b) if isinstance(b, float) else values[(model, task, s, *b)][:2]
                points_a.append(value_a)
                points_b.append(value_b)
                reps.append(reps_a - reps_b)
                sizes.append(n)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a replicate undefined in every seed stays NaN
                replicates = np.nanmean(np.stack(reps), axis=0)
            found.append((float(np.mean(points_a) - np.mean(points_b)), replicates, max(sizes), len(seeds),
                          float(np.mean(points_a)), float(np.mean(points_b))))
        if all(math.isfinite(f[0]) for f in found):  # else a score undefined on this task (say, no change)
            per_task[task] = found
    if not per_task:
        return [dict(base, comparison=0, against=_against_label(claim, 0), task="", verdict="not run")]

    n_cells = len(b_cells)
    task_level = 1.0 - alpha / (n_cells * len(per_task)) if claim.quantifier != "mean" else level
    mean_level = 1.0 - alpha / n_cells
    rows, task_units, mean_units = [], {t: [] for t in per_task}, []
    for j in range(n_cells):
        for task, found in per_task.items():
            diff, reps, n, n_seeds, a, b = found[j]
            low, high = metrics.percentile_interval(reps[: _n_rep(n_boot, task_level, level)], task_level)
            task_units[task].append((diff, low, high))
            rows.append(dict(base, comparison=j, against=_against_label(claim, j), task=task, n_examples=n,
                             n_seeds=n_seeds, a=scale * a, b=scale * b, difference=scale * diff,
                             ci_low=scale * low, ci_high=scale * high, level=task_level,
                             side=side(low, high, claim.direction)))
        diff = float(np.mean([found[j][0] for found in per_task.values()]))
        reps = np.mean(np.stack([found[j][1] for found in per_task.values()]), axis=0)
        low, high = metrics.percentile_interval(reps[: _n_rep(n_boot, mean_level, level)], mean_level)
        mean_units.append((diff, low, high))
        rows.append(dict(base, comparison=j, against=_against_label(claim, j), task=MEAN,
                         n_examples=max(found[j][2] for found in per_task.values()),
                         n_seeds=max(found[j][3] for found in per_task.values()),
                         a=scale * float(np.mean([found[j][4] for found in per_task.values()])),
                         b=scale * float(np.mean([found[j][5] for found in per_task.values()])),
                         difference=scale * diff, ci_low=scale * low, ci_high=scale * high, level=mean_level,
                         side=side(low, high, claim.direction)))
    task_sides = [[side(lo, hi, claim.direction) for _, lo, hi in units] for units in task_units.values()]
    mean_sides = [side(lo, hi, claim.direction) for _, lo, hi in mean_units]
    verdict = read_quantifier(claim.quantifier, task_sides, mean_sides)
    factor, resolves_to, n_needed = math.nan, "", math.nan
    if verdict == "inconclusive":
        factor, resolves_to = needed_factor(claim.quantifier, list(task_units.values()), mean_units, claim.direction)
        n_now = max(found[0][2] for found in per_task.values())
        n_needed = math.ceil(factor * n_now) if math.isfinite(factor) else math.inf
    for row in rows:
        row.update(verdict=verdict, factor=factor, n_needed=n_needed, resolves_to=resolves_to)
    return rows


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
                      n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """the claims evaluated (:func:`evaluate_claims`) on the runs' per-example files, as parquet and CSV."""
    examples = [read_examples(p) for p in example_paths]
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


def needed_text(verdict: str, factor: float, n_needed: float, resolves_to: str) -> str:
    """What an inconclusive claim would need, in words."""
    if verdict != "inconclusive":
        return ""
    if not math.isfinite(factor):
        return "none: a difference of 0 (or too few defined) where the claim needs a side"
    return f"{int(n_needed)} examples (x{factor:.1f}) -> {resolves_to}"


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
            needed = needed_text(verdict, first.factor, first.n_needed, first.resolves_to) if j == 0 else ""
            rows.append([read, *[_interval(by_task[t], decimals) if t in by_task else "—" for t in tasks],
                         _interval(by_task[MEAN], decimals), " / ".join(map(str, counts)),
                         verdict, needed])
    index = pd.MultiIndex.from_tuples(keys, names=["Paper", "Table", "Claim", "Test"])
    table = pd.DataFrame(rows, index=index, columns=columns, dtype=object)
    counts = {v: sum(x == v for x in verdict_of.values()) for v in VERDICTS}
    n_examples = tests["n_examples"].dropna()
    now = f"now {int(n_examples.max())}" if len(n_examples) else "none run"
    table.attrs.update(best=[], table="claims", blank_levels=3, footnotes=[
        f"{counts['supported']} supported, {counts['contradicted']} contradicted, {counts['inconclusive']} "
        f"inconclusive, {counts['not run']} not run (of {len(CLAIMS)} claims).",
        f"Per task: a - b, mean over seeds (points for a percentage), with its paired percentile bootstrap interval "
        f"over the evaluation examples (a and b resampled by example id, within each seed). Quantifiers over tasks "
        f"read each task's interval at 1 - alpha/m (Bonferroni over the m tasks x cells b; alpha = "
        f"{1 - ci_level:.3g}); 'on the mean' reads the interval of the mean over tasks at {percent_text(ci_level)} "
        f"(1 - alpha/m for m cells b). Supported: the claimed side holds wherever the quantifier needs it; "
        f"contradicted: the other side holds on enough tasks to break it; else inconclusive. No correction "
        f"across claims.",
        f"Needed for a verdict: the evaluation examples per task and seed ({now}) at which the observed "
        f"differences would give a verdict at the same level, an interval narrowing as 1/sqrt(n) (the same "
        f"factor in seeds would do), and that verdict.",
    ])
    return table


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
