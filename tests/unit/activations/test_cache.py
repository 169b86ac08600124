"""Tests of icl_gd.activations.cache: layouts and round trips, the compact layout's changes, memory-mapped
reads, damaged and old files named, atomic writes."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import json  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import pytest  # noqa: E402

from icl_gd.activations import cache  # noqa: E402
from icl_gd.common import frames

N, L, D, H, Q, C, K = 5, 3, 8, 2, 4, 6, 3
META = {"model": "tiny", "variant": "trained", "task": "sst5", "seed": 5, "setting": "icl", "true_k": 7}
QUERY_LEN = np.array([4, 2, 3, 1, 4])


def records(seed: int = 0, base: dict | None = None, step: float = 1.0) -> dict[str, np.ndarray]:
    """One run's records; with ``base``, another setting of the same examples: base + step * noise."""
    rng = np.random.default_rng(seed)
    logprobs = rng.normal(size=(N, K)).astype(np.float32)
    logprobs[1] = [-1.0, -0.5, -0.5]  # a tie between classes 1 and 2: the first wins
    logprobs[2] = [-2.0, -2.0, -2.0]  # all tied: class 0
    logprobs[3] = [-3.0, -2.0, -1.0]  # plain argmax: class 2
    attn_out = rng.normal(size=(N, L, D)).astype(np.float32) * 10
    scores = rng.normal(size=(N, L, H, Q)).astype(np.float32)
    if base is not None:
        attn_out = base["attn_out"] + step * attn_out
        scores = np.nan_to_num(base["attn_scores"]) + step * scores
    for i, q in enumerate(QUERY_LEN):
        scores[i, :, :, q:] = np.nan  # padding past each query
    return {
        "example_id": np.array([40, 3, 17, 8, 99]),
        "gold": np.array([0, 1, 2, 2, 1]),
        "label_logprobs": logprobs,
        "query_len": QUERY_LEN,
        "attn_out": attn_out,
        "attn_scores": scores,
        "context_scores": rng.normal(size=(N, L, C)).astype(np.float32),
    }


def root_base(array: np.ndarray):
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array


@pytest.mark.parametrize(
    "layout, np_dtype", [("float16", np.float16), ("float32", np.float32), ("compact", np.float32)]
)
def test_a_cache_of_values_round_trips(tmp_path, layout, np_dtype):
    rec = records()
    path = tmp_path / "zsl.arrow"
    cache.write_cache(path, {**META, "setting": "zsl"}, layout=layout, **rec)
    back = cache.read_cache(path)

    assert back.n_examples == N and not back.is_change and back.reference is None
    assert back.example_id.dtype == np.int64 and back.example_id.tolist() == [40, 3, 17, 8, 99]
    assert back.gold.dtype == np.int16 and back.gold.tolist() == [0, 1, 2, 2, 1]
    assert back.query_len.dtype == np.int32 and back.query_len.tolist() == [4, 2, 3, 1, 4]
    assert back.label_logprobs.dtype == np.float32  # always float32, whatever the layout
    np.testing.assert_array_equal(back.label_logprobs, rec["label_logprobs"])
    # pred is the argmax of the log-probs, ties to the first class
    assert back.pred.dtype == np.int16
    assert back.pred[1:4].tolist() == [1, 0, 2]
    assert back.pred.tolist() == np.argmax(rec["label_logprobs"], axis=1).tolist()

    assert back.attn_out.shape == (N, L, D) and back.attn_out.dtype == np_dtype
    np.testing.assert_array_equal(back.outputs(), rec["attn_out"].astype(np_dtype).astype(np.float32))
    # the score rows unpadded: example i's L x H rows of query_len[i] keys, one after another
    assert back.attn_scores.dtype == np_dtype and back.attn_scores.shape == (L * H * QUERY_LEN.sum(),)
    assert back.score_offsets.tolist() == [0, *np.cumsum(L * H * QUERY_LEN)]
    first = back.attn_scores[: L * H * 4].reshape(L, H, 4)
    np.testing.assert_array_equal(first, rec["attn_scores"][0].astype(np_dtype))
    rows = back.score_rows()  # padded again, NaN past each query
    assert rows.shape == (N, L, H, Q)
    np.testing.assert_array_equal(rows, rec["attn_scores"].astype(np_dtype).astype(np.float32))  # NaNs equal
    assert back.context_scores.shape == (N, L, C) and back.context().shape == (N, L, C)
    context_error = np.abs(back.context() - rec["context_scores"]).max(-1)
    assert (
        context_error
        <= (2**-11 if layout == "compact" else 2**-10 if layout == "float16" else 0)
        * np.abs(rec["context_scores"]).max(-1)
    ).all()

    meta = back.meta
    assert {k: meta[k] for k in META if k != "setting"} == {k: META[k] for k in META if k != "setting"}
    assert (meta["n_examples"], meta["n_layers"], meta["d_model"], meta["n_heads"]) == (N, L, D, H)
    assert (meta["max_query_len"], meta["n_context"], meta["n_labels"]) == (Q, C, K)
    assert meta["layout"] == layout and meta["storage"] == "values" and meta["cache_version"] == cache.CACHE_VERSION
    assert cache.read_meta(path) == meta


