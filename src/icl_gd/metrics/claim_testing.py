"""The claims' testing: their paired tests on a run (``metrics.claim_definitions`` states the
claims and how a verdict is read): per claim and task the difference a - b on the crossed seeds x
examples design, its interval drawn from shared resamples of the task's examples
(``metrics.claim_replicates``), redrawn where an end is unsettled, and what an inconclusive claim
would need; the claims' premise (``metrics.premise``) and finetuning's side of it, and each claim
read again over the tasks where the premise holds, and where finetuning learns as well; written as
the claims' and the premise's tables.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from icl_gd.common import names
from icl_gd.common.frames import atomic_write_frame, write_csv
from icl_gd.metrics import inference, premise, resampling
from icl_gd.metrics.catalog import display_scale, value_range
from icl_gd.metrics.claim_definitions import (
    CLAIMS,
    COLUMNS,
    MAX_REPLICATES,
    MEAN,
    SIDES,
    VERDICTS,
    Cell,
    Claim,
    Unit,
    against_label,
    deciding_ends,
    needed_factor,
    read_quantifier,
    status,
)
from icl_gd.metrics.claim_replicates import Replicates
from icl_gd.metrics.scoring import RunExamples, read_examples, run_key, runs_provenance

log = logging.getLogger(__name__)


def evaluate_claims(examples: list[RunExamples], roles: dict[str, str], **options) -> pd.DataFrame:
    """The claims' table of :func:`evaluate` (``options``: its keywords)."""
    return evaluate(examples, roles, **options)[0]


