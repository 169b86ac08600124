"""A built-in model's build in the cost estimate (icl_gd.planning.build_cost): a copy of shipped
weights made for the model's recipe is priced as a copy, a build whose recipe differs as the
training it is. Recipe files only: nothing is trained or copied."""

from __future__ import annotations

import json
import math

import pytest

from icl_gd.activations import work
from icl_gd.planning import build_cost, devices, timing

SHAPE = work.Shape(n_layers=2, d_model=8, n_heads=2, vocab=10, block_params=100)
SPEC = {"source": "builtin", "weights": "models/tiny", "pretrain_steps": 100, "pretrain_len": 64, "n_positions": 128}


def folder(path, checksum, weights=b"w" * 1000):
    path.mkdir(parents=True)
    (path / "recipe.json").write_text(json.dumps({"checksum": checksum, "spec": {}}))
    (path / "model.safetensors").write_bytes(weights)
    return path


def test_a_build_copies_the_shipped_weights_only_where_they_are_its_recipes(tmp_path, monkeypatch):
    """The shipped folder (found in the working directory, else the workflow's folder) against the
    built model's recipe checksum: the same, a copy of the folder's bytes; another recipe, none."""
    shipped = folder(tmp_path / "repo" / "models" / "tiny", "abc")
    size = sum(f.stat().st_size for f in shipped.iterdir())
    same = folder(tmp_path / "built" / "same", "abc")
    other = folder(tmp_path / "built" / "other", "def")
    config = {"models": {"same": SPEC, "other": SPEC, "hub": {"source": "hub"}, "unshipped": {**SPEC, "weights": None}}}
    dirs = {"same": str(same), "other": str(other), "hub": str(same), "unshipped": str(same)}
    monkeypatch.chdir(tmp_path)  # no models/tiny here: the workflow's folder holds it
    assert build_cost.shipped_copies(config, dirs, tmp_path / "repo") == {"same": float(size)}
    monkeypatch.chdir(tmp_path / "repo")  # the working directory's first
    assert build_cost.shipped_copies(config, dirs, tmp_path / "elsewhere") == {"same": float(size)}
    stale = folder(tmp_path / "stale" / "models" / "tiny", "zzz")
    monkeypatch.chdir(stale.parents[1])  # the first found is the build's, though the other is its recipe's
    assert build_cost.shipped_copies(config, dirs, tmp_path / "repo") == {}
    monkeypatch.chdir(tmp_path / "built")
    assert build_cost.shipped_copies(config, dirs, tmp_path / "nowhere") == {}  # nothing shipped: it trains


def test_a_copy_is_priced_as_a_copy_and_a_training_as_a_training():
    rate = timing.PathRate(2.0, 0.5, 600.0, work.pretrain_spec_work(SHAPE, SPEC, 25))
    zsl = timing.PathRate(0.5, 0.1, 400.0, work.Work(path="zsl"))
    calibration = timing.Calibration(paths={"m": {"zsl": zsl, "pretrain": rate}}, start_s=0.3)
    trained = build_cost.build_row("m", SPEC, SHAPE, calibration, None, 16, True, None)
    training = work.pretrain_spec_work(SHAPE, SPEC)
    assert trained["path"] == "pretrain" and trained["work"] == training
    assert trained["s"] == pytest.approx(0.3 + 2.0 + training.flops / 1e9 * 0.5)
    copied = build_cost.build_row("m", SPEC, SHAPE, calibration, None, 16, True, None, copy_bytes=2e6)
    assert copied["path"] == "copy" and copied["work"].flops == 0
    assert copied["s"] == pytest.approx(0.3 + 2e6 / (devices.LOAD_GBPS * 1e9)) and copied["mb"] == 400.0
    assert math.isnan(copied["gpu"])
    # on a named device: the job's start (none in a warm worker) and the bytes at its checkpoint rate
    device = devices.DEVICES["H100"]
    on_gpu = build_cost.build_row("m", SPEC, SHAPE, None, device, 128, False, None, copy_bytes=2e6)
    assert on_gpu["s"] == pytest.approx(device.cold_start_s + 2e6 / (device.load_gbps * 1e9))
    assert on_gpu["mb"] == device.host_base_mb and on_gpu["gpu"] == 0.0
    assert build_cost.build_row("m", SPEC, SHAPE, None, device, 128, False, None)["path"] == "pretrain"
    # a model without a pretraining has no build to price
    assert build_cost.build_row("m", {**SPEC, "pretrain_steps": 0}, SHAPE, calibration, None, 16, True, None) is None