def compact_pair(tmp_path, step: float, **base_changes):
    zsl = records(seed=0)
    zsl.update(base_changes)
    icl = records(seed=1, base=zsl, step=step)
    cache.write_cache(tmp_path / "zsl.arrow", {**META, "setting": "zsl"}, layout="compact", **zsl)
    reference = cache.read_cache(tmp_path / "zsl.arrow")
    cache.write_cache(tmp_path / "icl.arrow", META, layout="compact", reference=reference, **icl)
    return zsl, icl, reference, cache.read_cache(tmp_path / "icl.arrow")


@pytest.mark.parametrize("step", [1.0, 1e-4])
def test_a_compact_cache_holds_float16_changes_that_keep_three_digits_however_small(tmp_path, step):
    zsl, icl, reference, back = compact_pair(tmp_path, step)
    assert back.is_change and back.meta["storage"] == "changes" and back.meta["reference"]["file"] == "zsl.arrow"
    assert back.attn_out.dtype == np.float16 and back.attn_scores.dtype == np.float16
    assert back.attn_out_scale.shape == (N, L) and back.attn_scores_scale.shape == (N, L)
    assert np.abs(back.attn_out).max() == 1.0  # each row scaled to a largest magnitude of 1
    change = icl["attn_out"] - zsl["attn_out"]
    stored, scale = back.output_change(reference)
    error = stored.astype(np.float64) * scale[:, :, None] - change
    assert np.abs(error).max() <= 2**-11 * np.abs(change).max(axis=-1, keepdims=True).max()
    # the values come back from reference + change, to the change's three digits
    np.testing.assert_allclose(back.outputs(), icl["attn_out"], rtol=0, atol=2**-11 * np.abs(change).max() + 1e-5)
    rows = back.score_rows()
    assert np.array_equal(np.isnan(rows), np.isnan(icl["attn_scores"]))
    score_change = icl["attn_scores"] - zsl["attn_scores"]
    assert np.nanmax(np.abs(rows - icl["attn_scores"])) <= 2**-11 * np.nanmax(np.abs(score_change)) + 1e-5
    # float16 values could not have kept a change this small beside values of ~10
    if step < 1e-3:
        rounded = icl["attn_out"].astype(np.float16).astype(np.float32) - zsl["attn_out"].astype(np.float16)
        assert np.abs(rounded - change).max() > np.abs(change).max()


def test_a_row_without_a_finite_change_is_undefined_and_a_row_without_change_is_zero(tmp_path):
    zsl = records(seed=0)
    icl = records(seed=1, base=zsl, step=0.1)
    icl["attn_out"][2, 1, 3] = np.nan
    icl["attn_out"][4, 0] = zsl["attn_out"][4, 0]  # unchanged
    icl["attn_scores"][0, 2, 1, 0] = np.inf
    cache.write_cache(tmp_path / "zsl.arrow", {**META, "setting": "zsl"}, **zsl)
    reference = cache.read_cache(tmp_path / "zsl.arrow")
    cache.write_cache(tmp_path / "icl.arrow", META, reference=reference, **icl)
    back = cache.read_cache(tmp_path / "icl.arrow")
    assert np.isnan(back.attn_out_scale[2, 1]) and np.isnan(back.outputs()[2, 1]).all()
    assert back.attn_out_scale[4, 0] == 0 and np.array_equal(back.outputs()[4, 0], zsl["attn_out"][4, 0])
    assert np.isnan(back.attn_scores_scale[0, 2]) and np.isnan(back.score_rows()[0, 2, :, :4]).all()
    assert np.isfinite(back.outputs()[[0, 1, 3]]).all()


