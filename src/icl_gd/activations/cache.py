"""The activation cache: one file per (model, variant, task, seed, setting), one row per example.

A cache is an uncompressed Arrow IPC file (``.arrow``, Feather v2), memory-mapped on reading:
every array comes back as a read-only numpy view on the file's pages, nothing is decoded or
copied (``read_cache``). A 2000-example cache of the 1.3B shape opens in milliseconds, where the
parquet of cache version 1 took ~1 s each to decode.

Layouts (``cache_dtype``):

* ``compact`` (the default): the ZSL cache of a (model, variant, task; ZSL does not depend on the
  seed) holds its values in float32 and is the *reference* of the others; every other setting of
  each seed holds its *change* from it,
  h_S - h_ZSL and m_S - m_ZSL, in float16, each (example, layer) row divided by its largest
  magnitude (kept as a float32 per row). The change is what the metrics compare (SimAOU, SimAM_delta
  and alpha are cosines of changes, SimAOU_norm and SimAM those of reference + change), and float16
  keeps three significant digits of a change however small it is beside the activation, where
  float16 values would lose it. Half the bytes of float32, with float32's metrics.
* ``float32``, ``float16``: every setting's values in that dtype (float16 shifts the similarities
  of small changes: docs/precision.md).

=================  =========================  ===============================================
column             numpy shape after reading  what it holds
=================  =========================  ===============================================
example_id         (n,) int64                 the example's stable id in the evaluation split
gold               (n,) int16                 gold class index (icl_permuted: the permuted
                                              gold, the class whose word its context gives
                                              the gold class: splits.permuted_gold)
pred               (n,) int16                 argmax of ``label_logprobs`` (ties: first class)
label_logprobs     (n, n_labels) float32      log-softmax over the vocabulary, at the answer
                                              position, read at each class's label word
query_len          (n,) int32                 number of query keys recorded
attn_out           (n, L, d_model)            attention output at the recorded position, after
                                              the output projection, before dropout/residual
                                              (values, or changes from the reference)
attn_scores        (sum of L*H*query_len,)    pre-softmax scaled scores q.k/sqrt(d_head) of the
                                              recorded position over the query keys (first query
                                              token .. recorded token): example i's L x H rows of
                                              query_len[i] keys, no padding (values, or changes)
attn_out_scale,    (n, L) float32             change caches only: each row's scale; the change
attn_scores_scale                             is scale[i, l] * stored row
context_scores     (n, L, n_context)          pre-softmax scores over the context keys (<s> and
                                              demonstrations), summed over heads; no metric reads
                                              them. Compact: float16 rows scaled like the changes
                                              (``context_scores_scale``), three digits of each
=================  =========================  ===============================================

``RunCache.outputs()``, ``RunCache.score_rows()`` and ``RunCache.context()`` give the values
whatever the layout, the score rows padded with NaN to (n, L, H, max query_len); the metrics read
the stored arrays.
The run's identity and shapes (model, variant, task, seed, setting, true_k, n_layers, ...) are in
the schema metadata under ``icl_gd``; a change cache names its reference (the file beside it and
the reference's ``cache_id``, a random id each cache is written with). This module imports nothing
else of the package but the atomic writer.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from icl_gd.common.atomic import atomic_path
from icl_gd.common.frames import CacheError, atomic_write_table, read_table, rerun_hint

METADATA_KEY = b"icl_gd"
CACHE_VERSION = 2
SUFFIX = ".arrow"
LAYOUTS = ("compact", "float32", "float16")
REFERENCE_SETTING = "zsl"
_VALUE_DTYPES = {"compact": np.float32, "float32": np.float32, "float16": np.float16}


@dataclass
class RunCache:
    """A cache read back as numpy arrays (read-only views on the memory-mapped file)."""

    meta: dict
    example_id: np.ndarray
    gold: np.ndarray
    pred: np.ndarray
    label_logprobs: np.ndarray
    query_len: np.ndarray
    attn_out: np.ndarray
    attn_scores: np.ndarray
    context_scores: np.ndarray
    attn_out_scale: np.ndarray | None = None
    attn_scores_scale: np.ndarray | None = None
    context_scores_scale: np.ndarray | None = None
    path: Path | None = None
    _reference: RunCache | None = field(default=None, repr=False)

    @property
    def n_examples(self) -> int:
        return len(self.example_id)

    @property
    def is_change(self) -> bool:
        """Whether the arrays hold changes from a reference (the compact layout's non-ZSL settings)."""
        return self.meta.get("storage") == "changes"

    @property
    def score_offsets(self) -> np.ndarray:
        """(n + 1,) int64: example i's score rows are ``attn_scores[offsets[i]:offsets[i + 1]]``."""
        sizes = self.meta["n_layers"] * self.meta["n_heads"] * self.query_len.astype(np.int64)
        return np.concatenate([[0], np.cumsum(sizes)])

    @property
    def reference(self) -> RunCache | None:
        """The cache a change cache is relative to (read from beside it when not given)."""
        if not self.is_change:
            return None
        if self._reference is None:
            if self.path is None:
                raise CacheError("a change cache read without its path needs its reference given")
            self._reference = read_cache(self.path.parent / self.meta["reference"]["file"])
        self._check_reference(self._reference)
        return self._reference

    def _check_reference(self, reference: RunCache) -> None:
        expected = self.meta["reference"]["cache_id"]
        if reference.meta.get("cache_id") != expected:
            raise CacheError(
                f"{self.path or 'this cache'} holds changes from a {REFERENCE_SETTING} cache with id {expected}, but "
                f"{reference.path or 'the one given'} has id {reference.meta.get('cache_id')} (it was written again "
                f"since): {rerun_hint(self.path or 'the change cache')}"
            )

    def context(self) -> np.ndarray:
        """(n, L, n_context) float32: the context scores, whatever the layout."""
        if self.context_scores_scale is None:
            return np.asarray(self.context_scores, dtype=np.float32)
        return self.context_scores.astype(np.float32) * self.context_scores_scale[:, :, None]

    def outputs(self) -> np.ndarray:
        """(n, L, D) float32: the attention outputs, whatever the layout."""
        values, scale = self.attn_out, self.attn_out_scale
        if not self.is_change:
            return np.asarray(values, dtype=np.float32)
        return self.reference.outputs() + values.astype(np.float32) * scale[:, :, None]

    def score_rows(self) -> np.ndarray:
        """(n, L, H, max query_len) float32: the score rows, NaN past each example's query."""
        n_layers, n_heads = self.meta["n_layers"], self.meta["n_heads"]
        valid = _valid_keys(self.query_len, n_layers, n_heads)
        out = np.full(valid.shape, np.nan, np.float32)
        out[valid] = self.score_values()
        return out

    def output_change(self, reference: RunCache) -> tuple[np.ndarray, np.ndarray | None]:
        """h - h_reference as (array, per-(example, layer) scale or None): the stored change of a
        change cache, else the difference computed here (float32)."""
        if self.is_change:
            self._check_reference(reference)
            return self.attn_out, self.attn_out_scale
        return np.subtract(self.attn_out, reference.outputs(), dtype=np.float32), None

    def score_change(self, reference: RunCache) -> tuple[np.ndarray, np.ndarray | None]:
        """m - m_reference over the valid keys, flat like ``attn_scores``, with its scale (see
        :meth:`output_change`)."""
        if self.is_change:
            self._check_reference(reference)
            return self.attn_scores, self.attn_scores_scale
        return np.subtract(self.score_values(), reference.score_values(), dtype=np.float32), None

    def score_values(self) -> np.ndarray:
        """The score rows' values, flat like ``attn_scores`` (float32)."""
        flat = np.asarray(self.attn_scores, dtype=np.float32)
        if not self.is_change:
            return flat
        rows = _row_lengths(self.query_len, self.meta["n_layers"], self.meta["n_heads"])
        return self.reference.score_values() + flat * np.repeat(self.attn_scores_scale.reshape(-1), rows)


def _row_lengths(query_len: np.ndarray, n_layers: int, n_heads: int) -> np.ndarray:
    """The length of each (example, layer) row of the flat score rows, in order: H x query_len."""
    return np.repeat(n_heads * np.asarray(query_len, dtype=np.int64), n_layers)


def _valid_keys(query_len: np.ndarray, n_layers: int, n_heads: int, width: int | None = None) -> np.ndarray:
    """(n, L, H, width) bool: True on each example's query keys (C order: the ragged layout)."""
    q = np.asarray(query_len, dtype=np.int64)
    width = int(q.max(initial=0)) if width is None else width
    return np.broadcast_to(
        (np.arange(width)[None, :] < q[:, None])[:, None, None, :], (len(q), n_layers, n_heads, width)
    )


def _fixed_list(values: np.ndarray, width: int, pa_type: pa.DataType) -> pa.FixedSizeListArray:
    flat = pa.array(np.ascontiguousarray(values).reshape(-1), type=pa_type)
    return pa.FixedSizeListArray.from_arrays(flat, width)


def _ragged(flat: np.ndarray, offsets: np.ndarray, pa_type: pa.DataType) -> pa.LargeListArray:
    return pa.LargeListArray.from_arrays(pa.array(offsets, type=pa.int64()), pa.array(flat, type=pa_type))


def _pa_float(dtype) -> pa.DataType:
    return pa.float16() if np.dtype(dtype) == np.float16 else pa.float32()


def encode_change(change: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A float32 change as float16 rows scaled to a largest magnitude of 1, and the scales.

    ``change`` is (n, L, X) with ``rows`` None; or flat, with ``rows`` the length of each
    (example, layer) row in order. A row that holds NaN or inf gets a NaN scale (its change, and
    every cosine of it, is undefined); a row of zeros a zero scale."""
    change = np.asarray(change, dtype=np.float32)
    if rows is None:
        scale = np.abs(change).max(axis=-1, initial=0.0)
        repeat = scale[..., None]
    else:
        rows = np.asarray(rows, dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(rows)[:-1]])
        scale = np.zeros(len(rows), np.float32)
        filled = rows > 0  # an empty row would make reduceat read its neighbour's first value
        if filled.any():
            scale[filled] = np.maximum.reduceat(np.abs(change), starts[filled])
        repeat = np.repeat(scale, rows)
    defined = np.isfinite(repeat) & (repeat > 0)
    stored = np.divide(change, repeat, out=np.zeros_like(change), where=defined).astype(np.float16)
    return stored, np.where(np.isfinite(scale), scale, np.nan).astype(np.float32)


def _write_arrow(table: pa.Table, path: str | os.PathLike) -> None:
    """A table as one uncompressed Arrow IPC record batch, atomically: one contiguous buffer per
    column, which a reader maps without copying."""
    with atomic_path(path) as tmp, pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=max(1, table.num_rows))


def write_cache(
    path: str | os.PathLike,
    meta: dict,
    *,
    example_id: np.ndarray,
    gold: np.ndarray,
    label_logprobs: np.ndarray,
    query_len: np.ndarray,
    attn_out: np.ndarray,
    attn_scores: np.ndarray,
    context_scores: np.ndarray,
    layout: str = "compact",
    reference: RunCache | None = None,
) -> None:
    """Write one run's records. ``attn_scores`` is (n, L, H, Q) with anything past each example's
    ``query_len`` ignored (padding). In the compact layout a cache given its ``reference`` (the ZSL
    cache of the same model, variant, task and seed, over the same examples) stores its changes
    from it; one without is a reference. ``pred`` is derived here, so it always agrees with the
    log-probs."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    n = len(example_id)
    n_layers, d_model = attn_out.shape[1:]
    n_heads = attn_scores.shape[2]
    n_context = context_scores.shape[2]
    if not (attn_scores.shape[:2] == (n, n_layers) and context_scores.shape[:2] == (n, n_layers)):
        raise ValueError("attn_out, attn_scores and context_scores disagree on examples or layers")
    query_len = np.asarray(query_len, dtype=np.int32)
    if query_len.shape != (n,) or (query_len < 0).any() or (query_len > attn_scores.shape[3]).any():
        raise ValueError(f"query_len must be (n,) within 0..{attn_scores.shape[3]}, the score rows' width")
    label_logprobs = np.asarray(label_logprobs, dtype=np.float32)
    changes = layout == "compact" and reference is not None
    value_dtype = _VALUE_DTYPES[layout]
    scores = np.asarray(attn_scores)[_valid_keys(query_len, n_layers, n_heads, attn_scores.shape[3])]
    meta = {
        **meta,
        "cache_version": CACHE_VERSION,
        "cache_id": uuid.uuid4().hex,
        "layout": layout,
        "storage": "changes" if changes else "values",
        "n_examples": n,
        "n_layers": int(n_layers),
        "d_model": int(d_model),
        "n_heads": int(n_heads),
        "max_query_len": int(query_len.max(initial=0)),
        "n_context": int(n_context),
        "n_labels": int(label_logprobs.shape[1]),
    }
    offsets = np.concatenate([[0], np.cumsum(n_layers * n_heads * query_len.astype(np.int64))])
    columns = {
        "example_id": pa.array(np.asarray(example_id, dtype=np.int64)),
        "gold": pa.array(np.asarray(gold, dtype=np.int16)),
        "pred": pa.array(np.argmax(label_logprobs, axis=1).astype(np.int16)),
        "label_logprobs": _fixed_list(label_logprobs, label_logprobs.shape[1], pa.float32()),
        "query_len": pa.array(query_len),
    }
    if changes:
        if not (np.array_equal(reference.example_id, example_id) and np.array_equal(reference.query_len, query_len)):
            raise ValueError(
                f"the reference {reference.path} holds other examples or query lengths than {meta.get('setting')!r}: "
                "both must come from one config; rerun the reference"
            )
        out_change, out_scale = encode_change(np.subtract(attn_out, reference.outputs(), dtype=np.float32))
        score_change, score_scale = encode_change(
            np.subtract(scores, reference.score_values(), dtype=np.float32),
            rows=_row_lengths(query_len, n_layers, n_heads),
        )
        # the reference's path relative to this cache's folder (a later seed's runs share the first
        # seed's ZSL: ../seed2/zsl.arrow)
        where = os.path.relpath(reference.path, Path(path).parent) if reference.path else f"{REFERENCE_SETTING}{SUFFIX}"
        meta["reference"] = {
            "setting": reference.meta["setting"],
            "cache_id": reference.meta["cache_id"],
            "file": where,
        }
        columns["attn_out"] = _fixed_list(out_change, n_layers * d_model, pa.float16())
        columns["attn_out_scale"] = _fixed_list(out_scale, n_layers, pa.float32())
        columns["attn_scores"] = _ragged(score_change, offsets, pa.float16())
        columns["attn_scores_scale"] = _fixed_list(score_scale.reshape(n, n_layers), n_layers, pa.float32())
    else:
        columns["attn_out"] = _fixed_list(
            np.asarray(attn_out, dtype=value_dtype), n_layers * d_model, _pa_float(value_dtype)
        )
        columns["attn_scores"] = _ragged(scores.astype(value_dtype), offsets, _pa_float(value_dtype))
    if layout == "compact":
        # no metric reads them: three digits of each row, as the changes keep, and half the bytes
        stored, scale = encode_change(context_scores)
        columns["context_scores"] = _fixed_list(stored, n_layers * n_context, pa.float16())
        columns["context_scores_scale"] = _fixed_list(scale, n_layers, pa.float32())
    else:
        columns["context_scores"] = _fixed_list(
            np.asarray(context_scores, dtype=value_dtype), n_layers * n_context, _pa_float(value_dtype)
        )
    table = pa.table(columns).replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()})
    _write_arrow(table, path)