def evaluate(examples: list[RunExamples], roles: dict[str, str], **options) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The claims' and the premise's tables of :func:`evaluate_all` (``options``: its keywords)."""
    return evaluate_all(examples, roles, **options)[:2]


def evaluate_all(
    examples: list[RunExamples],
    roles: dict[str, str],
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    claims: tuple[Claim, ...] | None = None,
    max_replicates: int = MAX_REPLICATES,
    labels: dict[str, list[str]] | None = None,
    premise_examples: list[RunExamples] = (),
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every claim on every model of ``examples``, and their premise. The claims' table: one row per
    (claim, cell b, task), and one for the mean over tasks (task :data:`MEAN`), with the difference
    a - b (points for a percentage, else the score's own unit), its interval on the crossed seeds x
    examples design at the level its quantifier reads it, its status and side, and the claim's
    verdict; for an inconclusive claim, the factor on the seeds, and on the examples per task and
    seed, at which its test would have 80% power, and the verdict each would resolve to. Where an
    end of an interval that the verdict reads lies within its Monte Carlo error of the value it is
    read against, the claim draws twice the replicates, up to ``max_replicates``, and says in
    ``settled`` whether that was enough. A claim the run has no cell of has one row, verdict "not
    run". Each row also says whether the model learns in context on its task, and the claim read
    over only such tasks (:data:`premise.CLAIM_COLUMNS`); for a claim that reads a finetuned model,
    whether every finetuning method it reads learns there as well, and the claim read over only the
    tasks where both learn (:data:`premise.BOTH_COLUMNS`). The premise's table
    (:data:`premise.COLUMNS`): per model and task, ICL against ZSL and against the majority class,
    ICL on permuted labels against the permuted gold's majority class (its three cells Bonferroni
    together, m = tasks x :data:`premise.CELLS`), whether the model learns in context there, and
    ICL's most-predicted class, named by ``labels`` (task -> its label words). Finetuning's side of
    the premise (:data:`premise.METHOD_COLUMNS`): per model, task and method of the trained variant
    (the config's, by its own name), FT against ZSL at the premise's level, and whether it learns.

    ``premise_examples``: runs on seeds that the premise reads and the claims do not
    (``premise.seeds``): the premise's runs without a finetuned model (``scoring.icl_examples``),
    read as those of the method that plays GD in ``roles``, and the finetuning methods'
    (``premise.finetuning``), whose side of the premise then reads them too."""
    claims = CLAIMS if claims is None else claims
    alpha = 1.0 - level
    index = _index(examples)
    models = sorted({m for m, _ in index})
    # the premise's own index: the claims' runs and those of its further seeds, a run with a
    # finetuned model kept where a seed has both
    premise_index = _index(examples)
    premise_role = premise.PREMISE.a[1]
    for ex in sorted(premise_examples, key=lambda ex: ex.pred_ft is None):
        meta = ex.meta
        method = meta["method"] if ex.pred_ft is not None else roles.get(premise_role, meta["method"])
        premise_index.setdefault((meta["model"], meta["task"]), {}).setdefault(int(meta["seed"]), {}).setdefault(
            (meta["variant"], method), ex
        )
    further = {(ex.meta["model"], ex.meta["method"]) for ex in premise_examples if ex.pred_ft is not None}

    def run_cell(cell: Cell):
        variant, method, metric = cell
        return (variant, roles[method], metric) if method in roles else None

    def own_cell(cell: Cell):  # a cell that names the config's method itself (finetuning's side of the premise)
        return cell

    # finetuning's side of the premise: every method of the trained variant, in the order of the runs
    finetuning = {m: [] for m in models}
    for ex in examples:
        if ex.meta["variant"] == "trained" and ex.meta["method"] not in finetuning[ex.meta["model"]]:
            finetuning[ex.meta["model"]].append(ex.meta["method"])
    own = {c for methods in finetuning.values() for m in methods for c in premise.finetuning_claim(m).cells}
    cells = [c for claim in (*claims, *premise.CLAIMS, premise.CALIBRATED, premise.NOVEL) for c in claim.cells]
    needed = {run_cell(c) for c in cells} | own
    needed.discard(None)
    values = Replicates(index, needed, n_boot, seed)
    # the same streams of resamples (they depend on the task alone), over more seeds
    premise_values = Replicates(premise_index, needed, n_boot, seed) if premise_examples else values
    read = dict(level=level, alpha=alpha, n_boot=n_boot, max_replicates=max_replicates)

    rows, premise_rows, method_rows = [], [], []
    for model in models:
        tasks = names.order_tasks({t for m, t in index if m == model})
        # the premise's cells, one family: each interval at 1 - alpha / (tasks x premise.CELLS)
        reading = [
            row
            for claim in premise.CLAIMS
            for row in _test_claim(claim, model, tasks, premise_values, run_cell, family=premise.CELLS, **read)
        ]
        learns = premise.learning_tasks(reading)
        calibrated, novel = (
            _test_claim(claim, model, tasks, premise_values, run_cell, family=premise.CELLS, **read)
            for claim in (premise.CALIBRATED, premise.NOVEL)
        )
        tops = _top_predictions(premise_index, model, tasks, run_cell)
        premise_rows += premise.premise_rows(reading, tops, labels or {}, calibrated, novel)
        # each method's FT above ZSL at the premise's level, which its own tasks do not change
        at = next(
            (r["level"] for r in reading if r["task"] not in ("", MEAN)), 1 - alpha / (premise.CELLS * len(tasks))
        )
        by_method = {
            m: _test_claim(
                premise.finetuning_claim(m),
                model,
                tasks,
                premise_values if (model, m) in further else values,
                own_cell,
                at_level=at,
                **read,
            )
            for m in finetuning[model]
        }
        method_rows += premise.finetuning_rows(by_method)
        method_learns = {m: premise.finetuning_learns(r) for m, r in by_method.items()}
        subset = [t for t in tasks if learns.get(t)]
        for claim in claims:
            # read again over the tasks where the model learns in context, and a third time over
            # those where every finetuning method the claim reads learns as well (none: it reads none)
            methods = premise.finetuned_methods(claim, roles)
            both = premise.both_learning(learns, method_learns, methods)
            both_tasks = [t for t in subset if both[t]] if methods else []
            first, second, third = _readings(claim, model, tasks, [subset, both_tasks], values, run_cell, read)
            rows += premise.annotate_both(premise.annotate(first, second, learns), third, both, methods)
    table = pd.DataFrame(rows, columns=[*COLUMNS, *premise.CLAIM_COLUMNS, *premise.BOTH_COLUMNS])
    table = table.astype(
        {
            "comparison": "int64",
            "n_examples": "Int64",
            "n_seeds": "Int64",
            "side": "Int64",
            "n_replicates": "Int64",
            "settled": "boolean",
            "redrawn": "boolean",
            "learns": "boolean",
            "both_learn": "boolean",
            "status": object,
            "incomplete": object,
            "premise_status": object,
            "both_status": object,
        }
    )
    premise_table = pd.DataFrame(premise_rows, columns=premise.COLUMNS).astype(
        {
            "n_seeds": "Int64",
            "n_examples": "Int64",
            "learns": bool,
            "collapsed": bool,
            "top_class": "int64",
            "learns_calibrated": bool,
            "follows_novel": bool,
        }
    )
    method_table = pd.DataFrame(method_rows, columns=premise.METHOD_COLUMNS).astype(
        {"n_seeds": "Int64", "n_examples": "Int64", "learns": bool}
    )
    return table, premise_table, method_table


