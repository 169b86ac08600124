"""Linearized finetuning (paper 002): GD on f(theta0) + J(theta0)(theta - theta0)."""

import numpy as np
import pytest
import torch

from icl_gd.activations import capture, extract, training


@pytest.mark.parametrize("arch", ["gpt2", "llama", "xglm"])
def test_first_step_equals_gd(arch, load_tiny, sentences):
    gd, lin = load_tiny(arch), load_tiny(arch)
    log_gd = training.finetune(gd, sentences[:1], lr=0.3, kind="gd")
    log_lin = training.finetune(lin, sentences[:1], lr=0.3, kind="linearized")
    assert log_lin["loss"][0] == pytest.approx(log_gd["loss"][0], rel=1e-5)
    np.testing.assert_allclose(log_lin["grad_norm"], log_gd["grad_norm"], rtol=1e-4)
    for (name, p), q in zip(gd.named_parameters(), lin.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6, msg=name)


def test_later_steps_differ_from_gd_and_only_kv_moves(load_tiny, sentences):
    gd, lin, start = load_tiny("gpt2"), load_tiny("gpt2"), load_tiny("gpt2")
    training.finetune(gd, sentences, lr=0.5, kind="gd")
    training.finetune(lin, sentences, lr=0.5, kind="linearized")
    d = gd.config.n_embd
    moved = False
    for (name, p), q, p0 in zip(lin.named_parameters(), gd.parameters(), start.parameters()):
        if name.endswith("c_attn.weight"):
            assert torch.equal(p[:, :d], p0[:, :d])  # the query part of the fused projection
            moved |= not torch.allclose(p, q, atol=1e-6)
        elif "c_attn" not in name:
            assert torch.equal(p, p0), name
    assert moved  # the linear model's gradients at theta != theta0 are not GD's


def test_linearized_model_is_the_first_order_expansion(load_tiny, sentences):
    """f_lin(theta0 + d) - f(theta0 + d) is second order in d: shrinking d tenfold shrinks the
    gap about a hundredfold, while the change itself shrinks only tenfold."""
    ids = torch.tensor([sentences[0]])
    model = load_tiny("gpt2")
    base = training.snapshot(model)
    generator = torch.Generator().manual_seed(0)
    direction = [torch.randn(b.shape, generator=generator) for b in base]
    gaps, changes = [], []
    with torch.no_grad():
        f0 = model(input_ids=ids).logits.double()
        for eps in (1e-2, 1e-3):
            for item, b, v in zip(training.kv_parameters(model), base, direction):
                item.param.copy_(b + eps * v)
            exact = model(input_ids=ids).logits.double()
            with training.linearized(model, base):
                linear = capture.realize(model(input_ids=ids).logits).double()
            gaps.append(float((linear - exact).abs().max()))
            changes.append(float((exact - f0).abs().max()))
    assert 7 < changes[0] / changes[1] < 14  # first order: about tenfold
    assert gaps[0] / gaps[1] > 30


def test_recording_a_linearized_model(load_tiny, tokenizer, sentences):
    model = load_tiny("llama")
    rec = capture.attach(model)
    base = training.snapshot(model)
    queries = [extract.Query(i, 0, seq[1:], len(seq) - 3, len(seq) - 2) for i, seq in enumerate(sentences)]
    label_ids = [tokenizer.convert_tokens_to_ids("ĠNegative"), tokenizer.convert_tokens_to_ids("ĠPositive")]
    context = [tokenizer.bos_token_id]
    plain = extract.evaluate(model, rec, context, queries, label_ids, batch_size=2)
    with training.linearized(model, base):  # theta == theta0: the linear model is the model
        same = extract.evaluate(model, rec, context, queries, label_ids, batch_size=2, reuse_prefix=False)
    for key in ("attn_out", "attn_scores", "label_logprobs"):
        np.testing.assert_allclose(same[key], plain[key], rtol=1e-4, atol=1e-5, err_msg=key)
    training.finetune(model, sentences, lr=0.5, kind="linearized", base=base)
    with training.linearized(model, base):
        trained = extract.evaluate(model, rec, context, queries, label_ids, batch_size=2, reuse_prefix=False)
    assert not np.allclose(trained["attn_out"], plain["attn_out"])
    assert np.isfinite(trained["label_logprobs"]).all() and (trained["label_logprobs"] < 0).all()