def _open_table(path: str | os.PathLike, *, schema_only: bool = False):
    """The file's table (memory-mapped), or its schema; a CacheError that names the file where it
    is not a readable cache of this version."""
    try:
        source = pa.memory_map(str(path), "r")
        reader = pa.ipc.open_file(source)
        table = reader.schema if schema_only else reader.read_all()
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError, ValueError) as err:
        with open(path, "rb") as handle:
            magic = handle.read(4)
        if magic == b"PAR1":
            raise CacheError(
                f"{path} is an activation cache of an earlier layout (parquet, cache version 1); this code reads "
                f"version {CACHE_VERSION} ({SUFFIX}): {rerun_hint(path)}"
            ) from None
        raise CacheError(
            f"{path} cannot be read as an activation cache ({err}): the file is damaged, e.g. cut short by an "
            f"interrupted copy or a full disk; {rerun_hint(path)}"
        ) from None
    schema = table if schema_only else table.schema
    meta = json.loads((schema.metadata or {}).get(METADATA_KEY, b"{}"))
    if meta.get("cache_version") != CACHE_VERSION:
        raise CacheError(
            f"{path} has cache version {meta.get('cache_version')}, this code reads {CACHE_VERSION}: {rerun_hint(path)}"
        )
    return table, meta


def read_meta(path: str | os.PathLike) -> dict:
    return _open_table(path, schema_only=True)[1]