def _index(examples: list[RunExamples]) -> dict[tuple[str, str], dict[int, dict[tuple[str, str], RunExamples]]]:
    """(model, task) -> seed -> (variant, method) -> the run."""
    index: dict = {}
    for ex in examples:
        meta = ex.meta
        index.setdefault((meta["model"], meta["task"]), {}).setdefault(int(meta["seed"]), {})[
            (meta["variant"], meta["method"])
        ] = ex
    return index


def _readings(claim: Claim, model: str, tasks: list[str], subsets: list[list[str]], values, run_cell, read: dict):
    """A claim's rows on a model's ``tasks``, then on each of ``subsets`` alone (its per-task intervals
    Bonferroni over those tasks; None for an empty one), each set of tasks tested once."""
    done = {tuple(tasks): _test_claim(claim, model, tasks, values, run_cell, **read)}
    for subset in subsets:
        if subset and tuple(subset) not in done:
            done[tuple(subset)] = _test_claim(claim, model, subset, values, run_cell, **read)
    return [done[tuple(tasks)], *(done.get(tuple(subset)) for subset in subsets)]


def _top_predictions(index, model: str, tasks: list[str], run_cell) -> dict[str, tuple[int, float]]:
    """Per task, ICL's most-predicted class over the seeds of the premise's runs and its share."""
    cell = run_cell(premise.PREMISE.a)
    tops = {}
    for task in tasks:
        found = [runs[cell[:2]].pred_icl for runs in index[(model, task)].values() if cell and cell[:2] in runs]
        if found:
            tops[task] = premise.top_prediction(found)
    return tops


@dataclass
class _Task:
    """What a claim has of one task: the seeds it reads, and those it lacks (seed -> why)."""

    seeds: list[int]
    missing: dict[int, str]

    @property
    def incomplete(self) -> str:
        return "; ".join(f"seed {s}: {why}" for s, why in sorted(self.missing.items()))


def _seeds_of(claim: Claim, model: str, tasks: list[str], values: Replicates, a_cell, b_cells) -> dict[str, _Task]:
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


