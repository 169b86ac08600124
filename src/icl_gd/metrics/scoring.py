"""Apply the metrics to a run's caches, and aggregate runs over seeds.

A *run* is (model, variant, task, seed, method): its ZSL, ICL and finetuned (method) caches.
Its metrics come out tidy: one row per (metric, layer), plus a row with ``layer`` missing that
holds the run-level value (the mean over layers for a per-layer metric).
"""

from __future__ import annotations

import json
import logging
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from icl_gd.activations.cache import METADATA_KEY, RunCache
from icl_gd.common import provenance
from icl_gd.common.frames import atomic_write_frame, atomic_write_table, read_frame, read_table, write_csv
from icl_gd.metrics import calibration, catalog, formulas, inference, resampling

log = logging.getLogger(__name__)

RUN_KEYS = ["model", "variant", "task", "seed", "method"]
GROUP_KEYS = ["model", "variant", "task", "method", "metric", "layer"]


def _check_aligned(zsl: RunCache, *others: RunCache) -> None:
    for other in others:
        if not (np.array_equal(zsl.example_id, other.example_id) and np.array_equal(zsl.query_len, other.query_len)):
            raise ValueError(
                f"caches of setting {zsl.meta['setting']!r} and {other.meta['setting']!r} hold different "
                "evaluation examples or query lengths; rerun their extraction with one config"
            )


def means() -> tuple[str, ...]:
    """Scores that are means of one value per example (a ratio of sums, over the number of
    examples): the output distributions' divergences, the order sensitivity. Read from the catalog
    at each call, so that a metric the catalog gains (``catalog.extended``) is scored too."""
    return catalog.names(computed="mean")


def ratios() -> tuple[str, ...]:
    """Scores that are ratios of per-example sums: accuracy, Rec2FTP (percent) and the Jaccard
    indices; then :func:`means`."""
    return catalog.names(computed="ratio") + means()


# ICL's accuracy with its demonstrations' labels permuted consistently, against the permuted gold
# (setting icl_permuted): whether the model follows its demonstrations' labels. A run has it where
# the premise reads its task and seed (planning.plan.permuted_runs).
PERMUTED = "acc_icl_permuted"
PERMUTED_COLUMNS = ("pred_icl_permuted", "gold_permuted")  # a run's per-example file holds them where it has it
# ICL's accuracy with label words the model never saw as labels, against the gold (setting
# icl_novel): whether it follows label words it was not trained on. Where the premise reads a run,
# as PERMUTED.
NOVEL = "acc_icl_novel"
# ZSL's and ICL's predictions after contextual calibration (metrics.calibration), where their caches
# recorded the content-free queries (caches from before: none): accuracy -> its predictions' column
CALIBRATED = {"acc_zsl_calibrated": "pred_zsl_calibrated", "acc_icl_calibrated": "pred_icl_calibrated"}
# The accuracies of predictions a run may lack, scored against the gold: accuracy -> (its
# predictions' column, why a run lacks them)
AGAINST_GOLD = {
    NOVEL: ("pred_icl_novel", "this run has no ICL on novel label words (planning.plan.permuted_runs)"),
    **{
        name: (column, "this run's caches recorded no content-free queries; rerun their extraction")
        for name, column in CALIBRATED.items()
    },
}
OPTIONAL_COLUMNS = (*PERMUTED_COLUMNS, *(column for column, _ in AGAINST_GOLD.values()))
# the ratios of a run without a finetuned model (:func:`icl_examples`)
UNTRAINED = ("acc_zsl", "acc_icl", PERMUTED, NOVEL, *CALIBRATED)


