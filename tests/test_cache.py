"""Tests of icl_gd.cache: round trips, zero-copy reads, derived predictions, atomic writes."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import json  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import pytest  # noqa: E402

from icl_gd import cache  # noqa: E402

N, L, D, H, Q, C, K = 5, 3, 8, 2, 4, 6, 3
META = {"model": "tiny", "variant": "trained", "task": "sst5", "seed": 5, "setting": "icl", "true_k": 7}


def records(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    logprobs = rng.normal(size=(N, K)).astype(np.float32)
    logprobs[1] = [-1.0, -0.5, -0.5]  # a tie between classes 1 and 2: the first wins
    logprobs[2] = [-2.0, -2.0, -2.0]  # all tied: class 0
    logprobs[3] = [-3.0, -2.0, -1.0]  # plain argmax: class 2
    query_len = np.array([4, 2, 3, 1, 4])
    scores = rng.normal(size=(N, L, H, Q)).astype(np.float32)
    for i, q in enumerate(query_len):
        scores[i, :, :, q:] = np.nan  # padding past each query
    return {
        "example_id": np.array([40, 3, 17, 8, 99]),
        "gold": np.array([0, 1, 2, 2, 1]),
        "label_logprobs": logprobs,
        "query_len": query_len,
        "attn_out": rng.normal(size=(N, L, D)).astype(np.float32) * 10,
        "attn_scores": scores,
        "context_scores": rng.normal(size=(N, L, C)).astype(np.float32),
    }


def root_base(array: np.ndarray):
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array


@pytest.mark.parametrize("float_dtype, np_dtype", [("float16", np.float16), ("float32", np.float32)])
def test_write_read_round_trip(tmp_path, float_dtype, np_dtype):
    rec = records()
    path = tmp_path / "run.parquet"
    cache.write_cache(path, META, float_dtype=float_dtype, **rec)
    back = cache.read_cache(path)

    assert back.n_examples == N
    assert back.example_id.dtype == np.int64 and back.example_id.tolist() == [40, 3, 17, 8, 99]
    assert back.gold.dtype == np.int16 and back.gold.tolist() == [0, 1, 2, 2, 1]
    assert back.query_len.dtype == np.int32 and back.query_len.tolist() == [4, 2, 3, 1, 4]
    assert back.label_logprobs.dtype == np.float32  # always float32, whatever the cache dtype
    np.testing.assert_array_equal(back.label_logprobs, rec["label_logprobs"])
    # pred is the argmax of the log-probs, ties to the first class
    assert back.pred.dtype == np.int16
    assert back.pred[1:4].tolist() == [1, 0, 2]
    assert back.pred.tolist() == np.argmax(rec["label_logprobs"], axis=1).tolist()

    for name, shape in [("attn_out", (N, L, D)), ("attn_scores", (N, L, H, Q)), ("context_scores", (N, L, C))]:
        got = getattr(back, name)
        assert got.shape == shape and got.dtype == np_dtype, name
        np.testing.assert_array_equal(got, rec[name].astype(np_dtype))  # NaNs compare equal here
    assert np.isnan(back.attn_scores[1, :, :, 2:]).all() and not np.isnan(back.attn_scores[1, :, :, :2]).any()
    assert np.isnan(back.attn_scores).sum() == np.isnan(rec["attn_scores"]).sum()

    meta = back.meta
    assert {k: meta[k] for k in META} == META
    assert (meta["n_examples"], meta["n_layers"], meta["d_model"], meta["n_heads"]) == (N, L, D, H)
    assert (meta["max_query_len"], meta["n_context"], meta["n_labels"]) == (Q, C, K)
    assert meta["float_dtype"] == float_dtype and meta["cache_version"] == cache.CACHE_VERSION
    assert cache.read_meta(path) == meta


def test_float16_loses_precision_float32_does_not(tmp_path):
    rec = records()
    rec["attn_out"][0, 0, 0] = 1.0001
    cache.write_cache(tmp_path / "a.parquet", META, float_dtype="float16", **rec)
    cache.write_cache(tmp_path / "b.parquet", META, float_dtype="float32", **rec)
    assert cache.read_cache(tmp_path / "a.parquet").attn_out[0, 0, 0] == np.float16(1.0)
    assert cache.read_cache(tmp_path / "b.parquet").attn_out[0, 0, 0] == np.float32(1.0001)


def test_read_does_not_copy(tmp_path):
    path = tmp_path / "run.parquet"
    cache.write_cache(path, META, **records())
    back = cache.read_cache(path)
    for name in ("example_id", "gold", "pred", "label_logprobs", "query_len", "attn_out", "attn_scores", "context_scores"):
        array = getattr(back, name)
        assert not array.flags.owndata, name
        # a view all the way down onto the Arrow buffer, not onto a numpy copy of it
        assert isinstance(root_base(array), pa.Array), (name, type(root_base(array)))
        assert not array.flags.writeable, name


def test_write_checks_shapes(tmp_path):
    rec = records()
    rec["context_scores"] = rec["context_scores"][:, :2]  # two layers where the others have three
    with pytest.raises(ValueError, match="disagree"):
        cache.write_cache(tmp_path / "bad.parquet", META, **rec)
    assert not (tmp_path / "bad.parquet").exists()


def test_read_refuses_another_cache_version(tmp_path):
    path = tmp_path / "run.parquet"
    cache.write_cache(path, META, **records())
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[cache.METADATA_KEY])
    meta["cache_version"] = cache.CACHE_VERSION + 1
    pq.write_table(table.replace_schema_metadata({cache.METADATA_KEY: json.dumps(meta).encode()}), path)
    with pytest.raises(ValueError, match="delete it and rerun"):
        cache.read_cache(path)


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
    path = tmp_path / "sub" / "run.parquet"
    cache.write_cache(path, META, **records())
    assert sorted(p.name for p in path.parent.iterdir()) == ["run.parquet"]


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    path = tmp_path / "run.parquet"

    def write_half_then_fail(table, where, **kwargs):
        with open(where, "wb") as fh:
            fh.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(cache.pq, "write_table", write_half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        cache.write_cache(path, META, **records())
    assert list(tmp_path.iterdir()) == []  # neither the target nor the temporary file


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "run.parquet"
    cache.write_cache(path, META, **records(seed=1))
    before = path.read_bytes()

    def fail(table, where, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(cache.pq, "write_table", fail)
    with pytest.raises(RuntimeError):
        cache.write_cache(path, META, **records(seed=2))
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["run.parquet"]


def test_atomic_write_frame(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"metric": ["a", "b"], "layer": pd.array([0, None], dtype="Int64"), "value": [0.5, 1.5]})
    path = tmp_path / "t.parquet"
    cache.atomic_write_frame(frame, path)
    back = pd.read_parquet(path)
    pd.testing.assert_frame_equal(back, frame)
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]