def test_compact_caches_take_about_half_the_bytes_of_float32(tmp_path):
    rng = np.random.default_rng(0)
    n, layers, width, heads, keys = 40, 4, 512, 8, 32
    query_len = rng.integers(keys // 2, keys + 1, size=n)
    sizes = {}
    for layout in ("float32", "compact"):
        base = dict(
            example_id=np.arange(n),
            gold=np.zeros(n),
            label_logprobs=np.zeros((n, 2), np.float32),
            query_len=query_len,
            context_scores=np.zeros((n, layers, 1), np.float32),
            attn_out=rng.normal(size=(n, layers, width)).astype(np.float32),
            attn_scores=rng.normal(size=(n, layers, heads, keys)).astype(np.float32),
        )
        cache.write_cache(tmp_path / f"{layout}-zsl.arrow", {"setting": "zsl"}, layout=layout, **base)
        reference = cache.read_cache(tmp_path / f"{layout}-zsl.arrow")
        other = {**base, "attn_out": base["attn_out"] + 0.01, "attn_scores": base["attn_scores"] * 1.01}
        cache.write_cache(
            tmp_path / f"{layout}-gd.arrow", {"setting": "gd"}, layout=layout, reference=reference, **other
        )
        sizes[layout] = (tmp_path / f"{layout}-gd.arrow").stat().st_size
    assert sizes["compact"] <= 0.52 * sizes["float32"], sizes


def test_read_does_not_copy(tmp_path):
    _, _, _, back = compact_pair(tmp_path, 0.1)
    for name in (
        "example_id",
        "gold",
        "pred",
        "label_logprobs",
        "query_len",
        "attn_out",
        "attn_scores",
        "context_scores",
        "attn_out_scale",
        "attn_scores_scale",
        "context_scores_scale",
    ):
        array = getattr(back, name)
        assert not array.flags.owndata, name
        # a view all the way down onto the Arrow buffer of the mapped file, not onto a numpy copy
        assert isinstance(root_base(array), (pa.Array, pa.Buffer)), (name, type(root_base(array)))
        assert not array.flags.writeable, name


def test_write_checks_shapes_and_the_reference(tmp_path):
    rec = records()
    bad = {**rec, "context_scores": rec["context_scores"][:, :2]}  # two layers where the others have three
    with pytest.raises(ValueError, match="disagree"):
        cache.write_cache(tmp_path / "bad.arrow", META, **bad)
    with pytest.raises(ValueError, match="query_len"):
        cache.write_cache(tmp_path / "bad.arrow", META, **{**rec, "query_len": QUERY_LEN + 1})
    cache.write_cache(tmp_path / "zsl.arrow", {**META, "setting": "zsl"}, **rec)
    reference = cache.read_cache(tmp_path / "zsl.arrow")
    other = {**records(seed=3, base=rec), "example_id": np.array([40, 3, 17, 8, 100])}
    with pytest.raises(ValueError, match="other examples"):
        cache.write_cache(tmp_path / "bad.arrow", META, reference=reference, **other)
    with pytest.raises(ValueError, match="layout must be one of"):
        cache.write_cache(tmp_path / "bad.arrow", META, layout="bfloat16", **rec)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zsl.arrow"]


def test_a_change_cache_whose_reference_was_written_again_or_is_gone_is_refused(tmp_path):
    zsl, _, _, back = compact_pair(tmp_path, 0.1)
    np.testing.assert_array_equal(back.reference.outputs(), zsl["attn_out"])  # found beside it
    cache.write_cache(tmp_path / "zsl.arrow", {**META, "setting": "zsl"}, **zsl)  # the same values, a new cache
    with pytest.raises(frames.CacheError, match="written again since.*delete .*icl.arrow and rerun"):
        cache.read_cache(tmp_path / "icl.arrow").outputs()
    with pytest.raises(frames.CacheError, match="written again since"):
        cache.read_cache(tmp_path / "icl.arrow", reference=cache.read_cache(tmp_path / "zsl.arrow"))
    (tmp_path / "zsl.arrow").unlink()
    with pytest.raises(FileNotFoundError):
        cache.read_cache(tmp_path / "icl.arrow").outputs()


def test_a_damaged_or_old_cache_is_named_with_what_to_do(tmp_path):
    rec = records()
    path = tmp_path / "zsl.arrow"
    cache.write_cache(path, {**META, "setting": "zsl"}, **rec)
    whole = path.read_bytes()
    for cut in (0, 10, len(whole) // 2, len(whole) - 1):  # an interrupted copy, a full disk
        damaged = tmp_path / f"cut{cut}.arrow"
        damaged.write_bytes(whole[:cut])
        with pytest.raises(frames.CacheError, match=f"{damaged}.*damaged.*delete {damaged} and rerun"):
            cache.read_cache(damaged)
    old = tmp_path / "old.arrow"
    pq.write_table(pa.table({"example_id": [1]}), old)  # cache version 1 was parquet
    with pytest.raises(frames.CacheError, match="earlier layout .parquet, cache version 1.*delete .*and rerun"):
        cache.read_cache(old)
    table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
    meta = json.loads(table.schema.metadata[cache.METADATA_KEY])
    meta["cache_version"] = cache.CACHE_VERSION + 1
    table = table.replace_schema_metadata({cache.METADATA_KEY: json.dumps(meta).encode()})
    with pa.OSFile(str(tmp_path / "next.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    with pytest.raises(frames.CacheError, match="cache version 3, this code reads 2.*delete .*and rerun"):
        cache.read_cache(tmp_path / "next.arrow")


def test_a_damaged_parquet_table_is_named(tmp_path):
    path = tmp_path / "t.parquet"
    frames.atomic_write_frame(__import__("pandas").DataFrame({"value": [1.0, 2.0]}), path)
    path.write_bytes(path.read_bytes()[:-9])
    with pytest.raises(frames.CacheError, match=f"{path} cannot be read.*damaged.*delete {path} and rerun"):
        frames.read_frame(path)


def test_rewrite_converts_between_layouts(tmp_path):
    zsl, icl, reference, back = compact_pair(tmp_path, 0.1)
    full = cache.rewrite(back, tmp_path / "icl32.arrow", "float32")
    assert not full.is_change and full.attn_out.dtype == np.float32
    np.testing.assert_array_equal(full.outputs(), back.outputs())
    again = cache.rewrite(full, tmp_path / "icl-again.arrow", "compact", reference=reference)
    assert again.is_change and np.array_equal(again.attn_out, back.attn_out)


def test_train_log_round_trip(tmp_path):
    path = tmp_path / "log.parquet"
    loss = np.array([2.5, 2.25, 1.75])
    grad_norm = np.array([[1.0, 2.0, 3.0, 4.0], [0.5, 0.25, 0.125, 0.0625], [9.0, 8.0, 7.0, 6.0]])
    skipped = np.array([False, True, False])
    cache.write_train_log(path, {"method": "gd", "lr": 0.01}, loss=loss, grad_norm=grad_norm, skipped=skipped)
    meta, log = cache.read_train_log(path)
    assert meta == {"method": "gd", "lr": 0.01, "n_layers": 4}
    assert log["step"].tolist() == [0, 1, 2]
    assert log["loss"].dtype == np.float64 and log["loss"].tolist() == [2.5, 2.25, 1.75]
    assert log["grad_norm"].shape == (3, 4) and log["grad_norm"].dtype == np.float32
    np.testing.assert_array_equal(log["grad_norm"], grad_norm.astype(np.float32))
    assert log["skipped"].dtype == bool and log["skipped"].tolist() == [False, True, False]


def test_atomic_write_leaves_only_the_target(tmp_path):
    path = tmp_path / "sub" / "run.arrow"
    cache.write_cache(path, META, **records())
    assert sorted(p.name for p in path.parent.iterdir()) == ["run.arrow"]


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    path = tmp_path / "run.arrow"
    real = pa.ipc.RecordBatchFileWriter.write_table

    def write_then_fail(self, table, **kwargs):
        real(self, table, **kwargs)
        raise OSError("disk full")

    monkeypatch.setattr(pa.ipc.RecordBatchFileWriter, "write_table", write_then_fail)
    with pytest.raises(OSError, match="disk full"):
        cache.write_cache(path, META, **records())
    assert list(tmp_path.iterdir()) == []  # neither the target nor the temporary file


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "run.arrow"
    cache.write_cache(path, META, **records(seed=1))
    before = path.read_bytes()

    def fail(self, table, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(pa.ipc.RecordBatchFileWriter, "write_table", fail)
    with pytest.raises(RuntimeError):
        cache.write_cache(path, META, **records(seed=2))
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["run.arrow"]


def test_atomic_write_frame(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"metric": ["a", "b"], "layer": pd.array([0, None], dtype="Int64"), "value": [0.5, 1.5]})
    path = tmp_path / "t.parquet"
    frames.atomic_write_frame(frame, path)
    back = pd.read_parquet(path)
    pd.testing.assert_frame_equal(back, frame)
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]
