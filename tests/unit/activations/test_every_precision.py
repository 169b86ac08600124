"""Every finetuning method in every precision (issue 60): each method kind runs end to end on a tiny
model in float32, bfloat16 and float16 on the CPU, and the linearized path takes tangents in
another dtype than their weights, as CUDA's layer norm hands them on (a GPU-only crash before)."""

import numpy as np
import pandas as pd
import pytest
import torch
import torch.autograd.forward_ad as fwAD

from icl_gd.activations import cache, training
from tests.conftest import run_extraction
from tests.unit.activations.test_extract import _config, rows, tiny_job

METHODS = {
    "gd": {"kind": "gd", "lr": 0.5},
    "lcgd": {"kind": "lcgd", "lr": 0.5},
    "lcgd_clip": {"kind": "lcgd", "lr": 0.5, "clip_grad_norm": 0.5},
    "gd_switched": {"kind": "gd", "lr": 0.5, "demo_labels": "switched"},
    "gd_linearized": {"kind": "linearized", "lr": 0.5},
}


class _Float32Tangent(torch.autograd.Function):
    """The identity, whose forward derivative leaves the tangent in float32: what CUDA's layer norm
    (``native_layer_norm``) gives a half-precision input, and the CPU's does not."""

    @staticmethod
    def forward(x):
        return x.clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def jvp(ctx, x_t):
        return x_t.float()

    @staticmethod
    def backward(ctx, grad):
        return grad


@pytest.fixture
def cuda_layer_norm(monkeypatch):
    """Every ``nn.LayerNorm`` hands on float32 tangents, as on CUDA: torch's own, and the closed
    form that a linearized model runs."""
    forward, lean = torch.nn.LayerNorm.forward, training._layer_norm_forward
    monkeypatch.setattr(torch.nn.LayerNorm, "forward", lambda self, x: _Float32Tangent.apply(forward(self, x)))
    monkeypatch.setattr(training, "_layer_norm_forward", lambda self, x: _Float32Tangent.apply(lean(self, x)))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_linear_layer_takes_a_float32_tangent_with_half_precision_weights(dtype):
    weight, bias = torch.randn(3, 4, dtype=dtype), torch.randn(3, dtype=dtype)
    x, x_t, w_t = torch.randn(2, 4, dtype=dtype), torch.randn(2, 4, dtype=dtype), torch.randn(3, 4, dtype=dtype)
    with torch.no_grad(), fwAD.dual_level():
        x_in = _Float32Tangent.apply(fwAD.make_dual(x, x_t))
        assert fwAD.unpack_dual(x_in).tangent.dtype == torch.float32
        out = training._Linear.apply(x_in, fwAD.make_dual(weight, w_t), bias)
        primal, tangent = fwAD.unpack_dual(out)
    assert primal.dtype == tangent.dtype == dtype
    want = (x_t.float() @ weight.float().T + x.float() @ w_t.float().T).to(dtype)
    torch.testing.assert_close(tangent, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_runs_end_to_end_in_every_precision(method, dtype, tmp_path, model_dirs, cuda_layer_norm):
    """An extraction job of each method kind (GD, layer-causal GD, clipped, label-switched,
    linearized) on a tiny GPT-2 in the given dtype, with CUDA's float32 layer-norm tangents:
    finite attention outputs of ZSL's examples that the finetuning moved from ZSL's, every step
    taken (in float32, the linearized method's extraction job as the workflow runs it)."""
    rows(12, 3).to_parquet(tmp_path / "train.parquet")
    rows(6, 4).to_parquet(tmp_path / "eval.parquet")
    config = _config(methods={method: METHODS[method]}, dtype=dtype)
    common = tiny_job(model_dirs["gpt2"], tmp_path / "train.parquet", tmp_path / "eval.parquet")
    run_extraction(config, setting="zsl", out_path=str(tmp_path / "zsl.arrow"), **common)
    log_path = tmp_path / "log.parquet"
    run_extraction(config, setting=method, out_path=str(tmp_path / "ft.arrow"), train_log_path=str(log_path), **common)
    zsl, ft = cache.read_cache(tmp_path / "zsl.arrow"), cache.read_cache(tmp_path / "ft.arrow")
    assert ft.meta["kind"] == METHODS[method]["kind"] and ft.meta["n_train_steps"] == 3
    assert np.isfinite(ft.attn_out).all() and np.isfinite(ft.label_logprobs).all()
    assert not np.allclose(zsl.attn_out, ft.attn_out)
    assert np.array_equal(zsl.example_id, ft.example_id) and np.array_equal(zsl.query_len, ft.query_len)
    log = pd.read_parquet(log_path)
    assert not log["skipped"].any() and np.isfinite(log["loss"]).all()