def _test_claim(
    claim: Claim,
    model: str,
    tasks: list[str],
    values: Replicates,
    run_cell,
    *,
    level: float,
    alpha: float,
    n_boot: int,
    max_replicates: int,
    family: int | None = None,
    at_level: float | None = None,
) -> list[dict]:
    """A claim's rows on a model's ``tasks``. ``family``: the comparisons per task its Bonferroni m
    counts where it is read together with other claims' (the premise's), else its own cells b;
    ``at_level``: the level of its per-task intervals where another reading sets it (a finetuning
    method's side of the premise, at the premise's)."""
    scale = display_scale(claim.a[2])
    base = dict(
        model=model,
        claim=claim.id,
        paper=claim.paper,
        table=claim.table,
        quantifier=claim.quantifier,
        test=claim.test,
        unit="points" if scale == 100.0 else "score",
    )
    a_cell = run_cell(claim.a)
    b_cells = [b if isinstance(b, float) else run_cell(b) for b in claim.against]
    covered = _seeds_of(claim, model, tasks, values, a_cell, b_cells)
    if not covered:
        return [dict(base, comparison=0, against=against_label(claim, 0), task="", verdict="not run")]
    n_cells = len(b_cells)
    n_family = family or n_cells
    counted = [t for t, found in covered.items() if found.seeds]  # a task whose every seed is undefined is not
    mean_level = 1.0 - alpha / n_family
    task_level = 1.0 - alpha / (n_family * max(len(counted), 1)) if claim.quantifier != "mean" else level
    task_level = at_level or task_level

    # each interval gets as many replicates beyond its bounds as n_boot give a plain one (its level's
    # tails), times a power of two where its ends are not yet settled against Monte Carlo error
    times = 1
    while True:
        reps_task = min(times * inference.replicates_for(n_boot, task_level, level), max_replicates)
        reps_mean = min(times * inference.replicates_for(n_boot, mean_level, level), max_replicates)
        per_task = _differences(model, covered, values, a_cell, b_cells, max(reps_task, reps_mean))
        rows, task_units, mean_units, unsettled = _read(
            claim,
            covered,
            per_task,
            n_cells,
            task_level,
            mean_level,
            reps_task,
            reps_mean,
            scale,
            base,
            values.uniforms(MEAN, reps_mean),
        )
        if not unsettled or max(reps_task, reps_mean) >= max_replicates:
            break
        times *= 2
    task_statuses = [[u.status for u in units] for units in task_units.values()]
    mean_statuses = [u.status for u in mean_units]
    verdict = read_quantifier(claim.quantifier, task_statuses, mean_statuses, claim.test)
    need = dict(
        factor=math.nan,
        n_needed=math.nan,
        resolves_to="",
        seed_factor=math.nan,
        seeds_needed=math.nan,
        seeds_resolve_to="",
    )
    if verdict == "inconclusive" and any(per_task.values()):
        n_now = max(found[0].n_examples for found in per_task.values() if found)
        seeds_now = max(found[0].n_seeds for found in per_task.values() if found)
        plan_tasks = list(task_units.values())
        plan_mean = mean_units
        for currency, now, (f_key, n_key, r_key) in (
            ("examples", n_now, ("factor", "n_needed", "resolves_to")),
            ("seeds", seeds_now, ("seed_factor", "seeds_needed", "seeds_resolve_to")),
        ):
            factor, resolves_to = needed_factor(
                claim.quantifier,
                plan_tasks,
                plan_mean,
                claim.direction,
                currency=currency,
                test=claim.test,
                margin=claim.margin,
            )
            need.update(
                {f_key: factor, r_key: resolves_to, n_key: round(factor * now) if math.isfinite(factor) else math.inf}
            )
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


def _differences(model: str, covered: dict[str, _Task], values: Replicates, a_cell, b_cells, n_rep: int):
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
            examples, spread = inference.crossed_replicates(
                np.subtract(points_a, points_b),
                np.stack(reps),
                errors=values.errors(model, task, found.seeds, a_cell, b, n_rep),
            )
            spread = inference.Spread(
                *(float(np.asarray(x)) for x in (spread.n_seeds, spread.seeds_var, spread.shared, spread.unshared)),
                n_examples=n,
            )
            replicates = examples + inference.seeds_part(spread, uniforms)
            replicates = resampling.within_range(replicates, *_difference_range(a_cell, b))
            rows.append(
                _Difference(
                    float(np.mean(points_a) - np.mean(points_b)),
                    replicates,
                    n,
                    len(found.seeds),
                    float(np.mean(points_a)),
                    float(np.mean(points_b)),
                    spread,
                    examples,
                )
            )
        per_task[task] = rows
    return per_task