@pytest.mark.parametrize("arch", ["gpt2", "opt", "llama"])
def test_linear_layers_tangents_equal_torchs_own(arch, load_tiny, sentences):
    """Inside ``linearized`` every linear layer (GPT-2's Conv1D, OPT's biased nn.Linear) takes
    products only with the tangents there are: its primal and tangent equal those of torch's own
    forward-mode linear (run here by hand, without the substitution), and the layers' forward
    methods are restored on exit."""
    import torch.autograd.forward_ad as fwAD

    ids = torch.tensor([sentences[0]])
    model = load_tiny(arch, "eager")
    base = training.snapshot(model)
    generator = torch.Generator().manual_seed(0)
    current = [b + 1e-2 * torch.randn(b.shape, generator=generator) for b in base]
    with torch.no_grad(), training.linearized(model, base, current):
        primal, tangent = (t.clone() for t in fwAD.unpack_dual(model(input_ids=ids).logits))
    assert not any("forward" in vars(module) for module in model.modules())
    kv = training.kv_parameters(model)
    with torch.no_grad(), fwAD.dual_level():
        duals = [fwAD.make_dual(b, c - b) for b, c in zip(base, current)]
        with training.substituted(kv, duals):
            want_primal, want_tangent = fwAD.unpack_dual(model(input_ids=ids).logits)
    torch.testing.assert_close(primal, want_primal, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(tangent, want_tangent, rtol=1e-5, atol=1e-6)


def test_a_linearized_step_runs_the_model_once(load_tiny, sentences):
    """The dual pass's primal is the model at theta0: the backward pass uses its graph instead of
    running the model a second time."""
    model = load_tiny("llama")
    calls = []
    handle = model.model.register_forward_hook(lambda *args: calls.append(1))
    training.finetune(model, sentences[:2], lr=0.3, kind="linearized")
    handle.remove()
    assert len(calls) == 2


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_linearized_steps_follow_float32(dtype, load_tiny, sentences):
    """The one-pass linearized step in half precision (float32 masters and direction, float16's
    loss scale) moves the K/V weights as the float32 step does, to the dtype's precision (bfloat16
    keeps 8 bits: the two-pass step of before came to a norm ratio of 0.976 here, this one 0.970)."""
    import torch.nn.functional as F

    def kv_vector(model):
        return torch.cat([item.param.detach().float().flatten() for item in training.kv_parameters(model)])

    reference, half = load_tiny("llama"), load_tiny("llama").to(dtype)
    start32, start = kv_vector(reference), kv_vector(half)
    training.finetune(reference, sentences, lr=0.3, kind="linearized")
    log = training.finetune(half, sentences, lr=0.3, kind="linearized")
    assert not log["skipped"].any()
    change32, change = kv_vector(reference) - start32, kv_vector(half) - start
    slack = 0.05 if dtype == torch.bfloat16 else 0.01
    assert float(F.cosine_similarity(change, change32, dim=0)) > 0.99
    assert 1 - slack < float(change.norm() / change32.norm()) < 1 + slack


def _assert_same_derivatives(fn, reference, shape):
    """``fn``'s tangent (forward mode) and gradient (backward mode) at a random point in float64
    equal ``reference``'s."""
    import torch.autograd.forward_ad as fwAD

    generator = torch.Generator().manual_seed(0)
    x, x_t, grad = (torch.randn(shape, generator=generator, dtype=torch.float64) for _ in range(3))
    for f in (fn, reference):
        with fwAD.dual_level():
            tangent = fwAD.unpack_dual(f(fwAD.make_dual(x, x_t))).tangent
        leaf = x.clone().requires_grad_()
        (gradient,) = torch.autograd.grad(f(leaf), leaf, grad)
        if f is fn:
            got = tangent, gradient
    torch.testing.assert_close(got[0], tangent)
    torch.testing.assert_close(got[1], gradient)


@pytest.mark.parametrize(
    "module",
    [torch.nn.LayerNorm(8), torch.nn.LayerNorm(8, elementwise_affine=False), torch.nn.LayerNorm(8, bias=False)],
    ids=["affine", "plain", "no-bias"],
)
def test_layer_norm_closed_form_tangent_and_gradient_equal_torchs_own(module):
    """``_LayerNorm``: its tangent (the closed form) and its gradient (torch's kernel) equal those
    of torch's own layer norm, through forward mode and backward mode."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=generator))
    module.double()
    _assert_same_derivatives(lambda x: training._layer_norm_forward(module, x), module, (3, 5, 8))


@pytest.mark.parametrize("name", ["gelu_new", "gelu_fast", "quick_gelu", "silu", "mish", "relu2", "gelu_pytorch_tanh"])
def test_activations_slope_tangent_and_gradient_equal_torchs_own(name):
    """``_Elementwise`` on transformers' activations: the tangent and the gradient, each the
    activation's slope times the input's, equal torch's own chain rule through the activation."""
    from transformers.activations import ACT2FN

    act = ACT2FN[name]
    assert training._lean_forward(act) is training._activation_forward
    _assert_same_derivatives(lambda x: training._activation_forward(act, x), act, (4, 6))