def _column(table: pa.Table, name: str) -> np.ndarray:
    """A column's values as a flat zero-copy numpy view (a list column's child values)."""
    column = table.column(name)
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if isinstance(array, (pa.FixedSizeListArray, pa.LargeListArray)):
        array = array.flatten()
    return array.to_numpy(zero_copy_only=True)


def read_cache(path: str | os.PathLike, reference: RunCache | None = None) -> RunCache:
    """A cache, memory-mapped. A change cache reads its reference from beside it when it needs it,
    unless ``reference`` gives it."""
    table, meta = _open_table(path)
    n, n_layers = meta["n_examples"], meta["n_layers"]
    names = set(table.column_names)
    run = RunCache(
        meta=meta,
        example_id=_column(table, "example_id"),
        gold=_column(table, "gold"),
        pred=_column(table, "pred"),
        label_logprobs=_column(table, "label_logprobs").reshape(n, meta["n_labels"]),
        query_len=_column(table, "query_len"),
        attn_out=_column(table, "attn_out").reshape(n, n_layers, meta["d_model"]),
        attn_scores=_column(table, "attn_scores"),
        context_scores=_column(table, "context_scores").reshape(n, n_layers, meta["n_context"]),
        attn_out_scale=_column(table, "attn_out_scale").reshape(n, n_layers) if "attn_out_scale" in names else None,
        attn_scores_scale=_column(table, "attn_scores_scale").reshape(n, n_layers)
        if "attn_scores_scale" in names
        else None,
        context_scores_scale=(
            _column(table, "context_scores_scale").reshape(n, n_layers) if "context_scores_scale" in names else None
        ),
        path=Path(path),
    )
    if run.attn_scores.size != run.score_offsets[-1]:
        raise CacheError(f"{path}: its score rows do not add up to its query lengths; {rerun_hint(path)}")
    if reference is not None:
        run._reference = reference
        if run.is_change:
            run._check_reference(reference)
    return run


