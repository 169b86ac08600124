"""Float16 finetuning on a real pretrained model (issue 27). At the protocol's rates for sst2, sst5,
MR and Subj the float16 path (the model in half precision, float32 master copies of the K/V weights,
a loss scale whose overflowing steps are redone) changes the attention outputs as float32 does; at
AGNews' and CB's it does not, on this model, which is why the README recommends float32."""

from __future__ import annotations

import logging
import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402
from conftest import run_extraction  # noqa: E402

from icl_gd import cache, data, metrics, twins, validation  # noqa: E402
from icl_gd import config as cfg  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_change_agreement_is_one_for_the_same_change_and_sees_direction_and_size():
    rng = np.random.default_rng(0)
    zsl = rng.standard_normal((5, 3, 8))
    change = rng.standard_normal((5, 3, 8))
    cos, ratio = metrics.change_agreement(zsl + 0.01, zsl + 0.01 + 2 * change, zsl, zsl + change)
    assert np.allclose(cos, 1.0) and cos.shape == (3,) and ratio == pytest.approx(2.0)
    cos, ratio = metrics.change_agreement(zsl, zsl - change, zsl, zsl + change)
    assert np.allclose(cos, -1.0) and ratio == pytest.approx(1.0)
    with pytest.raises(ValueError, match="h_ft_ref"):
        metrics.change_agreement(zsl, zsl, zsl, zsl[:, :2])


@pytest.fixture(scope="module")
def twin_splits(tmp_path_factory) -> dict[str, dict[str, str]]:
    out = tmp_path_factory.mktemp("twins")
    files = {}
    for task in cfg.TASK_PRESETS:
        spec = cfg.task_spec({"tasks": {task: {"source": "synthetic"}}}, task)
        splits = twins.make_synthetic_task(task, n_train=40, n_eval=8, seed=0)
        files[task] = {}
        for split, frame in splits.items():
            path = out / f"{task}-{split}.parquet"
            data.normalise_split(frame, spec, split).to_parquet(path)
            files[task][f"{split}_path"] = str(path)
    return files


# AGNews' rate (0.2) and CB's (0.08), tuned for the 1.3B model, wreck this 135M one: one step takes
# AGNews' loss from 4.5 to 13. Its residual stream carries activations of ~2e4 (float16's spacing
# there is 16); from the wrecked weights on, float16 gradients depart from float32's (AGNews, step 2:
# cosine 0.93, norm 1.44x; at the pretrained weights 1.00) and the trajectories part. float32 and
# float64 agree to 4 digits there, so the departure is float16's, not chaos.
WRECKED = pytest.mark.xfail(strict=True, reason="float16 cannot follow float32 once the rate wrecks the model")


@pytest.mark.parametrize("task", [pytest.param(t, marks=WRECKED) if t in ("agnews", "cb") else t for t in cfg.TASK_PRESETS])
def test_float16_finetuning_on_a_real_model_changes_attention_outputs_as_float32_does(
        smollm2_dir, twin_splits, task, tmp_path, caplog):
    """SmolLM2-135M (real weights: its activations overflow float16 gradients at a loss scale of
    2^16), eight demonstrations of the task's twin at the task's protocol rate: dh = h_GD - h_ZSL in
    float16 against float32, cosine >= 0.95 and norm ratio 0.9-1.1 (means over layers).

    What this does not show: a change within a few times float16's noise floor on |h| (~0.4% on
    this model) is not resolved at all; benchmarks/precision.py prints both for a user's model and
    data, and the README recommends float32 for that reason."""
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    seed = cfg.task_seeds({"tasks": {task: {}}}, task)[0]
    h = {}
    for dtype in ("float32", "float16"):
        config = validation.validate({
            "models": {"smollm2": {"source": "local", "path": str(smollm2_dir)}}, "tasks": {task: {}},
            "methods": {"gd": {"kind": "gd"}}, "variants": {"trained": ["gd"]}, "k": 8, "max_eval": 8,
            "dtype": dtype, "device": "cpu"}, schema)
        for setting in ("zsl", "gd"):
            path = tmp_path / f"{dtype}-{setting}.parquet"
            with caplog.at_level(logging.INFO, logger="icl_gd.training"):
                run_extraction(config, task=task, seed=seed, setting=setting, model_name="smollm2",
                               variant="trained", model_dir=str(smollm2_dir), out_path=str(path),
                               **twin_splits[task])
            h[dtype, setting] = cache.read_cache(path).attn_out
    per_layer, ratio = metrics.change_agreement(h["float16", "zsl"], h["float16", "gd"],
                                                h["float32", "zsl"], h["float32", "gd"])
    size = np.linalg.norm(h["float32", "gd"] - h["float32", "zsl"]) / np.linalg.norm(h["float32", "zsl"])
    report = f"{task} lr {cfg.learning_rate(config, task, 'gd'):g}: cos {per_layer.mean():.4f}, ratio {ratio:.3f}, |dh|/|h| {size:.3g}"
    assert per_layer.mean() >= 0.95 and 0.9 <= ratio <= 1.1, report
    assert "loss scale now" in caplog.text, "the float16 path's redone steps were not exercised: " + report