@dataclass
class RunExamples:
    """A run's per-example values, from which every run-level score and its bootstrap interval
    follow: the predictions, each similarity metric per example and layer (n, L), and the values
    of :func:`means` it has per example (n,): the output distributions' divergences, and where the
    run's demonstrations ran in further orders, the order sensitivity. ``alpha`` is there when
    the run has a baseline method to compare with (``meta["baseline"]``). Where ICL also ran on
    consistently permuted labels (:data:`PERMUTED`), its predictions and the permuted gold
    (``gold_permuted``, the class whose word the permuted demonstrations give the gold class); where
    it also ran on novel label words (:data:`NOVEL`), its predictions, against the gold.
    Where ZSL's and ICL's caches recorded content-free queries, their calibrated predictions
    (:data:`CALIBRATED`). A run of the premise's alone (:func:`icl_examples`) has no finetuned
    model: no ``pred_ft``, no similarity, and of the ratios only ZSL's and ICL's."""

    meta: dict
    example_id: np.ndarray
    gold: np.ndarray
    pred_zsl: np.ndarray
    pred_icl: np.ndarray
    pred_ft: np.ndarray | None
    similarities: dict[str, np.ndarray]
    per_example: dict[str, np.ndarray] = field(default_factory=dict)
    pred_icl_permuted: np.ndarray | None = None
    gold_permuted: np.ndarray | None = None
    pred_icl_novel: np.ndarray | None = None
    pred_zsl_calibrated: np.ndarray | None = None
    pred_icl_calibrated: np.ndarray | None = None

    @property
    def f2t(self) -> np.ndarray:
        """ZSL wrong, ICL and FT right (docs/protocol.md, "Metrics")."""
        return formulas.f2t_mask(self.pred_zsl, self.pred_icl, self.pred_ft, self.gold)

    @property
    def ratio_names(self) -> tuple[str, ...]:
        """The ratio scores this run has: every one of :func:`ratios` but the means whose values
        it lacks (made by hand, or without further orders) and, without ICL on permuted labels,
        :data:`PERMUTED`, without ICL on novel label words, :data:`NOVEL`, without calibrated
        predictions, :data:`CALIBRATED`."""
        mean = means()
        return tuple(
            name
            for name in ratios()
            if (name not in mean or name in self.per_example)
            and (name != PERMUTED or self.pred_icl_permuted is not None)
            and (name not in AGAINST_GOLD or getattr(self, AGAINST_GOLD[name][0]) is not None)
            and (self.pred_ft is not None or name in UNTRAINED)
        )

    def ratio_terms(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Per-example (numerator, denominator) of a ratio score."""
        preds = (self.pred_zsl, self.pred_icl, self.pred_ft, self.gold)
        if name == PERMUTED:
            if self.pred_icl_permuted is None:
                raise ValueError(f"{name}: this run has no ICL on permuted labels (planning.plan.permuted_runs)")
            return (self.pred_icl_permuted == self.gold_permuted).astype(np.float64), np.ones(len(self.gold))
        if name in AGAINST_GOLD:
            column, why = AGAINST_GOLD[name]
            pred = getattr(self, column)
            if pred is None:
                raise ValueError(f"{name}: {why}")
            return (pred == self.gold).astype(np.float64), np.ones(len(pred))
        if name.startswith("acc_"):
            pred = {"acc_zsl": self.pred_zsl, "acc_icl": self.pred_icl, "acc_ft": self.pred_ft}[name]
            return (pred == self.gold).astype(np.float64), np.ones(len(pred))
        if name in means():
            if name not in self.per_example:
                raise ValueError(
                    f"{name}: this run has no such per-example values (its file was written before "
                    "they were recorded, or its demonstrations ran in one order); rerun score_run"
                )
            return self.per_example[name], np.ones(len(self.gold))
        if name == "rec2ftp":
            num, den = formulas.rec2ftp_terms(*preds)
            return 100.0 * num, den
        return formulas.jaccard_terms(*preds, subset=name.removeprefix("jaccard_"))

    def f2t_similarities(self) -> dict[str, np.ndarray]:
        """The similarities the catalog lists as ``f2t``, with every example outside the f2t subset
        undefined (NaN)."""
        outside = ~self.f2t
        out = {}
        for name in catalog.shown_in("f2t"):
            if name in self.similarities:
                values = self.similarities[name].copy()
                values[outside] = np.nan
                out[f"{name}_f2t"] = values
        return out


def run_examples(
    zsl: RunCache,
    icl: RunCache,
    ft: RunCache,
    base: RunCache | None = None,
    *,
    permuted: RunCache | None = None,
    novel: RunCache | None = None,
    random_seed: int = 0,
) -> RunExamples:
    """Every per-example value of one run. ``base`` is the baseline method's cache of the same
    model, variant, task and seed: with it, alpha = cos(m_FT − m_ZSL, m_base − m_ZSL) (paper 001
    Fig. 2 has FT = LCGD, base = GD). ``permuted``: the run's ICL cache on consistently permuted
    labels (setting icl_permuted), whose gold is the permuted gold (``activations.extract``);
    ``novel``: its ICL cache on novel label words (setting icl_novel)."""
    _check_aligned(zsl, icl, ft, *(c for c in (base, permuted, novel) if c is not None))
    predictions = _untrained_predictions(zsl, icl, permuted, novel)
    rng = np.random.default_rng(random_seed)
    # Every similarity compares changes from ZSL (dh = h_S - h_ZSL, dm = m_S - m_ZSL), which the
    # compact cache stores as they are; formulas.py computes them all from per-row dot products.
    (dh_icl, s_icl), (dh_ft, s_ft) = icl.output_change(zsl), ft.output_change(zsl)
    outputs = formulas.update_similarities(zsl.attn_out, dh_icl, dh_ft, scale_icl=s_icl, scale_ft=s_ft, rng=rng)
    (dm_icl, t_icl), (dm_ft, t_ft) = icl.score_change(zsl), ft.score_change(zsl)
    dm_base, t_base = base.score_change(zsl) if base is not None else (None, None)
    maps = formulas.map_similarities(
        zsl.score_values(),
        dm_icl,
        dm_ft,
        zsl.query_len,
        zsl.meta["n_layers"],
        zsl.meta["n_heads"],
        dm_base=dm_base,
        scale_icl=t_icl,
        scale_ft=t_ft,
        scale_base=t_base,
    )
    # in the order the run's files have always held them: those also scored on the F-to-T examples,
    # the random references, then (below) those only a baseline method gives
    found, f2t, with_baseline = {**outputs, **maps}, catalog.shown_in("f2t"), catalog.shown_in("with_baseline")
    own = [name for name in catalog.names(computed="similarity") if name not in with_baseline]
    sims = {name: found[name] for name in own if name in f2t}
    sims.update({name: found[name] for name in own if name not in f2t})
    meta = {key: ft.meta[key] for key in ("model", "variant", "task", "seed")}
    meta.update(method=ft.meta["setting"], baseline=None)
    # the software that made the run's caches (a cache written before provenance was recorded: none)
    meta["provenance"] = provenance.distinct(
        c.meta.get(provenance.KEY) for c in (zsl, icl, ft, base, permuted, novel) if c is not None
    )
    if base is not None:
        sims.update({name: found[name] for name in with_baseline})
        meta["baseline"] = base.meta["setting"]
    per_example = {
        "kl_icl_ft": formulas.kl_divergence(icl.label_logprobs, ft.label_logprobs),
        "kl_icl_zsl": formulas.kl_divergence(icl.label_logprobs, zsl.label_logprobs),
        "tv_icl_ft": formulas.total_variation(icl.label_logprobs, ft.label_logprobs),
    }
    return RunExamples(
        meta=meta,
        pred_ft=np.asarray(ft.pred),
        similarities=sims,
        per_example=per_example,
        **predictions,
    )


def icl_examples(
    zsl: RunCache, icl: RunCache, permuted: RunCache, *, method: str, novel: RunCache | None = None
) -> RunExamples:
    """The per-example values of a run of the premise alone, on a seed the claims do not read
    (``planning.plan.premise_icl_runs``): ZSL, ICL, ICL on permuted labels and, where given, on
    novel label words, no finetuned model, filed as the run of ``method`` (the premise's) on its seed."""
    runs = [c for c in (zsl, icl, permuted, novel) if c is not None]
    _check_aligned(*runs)
    predictions = _untrained_predictions(zsl, icl, permuted, novel)
    meta = {key: icl.meta[key] for key in ("model", "variant", "task", "seed")}
    meta.update(method=method, baseline=None, finetuned=False)
    meta["provenance"] = provenance.distinct(c.meta.get(provenance.KEY) for c in runs)
    return RunExamples(meta=meta, pred_ft=None, similarities={}, **predictions)


def _untrained_predictions(
    zsl: RunCache, icl: RunCache, permuted: RunCache | None, novel: RunCache | None = None
) -> dict:
    """A run's examples and the predictions of its settings without a finetuned model: ZSL, ICL,
    ICL on permuted labels (with the permuted gold) and on novel label words where given, and ZSL's
    and ICL's calibrated."""
    for run, labels in ((permuted, "permuted"), (novel, "novel")):
        if run is not None and run.meta.get("demo_labels") != labels:
            raise ValueError(
                f"{run.path or f'the {labels} cache'}: setting {run.meta.get('setting')!r} has "
                f"{run.meta.get('demo_labels')!r} labels, not {labels} ones; give the run's icl_{labels} cache"
            )
    return dict(
        example_id=np.asarray(zsl.example_id, dtype=np.int64),
        gold=np.asarray(zsl.gold),
        pred_zsl=np.asarray(zsl.pred),
        pred_icl=np.asarray(icl.pred),
        pred_icl_permuted=np.asarray(permuted.pred) if permuted is not None else None,
        gold_permuted=np.asarray(permuted.gold) if permuted is not None else None,
        pred_icl_novel=np.asarray(novel.pred) if novel is not None else None,
        pred_zsl_calibrated=calibrated_predictions(zsl),
        pred_icl_calibrated=calibrated_predictions(icl),
    )


def calibrated_predictions(run: RunCache) -> np.ndarray | None:
    """A ZSL or ICL cache's predictions after contextual calibration, from its content-free
    queries' label log-probabilities; None for a cache without them (made before they were recorded)."""
    free = run.meta.get("content_free")
    if free is None:
        return None
    return calibration.calibrated_predictions(run.label_logprobs, np.asarray(free["label_logprobs"]))


def layer_mean(values: np.ndarray) -> np.ndarray:
    """Mean over the last (layer) axis excluding NaN; NaN where no layer is defined."""
    return formulas.nan_mean0(np.moveaxis(values, -1, 0))


def point_scores(ex: RunExamples) -> dict[str, float | np.ndarray]:
    """Every run-level score: floats for the ratios (and ``n_f2t``), per-layer (L,) arrays for
    the similarities (mean over examples, undefined values excluded, with logged warnings)."""
    scores: dict[str, float | np.ndarray] = {}
    for name in ex.ratio_names:
        num, den = ex.ratio_terms(name)
        if den.sum() == 0:
            log.warning("%s: empty denominator (see metrics/formulas.py); the score is NaN", name)
            scores[name] = float("nan")
        else:
            scores[name] = float(num.sum() / den.sum())
    scores.update(prediction_changes(ex))
    f2t = ex.f2t
    scores["n_f2t"] = float(f2t.sum())
    if not f2t.any():
        log.warning("no f2t example (ZSL wrong, ICL and FT right): the f2t similarities are NaN")
    for name, values in ex.similarities.items():
        scores[name] = formulas.nanmean(values, what=f"{name} per-example values")
    for name in ex.f2t_similarities():  # same names, same order as the bootstrap's
        values = ex.similarities[name.removesuffix("_f2t")]
        if f2t.any():
            scores[name] = formulas.nanmean(values[f2t], what=f"{name} per-example values")
        else:
            scores[name] = np.full(values.shape[1], np.nan)
    return scores


def prediction_changes(ex: RunExamples) -> dict[str, float]:
    """The partition of paper 003 Fig. 1, as numbers of examples: the changes of the ZSL prediction
    whose new label is right (``correct``) or wrong (``incorrect``), made by ICL only, FT only, or
    by both to the same label. With the Jaccard index's sets (:func:`formulas.jaccard_terms`):
    both = |D_ICL ∩ D_FT|, ICL only = |D_ICL| − both, FT only = |D_FT| − both, so that
    J = both / (ICL only + FT only + both)."""
    changes = {}
    for subset in ("correct", "incorrect"):
        d_icl, d_ft, both = formulas.change_sets(ex.pred_zsl, ex.pred_icl, ex.pred_ft, ex.gold, subset)
        changes[f"changes_icl_only_{subset}"] = float(d_icl.sum() - both.sum())
        changes[f"changes_ft_only_{subset}"] = float(d_ft.sum() - both.sum())
        changes[f"changes_both_{subset}"] = float(both.sum())
    return changes


def bootstrap_scores(ex: RunExamples, counts: np.ndarray) -> dict[str, np.ndarray]:
    """The scores of :func:`point_scores` on each resample of the examples (``counts``, from
    :func:`resampling.bootstrap_counts`): (n_boot,) per ratio, (n_boot, L) per similarity."""
    reps = {name: resampling.bootstrap_ratios(*ex.ratio_terms(name), counts) for name in ex.ratio_names}
    for name, values in similarity_values(ex).items():
        reps[name] = resampling.bootstrap_means(values, counts)
    return reps


def similarity_values(ex: RunExamples) -> dict[str, np.ndarray]:
    """A run's per-example x per-layer similarities (n, L), those from F to T included."""
    return {**ex.similarities, **ex.f2t_similarities()}


def example_counts(example_id, n_boot: int, stats_seed: int, task: str) -> np.ndarray:
    """The task's resamples of its evaluation examples, as counts (n_boot, n) aligned to
    ``example_id``: drawn over the task's ids in sorted order from one stream per (statistics seed,
    task), so that every seed, setting, method and variant of the task (which evaluate the same
    examples) is resampled alike: the crossed design of :mod:`icl_gd.metrics.inference`."""
    example_id = np.asarray(example_id)
    ids = np.unique(example_id)
    counts = resampling.bootstrap_counts(len(ids), n_boot, _task_rng(stats_seed, task))
    return counts[:, positions_of(ids, example_id)]


def _task_rng(stats_seed: int, task: str) -> np.random.Generator:
    return np.random.default_rng([stats_seed, zlib.crc32(task.encode())])


def score_examples(ex: RunExamples, *, n_boot: int = 1000, level: float = 0.95, ci_seed: int = 0) -> pd.DataFrame:
    """The tidy table of one run: one row per (metric, layer) plus the layer mean (``layer`` NA),
    with the percentile bootstrap interval over examples in ``ci_low`` / ``ci_high``."""
    points = point_scores(ex)
    counts = example_counts(ex.example_id, n_boot, ci_seed, ex.meta["task"])
    reps = bootstrap_scores(ex, counts)
    rows, similarities = [], similarity_values(ex)
    for name, value in points.items():
        if np.ndim(value) == 0:
            low, high = resampling.percentile_interval(reps[name], level) if name in reps else (np.nan, np.nan)
            rows.append({"metric": name, "layer": pd.NA, "value": float(value), "ci_low": low, "ci_high": high})
            continue
        # studentized, as the summary and the claims draw a similarity's interval (metrics.inference)
        values = similarities[name]
        blocks = [(value[i], reps[name][:, i], values[:, i]) for i in range(len(value))]
        low, high = np.array([_run_interval(*block, counts, name, level) for block in blocks]).T.reshape(2, -1)
        rows.extend(
            {"metric": name, "layer": layer, "value": float(v), "ci_low": lo, "ci_high": hi}
            for layer, (v, lo, hi) in enumerate(zip(value, low, high))
        )
        mean = float(layer_mean(value)) if np.isfinite(value).any() else float("nan")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an example undefined in every layer
            per_example = layer_mean(values)
        low, high = _run_interval(mean, layer_mean(reps[name]), per_example, counts, name, level)
        rows.append({"metric": name, "layer": pd.NA, "value": mean, "ci_low": low, "ci_high": high})
    table = pd.DataFrame(rows)
    for key in reversed(RUN_KEYS):
        table.insert(0, key, ex.meta[key])
    return tidy(table)


def _run_interval(value: float, reps: np.ndarray, values: np.ndarray, counts: np.ndarray, name: str, level: float):
    """One run's interval of a similarity (one layer, or their mean), its examples' part studentized
    as the summary and the claims draw it (:func:`inference.crossed_replicates` with one seed), cut
    to the values the score can take (a studentized replicate can leave them)."""
    drawn, _ = inference.crossed_replicates(
        np.array([value]), reps[None], errors=inference.mean_errors(values[None], counts)
    )
    return resampling.percentile_interval(resampling.within_range(drawn, *catalog.value_range(name)), level)


def score_run(
    zsl: RunCache,
    icl: RunCache,
    ft: RunCache,
    base: RunCache | None = None,
    *,
    random_seed: int = 0,
    n_boot: int = 1000,
    level: float = 0.95,
    ci_seed: int = 0,
) -> pd.DataFrame:
    """Every metric of one run, per layer and as the layer mean, with bootstrap intervals."""
    ex = run_examples(zsl, icl, ft, base, random_seed=random_seed)
    return score_examples(ex, n_boot=n_boot, level=level, ci_seed=ci_seed)


# --------------------------------------------------------------------------------------------
# per-example files


def write_examples(ex: RunExamples, path) -> None:
    """A run's per-example values as parquet; each similarity a fixed-size list of its layers."""
    columns = {
        "example_id": pa.array(ex.example_id),
        "gold": pa.array(np.asarray(ex.gold, dtype=np.int16)),
        "pred_zsl": pa.array(np.asarray(ex.pred_zsl, dtype=np.int16)),
        "pred_icl": pa.array(np.asarray(ex.pred_icl, dtype=np.int16)),
    }
    if ex.pred_ft is not None:  # a run of the premise alone has none (icl_examples)
        columns["pred_ft"] = pa.array(np.asarray(ex.pred_ft, dtype=np.int16))
    for name in OPTIONAL_COLUMNS:
        if getattr(ex, name) is not None:
            columns[name] = pa.array(np.asarray(getattr(ex, name), dtype=np.int16))
    for name, values in ex.per_example.items():
        columns[name] = pa.array(np.asarray(values, dtype=np.float64))
    for name, values in ex.similarities.items():
        flat = pa.array(np.ascontiguousarray(values, dtype=np.float64).reshape(-1))
        columns[name] = pa.FixedSizeListArray.from_arrays(flat, values.shape[1])
    table = pa.table(columns).replace_schema_metadata({METADATA_KEY: json.dumps(ex.meta).encode()})
    atomic_write_table(table, path)


def read_examples(path) -> RunExamples:
    table = read_table(path)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    n = table.num_rows
    fixed = ("example_id", "gold", "pred_zsl", "pred_icl")
    sims, per_example = {}, {}
    mean = means()
    for name in table.column_names:
        if name in mean:
            per_example[name] = table.column(name).to_numpy()
        elif name not in (*fixed, "pred_ft", *OPTIONAL_COLUMNS):
            column = table.column(name).combine_chunks()
            sims[name] = column.values.to_numpy().reshape(n, column.type.list_size)
    return RunExamples(
        meta=meta,
        **{k: table.column(k).to_numpy() for k in fixed},
        pred_ft=table.column("pred_ft").to_numpy() if "pred_ft" in table.column_names else None,
        similarities=sims,
        per_example=per_example,
        **{k: table.column(k).to_numpy() for k in OPTIONAL_COLUMNS if k in table.column_names},
    )


def tidy(table: pd.DataFrame) -> pd.DataFrame:
    """Fix the column types, so that parquet and CSV round-trips agree."""
    table = table.astype({"model": str, "variant": str, "task": str, "seed": "int64", "method": str, "metric": str})
    table["layer"] = table["layer"].astype("Int64")
    for column in ("value", "ci_low", "ci_high"):
        if column in table:
            table[column] = table[column].astype("float64")
    return table.reset_index(drop=True)


def run_key(meta: dict) -> tuple:
    """A run's (model, variant, task, seed, method), from its per-example file's metadata."""
    return tuple(meta[key] for key in RUN_KEYS)


def group_key(meta: dict) -> tuple:
    return tuple(meta[key] for key in ("model", "variant", "task", "method"))


def seed_mean_intervals(
    examples: list[RunExamples], *, n_boot: int = 1000, level: float = 0.95, ci_seed: int = 0
) -> pd.DataFrame:
    """Intervals of the mean over seeds, per (model, variant, task, method, metric, layer), on the
    crossed seeds x examples design (:func:`inference.crossed_replicates`): the task's examples
    resampled once for every seed (:func:`example_counts`, the runs' own streams), the seeds' spread
    as a Student t with seeds - 1 degrees of freedom. With one seed this is the run's own interval
    (the examples only). ``between`` and ``within`` are the variance of the mean that the seeds'
    spread and the examples every seed shares contribute (the layer mean's for a layer-mean row)."""
    groups: dict[tuple, list[RunExamples]] = {}
    for ex in examples:
        groups.setdefault(group_key(ex.meta), []).append(ex)
    rows = []
    for key, runs in sorted(groups.items()):
        runs = sorted(runs, key=lambda ex: int(ex.meta["seed"]))
        task = key[2]
        ids = np.unique(np.concatenate([np.asarray(ex.example_id) for ex in runs]))
        counts = example_counts(ids, n_boot, ci_seed, task)
        per_seed, points = [], []
        similarities = [similarity_values(ex) for ex in runs]  # once per run: F -> T's are copies
        for ex in runs:
            per_seed.append(bootstrap_scores(ex, counts[:, positions_of(ids, ex.example_id)]))
            points.append(bootstrap_scores(ex, np.ones((1, len(ex.example_id)))))  # the point values, as the replicates
        uniforms = inference.stratified_uniforms(n_boot, _seed_level_rng(ci_seed, key))
        for name in sorted(set.intersection(*(set(r) for r in per_seed))):
            reps = np.stack([r[name] for r in per_seed])
            values = np.stack([p[name][0] for p in points])
            layers: list = [pd.NA]
            blocks = [(layer_mean(values), layer_mean(reps)) if reps.ndim == 3 else (values, reps)]
            errors = [None]
            if reps.ndim == 3:
                layers += list(range(reps.shape[2]))
                blocks += [(values[:, i], reps[:, :, i]) for i in range(reps.shape[2])]
                errors = _similarity_errors(runs, [s[name] for s in similarities], ids, counts)
            for layer, (value, block), error in zip(layers, blocks, errors):
                combined, spread = inference.crossed_replicates(value, block, uniforms, errors=error)
                combined = resampling.within_range(combined, *catalog.value_range(name))
                low, high = resampling.percentile_interval(combined, level)
                rows.append(
                    dict(
                        zip(("model", "variant", "task", "method"), key),
                        metric=name,
                        layer=layer,
                        ci_low=float(low),
                        ci_high=float(high),
                        between=float(spread.between),
                        within=float(spread.within),
                    )
                )
    columns = ["model", "variant", "task", "method", "metric", "layer", "ci_low", "ci_high", "between", "within"]
    table = pd.DataFrame(rows, columns=columns)
    table["layer"] = table["layer"].astype("Int64")
    return table


def _similarity_errors(
    runs: list[RunExamples], per_run: list[np.ndarray], ids: np.ndarray, counts: np.ndarray
) -> list[tuple]:
    """The studentized examples' part of a similarity's intervals (:func:`inference.mean_errors`),
    from each run's (n, L) values: for its layer mean, then for each layer, as the claims draw theirs."""
    grid = []
    for ex, values in zip(runs, per_run):
        placed = np.full((len(ids), values.shape[1]), np.nan)
        placed[positions_of(ids, ex.example_id)] = values
        grid.append(placed)
    grid = np.stack(grid)  # (seeds, examples, layers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an example undefined in every layer
        per_example = layer_mean(grid)
    return [inference.mean_errors(per_example, counts)] + [
        inference.mean_errors(grid[:, :, i], counts) for i in range(grid.shape[2])
    ]


def _seed_level_rng(stats_seed: int, key: tuple) -> np.random.Generator:
    # the seeds' t draws of one (model, variant, task, method): a stream of its own, apart from
    # the examples' stream (which is the task's)
    return np.random.default_rng([stats_seed, zlib.crc32("/".join(map(str, key)).encode())])


def aggregate(runs: pd.DataFrame, intervals: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean, sample standard deviation (ddof=1; NaN for one seed) and number of seeds, and, from
    ``intervals`` (:func:`seed_mean_intervals`), the bootstrap interval of the mean."""
    grouped = runs.groupby(GROUP_KEYS, dropna=False, sort=True)["value"]
    summary = grouped.agg(mean="mean", std=lambda v: v.std(ddof=1), n="count").reset_index()
    summary["n"] = summary["n"].astype("int64")
    summary["layer"] = summary["layer"].astype("Int64")
    if intervals is not None:
        summary = summary.merge(intervals, on=GROUP_KEYS, how="left")
    return summary


def runs_provenance(examples: list[RunExamples]) -> dict:
    """What a table computed from ``examples`` records: the different software that made their
    caches (``caches``; several where a run mixed versions) and this process's (``computed``)."""
    return {
        "caches": provenance.distinct(r for ex in examples for r in ex.meta.get("provenance", [])),
        "computed": provenance.software(),
    }


def write_aggregates(
    run_paths: list[str],
    runs_path: str,
    summary_path: str,
    csv_path: str,
    example_paths: list[str] = (),
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    ci_seed: int = 0,
) -> pd.DataFrame:
    """All runs in one tidy table, and their aggregate over seeds as parquet and CSV."""

    runs = tidy(pd.concat([read_frame(p) for p in run_paths], ignore_index=True))
    intervals, examples = None, []
    if example_paths:
        examples = [read_examples(p) for p in example_paths]
        intervals = seed_mean_intervals(examples, n_boot=n_boot, level=level, ci_seed=ci_seed)
    summary = aggregate(runs, intervals)
    made_by = runs_provenance(examples)
    atomic_write_frame(runs, runs_path, made_by)
    atomic_write_frame(summary, summary_path, made_by)
    write_csv(summary, csv_path)
    log.info("%d runs, %d summary rows", runs[RUN_KEYS].drop_duplicates().shape[0], len(summary))
    return summary


def positions_of(example_id: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Where each of ``ids`` (all present) stands in ``example_id``: the rows that align a run's
    per-example values to ``ids``."""
    example_id = np.asarray(example_id)
    order = np.argsort(example_id, kind="stable")
    return order[np.searchsorted(example_id[order], ids)]