def rewrite(run: RunCache, path: str | os.PathLike, layout: str, reference: RunCache | None = None) -> RunCache:
    """The same records in another layout (a change cache given the reference of its changes)."""
    meta = {k: v for k, v in run.meta.items() if k not in ("reference", "cache_id", "storage", "layout")}
    write_cache(
        path,
        meta,
        example_id=run.example_id,
        gold=run.gold,
        label_logprobs=run.label_logprobs,
        query_len=run.query_len,
        attn_out=run.outputs(),
        attn_scores=run.score_rows(),
        context_scores=run.context(),
        layout=layout,
        reference=reference,
    )
    return read_cache(path, reference)


def write_train_log(
    path: str | os.PathLike, meta: dict, *, loss: np.ndarray, grad_norm: np.ndarray, skipped: np.ndarray
) -> None:
    """One row per optimiser step: the loss and each layer's l2 norm of its K/V gradient."""
    loss = np.asarray(loss, dtype=np.float64)
    grad_norm = np.asarray(grad_norm, dtype=np.float32).reshape(len(loss), -1)
    table = pa.table(
        {
            "step": pa.array(np.arange(len(loss), dtype=np.int32)),
            "loss": pa.array(loss),
            "grad_norm": _fixed_list(grad_norm, grad_norm.shape[1], pa.float32()),
            "skipped": pa.array(np.asarray(skipped, dtype=bool)),
        }
    )
    meta = {**meta, "n_layers": int(grad_norm.shape[1])}
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()})
    atomic_write_table(table, path)


def read_train_log(path: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    table = read_table(path)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    n = table.num_rows
    grad_norm = table.column("grad_norm").combine_chunks()
    return meta, {
        "step": table.column("step").to_numpy(),
        "loss": table.column("loss").to_numpy(),
        "grad_norm": grad_norm.flatten().to_numpy().reshape(n, meta["n_layers"]),
        "skipped": table.column("skipped").to_numpy(zero_copy_only=False),
    }
