"""The bootstrap replicates of the claims' tests (``metrics.claim_testing``): every cell of every
(model, task, seed), resampled on the crossed seeds x examples design (every seed and cell of a
task with the same counts of its examples), drawn in chunks as they are asked for, so that a claim
that draws more extends the same streams.
"""

from __future__ import annotations

import collections
import logging
import warnings
import zlib

import numpy as np

from icl_gd.metrics import inference, premise, resampling
from icl_gd.metrics.scoring import RunExamples, layer_mean, positions_of

log = logging.getLogger(__name__)


def _cell_terms(ex: RunExamples, metric: str, rows: np.ndarray):
    """The per-example terms of a run score on the examples ``rows``: (numerator, denominator) of a
    ratio, or the (n, L) similarity values."""
    if metric in ex.similarities:
        return ex.similarities[metric][rows]
    if metric in premise.MAJORITY_OF:
        return premise.majority_terms(getattr(ex, premise.MAJORITY_OF[metric])[rows])
    num, den = ex.ratio_terms(metric)
    return num[rows], den[rows]


def _has_score(ex: RunExamples, metric: str) -> bool:
    if metric in premise.MAJORITY_OF:
        return getattr(ex, premise.MAJORITY_OF[metric]) is not None
    return metric in ex.ratio_names or metric in ex.similarities


def _statistic(terms, counts: np.ndarray) -> np.ndarray:
    """The run score on each resample (rows of ``counts``): a ratio, or the layer mean of the
    per-layer means over examples, as the summary computes it."""
    if isinstance(terms, tuple):
        return resampling.bootstrap_ratios(*terms, counts)
    return layer_mean(resampling.bootstrap_means(terms, counts))


# chunks of resample counts kept for reuse: most claims ask each task for its first chunk or two, so
# a few per task; at most KEPT x chunk x examples x 8 bytes (16 x 1000 x 2000 examples: 256 MB)
KEPT = 16


class Replicates:
    """The bootstrap replicates of every cell of every (model, task, seed), drawn in chunks of
    ``chunk`` as they are asked for: asking for more extends the same streams (the first
    chunks are the same whatever the total), so a claim whose verdict the bootstrap's own noise
    could flip can draw more (:data:`MAX_REPLICATES`) without changing any other claim's. Every
    seed and cell of a task is resampled with the same counts: the crossed design."""

    def __init__(self, index, cells: set[tuple[str, str, str]], chunk: int, seed: int):
        self.index, self.cells, self.chunk, self.seed = index, cells, chunk, seed
        self._tasks: dict[tuple, tuple] = {}  # (model, task) -> (ids, {seed: terms per cell}, {seed: points})
        self._reps: dict[tuple, list[np.ndarray]] = {}  # (model, task, seed, *cell) -> chunks
        self._errors: dict[tuple, list[np.ndarray]] = {}  # (model, task, seeds, a, b) -> chunks
        # the chunks most recently drawn, shared by every cell and claim that asks for them again
        # (the draws are the same either way): the default run's claims job asked for 14,100 chunks
        # of counts, 6,294 of them distinct
        self._drawn: collections.OrderedDict[tuple, np.ndarray] = collections.OrderedDict()

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
            if any(
                len(ids) != len(np.unique(runs[run].example_id)) for s, runs in by_seed.items() for run in present[s]
            ):
                log.warning(
                    "%s/%s: the seeds and settings of this task evaluate different examples; the claims "
                    "pair the %d they share",
                    model,
                    task,
                    len(ids),
                )
            terms, points = {}, {}
            ones = np.ones((1, len(ids)))
            for s, runs in by_seed.items():
                rows = {run: positions_of(runs[run].example_id, ids) for run in present[s]}
                terms[s] = {
                    c: _cell_terms(runs[c[:2]], c[2], rows[c[:2]])
                    for c in self.cells
                    if c[:2] in present[s] and _has_score(runs[c[:2]], c[2])
                }
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
        for j in range(
            min((len(self._reps.setdefault((model, task, s, *c), [])) for s, c in wanted), default=n_chunks), n_chunks
        ):
            counts = self._counts(task, len(ids), j)
            for s, c in wanted:
                chunks = self._reps[(model, task, s, *c)]
                if len(chunks) == j:
                    chunks.append(_statistic(terms[s][c], counts))
        return {
            s: {c: (points[s][c], np.concatenate(self._reps[(model, task, s, *c)])[:n_rep], len(ids)) for c in cells}
            for s in seeds
        }

    def _counts(self, task: str, n: int, j: int) -> np.ndarray:
        """The j-th chunk of a task's resamples of its n examples: the same for every seed and cell,
        the :data:`KEPT` most recently asked for kept."""
        return self._kept(
            ("counts", task, n, j),
            lambda: resampling.bootstrap_counts(
                n, self.chunk, np.random.default_rng([self.seed, zlib.crc32(task.encode()), j])
            ),
        )

    def _kept(self, key: tuple, draw) -> np.ndarray:
        """``draw()``, or its result kept from the last time ``key`` was asked for (the :data:`KEPT`
        latest)."""
        if key in self._drawn:
            self._drawn.move_to_end(key)
            return self._drawn[key]
        self._drawn[key] = drawn = draw()
        if len(self._drawn) > KEPT:
            self._drawn.popitem(last=False)
        return drawn

    def errors(self, model: str, task: str, seeds: list[int], a_cell, b, n_rep: int) -> tuple | None:
        """For a difference of similarity scores (``b`` a cell or a constant), the standard error of
        its mean over ``seeds`` on each of the first ``n_rep`` resamples and on the sample
        (:func:`inference.crossed_replicates`' ``errors``): from each example's value averaged over
        layers, a - b, averaged over the seeds. None for the ratios (accuracy and the like: 0/1
        terms, for which the percentile interval holds and the studentized one does not where
        changes are sparse; ``benchmarks/coverage.py``)."""
        ids, terms, _ = self._prepared(model, task)
        cells = [a_cell] if isinstance(b, float) else [a_cell, b]
        if any(isinstance(terms[s][c], tuple) for s in seeds for c in cells):
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an example undefined in every layer
            values = np.stack(
                [layer_mean(terms[s][a_cell]) - (b if isinstance(b, float) else layer_mean(terms[s][b])) for s in seeds]
            )
        sample = inference.mean_errors(values, np.ones((1, len(ids))))
        if sample is None:
            return None
        chunks = self._errors.setdefault((model, task, tuple(seeds), a_cell, b), [])
        for j in range(len(chunks), -(-n_rep // self.chunk)):
            chunks.append(inference.mean_errors(values, self._counts(task, len(ids), j))[0])
        return np.concatenate(chunks)[:n_rep], sample[1]

    def uniforms(self, task: str, n_rep: int) -> np.ndarray:
        """The quantiles of the seeds' Student t of a task's replicates, chunk by chunk as above."""

        def draw(j):
            return inference.stratified_uniforms(
                self.chunk, np.random.default_rng([self.seed, zlib.crc32(task.encode()), j, 1])
            )

        chunks = [self._kept(("uniforms", task, j), lambda j=j: draw(j)) for j in range(-(-n_rep // self.chunk))]
        return np.concatenate(chunks)[:n_rep]