def _difference_range(a_cell, b) -> tuple[float, float]:
    """The values a - b can take, a a cell and b a cell or a constant (``catalog.value_range``)."""
    low_a, high_a = value_range(a_cell[2])
    low_b, high_b = (b, b) if isinstance(b, float) else (0.0, 1.0) if b[2] in premise.MAJORITY_OF else value_range(b[2])
    return low_a - high_b, high_a - low_b


def ends_unsettled(replicates, level: float, claim: Claim) -> bool:
    """Whether an end of the interval at ``level`` that decides the claim's status
    (:func:`claim_definitions.deciding_ends`: 0, -margin, +margin) lies within the bootstrap's
    Monte Carlo error of the value it is read against."""
    oriented = claim.direction * np.asarray(replicates, dtype=np.float64)
    return any(
        resampling.endpoint_unsettled(oriented - value, level)[end]
        for end, value in deciding_ends(claim.test, claim.margin)
    )


def _read(
    claim: Claim,
    covered: dict[str, _Task],
    per_task: dict,
    n_cells: int,
    task_level: float,
    mean_level: float,
    reps_task: int,
    reps_mean: int,
    scale: float,
    base: dict,
    mean_uniforms: np.ndarray,
):
    """The rows of a claim's tests; per task and for the mean, per cell b, the :class:`Unit` of each
    interval (its reading in ``status``); and whether an end of an interval the verdict reads lies within the
    bootstrap's Monte Carlo error of the value it is read against."""
    rows, task_units, mean_units = [], {t: [] for t, f in covered.items() if f.seeds}, []
    unsettled = False
    margin = claim.margin
    complete = all(not f.missing for t, f in covered.items() if f.seeds)
    for j in range(n_cells):
        for task, found in covered.items():
            row = dict(
                base,
                comparison=j,
                against=against_label(claim, j),
                task=task,
                level=task_level,
                margin=scale * margin,
                incomplete=found.incomplete,
                n_seeds=len(found.seeds),
            )
            if not found.seeds:
                rows.append(
                    dict(row, difference=math.nan, ci_low=math.nan, ci_high=math.nan, side=0, status="undefined")
                )
                continue
            d = per_task[task][j]
            reps = d.replicates[:reps_task]
            low, high = resampling.percentile_interval(reps, task_level)
            read = status(low, high, claim.direction, claim.test, margin) if not found.missing else "incomplete"
            if claim.quantifier != "mean" and not found.missing:
                unsettled |= ends_unsettled(reps, task_level, claim)
            task_units[task].append(Unit(d.value, task_level, (d.spread,), read))
            rows.append(
                dict(
                    row,
                    n_examples=d.n_examples,
                    a=scale * d.a,
                    b=scale * d.b,
                    difference=scale * d.value,
                    ci_low=scale * low,
                    ci_high=scale * high,
                    side=SIDES.get(read, 0),
                    status=read,
                    seed_share=_share(d.spread.between, d.spread.within),
                    df=inference.mean_variance([d.spread])[1],
                    n_replicates=len(reps),
                )
            )
        found_j = [per_task[t][j] for t in task_units]
        if not found_j:  # every task undefined: nothing to read
            mean_units.append(Unit(math.nan, mean_level, ()))
            rows.append(
                dict(
                    base,
                    comparison=j,
                    against=against_label(claim, j),
                    task=MEAN,
                    level=mean_level,
                    margin=scale * margin,
                    difference=math.nan,
                    ci_low=math.nan,
                    ci_high=math.nan,
                    side=0,
                    status="undefined",
                    incomplete="",
                )
            )
            continue
        diff = float(np.mean([f.value for f in found_j]))
        spreads = tuple(f.spread for f in found_j)
        reps = inference.mean_of_tasks(
            [f.examples[:reps_mean] for f in found_j], list(spreads), mean_uniforms[:reps_mean]
        )
        reps = resampling.within_range(reps, *_difference_range(claim.a, claim.against[j]))
        low, high = resampling.percentile_interval(reps, mean_level)
        read = status(low, high, claim.direction, claim.test, margin) if complete else "incomplete"
        if claim.quantifier == "mean" and complete:
            unsettled |= ends_unsettled(reps, mean_level, claim)
        mean_units.append(Unit(diff, mean_level, spreads, read))
        rows.append(
            dict(
                base,
                comparison=j,
                against=against_label(claim, j),
                task=MEAN,
                n_examples=max(f.n_examples for f in found_j),
                n_seeds=max(f.n_seeds for f in found_j),
                a=scale * float(np.mean([f.a for f in found_j])),
                b=scale * float(np.mean([f.b for f in found_j])),
                difference=scale * diff,
                ci_low=scale * low,
                ci_high=scale * high,
                level=mean_level,
                margin=scale * margin,
                side=SIDES.get(read, 0),
                status=read,
                incomplete="" if complete else "a task is incomplete",
                seed_share=_share(sum(float(s.between) for s in spreads), sum(float(s.within) for s in spreads)),
                df=inference.mean_variance(list(spreads))[1],
                n_replicates=len(reps),
            )
        )
    return rows, task_units, mean_units, unsettled


def _share(between, within) -> float:
    """The part of an interval's variance that the spread between seeds contributes."""
    between, within = float(between), float(within)
    total = between + within
    return between / total if total > 0 else 0.0


def write_claim_tests(
    example_paths: list[str],
    parquet_path: str,
    csv_path: str,
    roles: dict[str, str],
    *,
    premise_paths: tuple[str, str] | None = None,
    methods_paths: tuple[str, str] | None = None,
    labels: dict[str, list[str]] | None = None,
    order_paths: list[str] = (),
    premise_example_paths: list[str] = (),
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    max_replicates: int = MAX_REPLICATES,
) -> pd.DataFrame:
    """The claims evaluated (:func:`evaluate_all`) on the runs' per-example files, as parquet and CSV,
    the premise's table as ``premise_paths`` (parquet, CSV) and finetuning's side of it as
    ``methods_paths``. ``order_paths``: the runs that also ran in further orders
    (``orders.order_sensitivity``), which stand in for their own order's file.
    ``premise_example_paths``: the runs of the premise's further seeds (:func:`evaluate_all`'s
    ``premise_examples``)."""
    with_orders = {run_key(ex.meta): ex for ex in map(read_examples, order_paths)}
    examples = [with_orders.get(run_key(ex.meta), ex) for ex in map(read_examples, example_paths)]
    further = [read_examples(p) for p in premise_example_paths]
    table, premise_table, method_table = evaluate_all(
        examples,
        roles,
        n_boot=n_boot,
        level=level,
        seed=seed,
        labels=labels,
        max_replicates=max_replicates,
        premise_examples=further,
    )
    made_by = runs_provenance(examples + further)
    atomic_write_frame(table, parquet_path, made_by)
    write_csv(table, csv_path)
    for frame, paths in ((premise_table, premise_paths), (method_table, methods_paths)):
        if paths:
            atomic_write_frame(frame, paths[0], made_by)
            write_csv(frame, paths[1])
    for model, found in premise_table.groupby("model"):
        log.info("%s %s", model, premise.learns_text(found))
    for model, found in method_table.groupby("model"):
        log.info("%s: finetuning learns %s", model, premise.finetuning_text(found))
    claim_rows = table.drop_duplicates(["model", "claim"])
    counts = claim_rows["verdict"].value_counts().to_dict()
    log.info("claims: %s", ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS))
    again = claim_rows["premise_verdict"].value_counts().to_dict()
    log.info("claims where the model learns in context: %s", ", ".join(f"{n} {v}" for v, n in again.items()))
    both = claim_rows["both_verdict"].value_counts().to_dict()
    log.info("claims where ICL and finetuning both learn: %s", ", ".join(f"{n} {v}" for v, n in both.items()))
    return table
