"""Tests of icl_gd.activations.training: which parameters are K/V, what GD and LCGD update, and by how much."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from transformers import AttentionInterface  # noqa: E402
from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface  # noqa: E402

from icl_gd.activations import training  # noqa: E402
from icl_gd.models.loading import UnsupportedModelError  # noqa: E402
from tests.conftest import ARCHS, TINY_HEADS, TINY_HIDDEN  # noqa: E402

D = TINY_HIDDEN
HEAD_DIM = TINY_HIDDEN // TINY_HEADS
LR = 0.05

# The K/V parameters of each architecture, spelled out by hand ({l} = layer).
KV_NAMES = {
    "gpt2": ["transformer.h.{l}.attn.c_attn.weight", "transformer.h.{l}.attn.c_attn.bias"],
    "opt": [f"model.decoder.layers.{{l}}.self_attn.{p}_proj.{w}" for p in "kv" for w in ("weight", "bias")],
    "xglm": [f"model.layers.{{l}}.self_attn.{p}_proj.{w}" for p in "kv" for w in ("weight", "bias")],
    "llama": ["model.layers.{l}.self_attn.k_proj.weight", "model.layers.{l}.self_attn.v_proj.weight"],
    "neox": [
        "gpt_neox.layers.{l}.attention.query_key_value.weight",
        "gpt_neox.layers.{l}.attention.query_key_value.bias",
    ],
}


def snapshot(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def ids_of(seq) -> torch.Tensor:
    return torch.tensor([seq])


def next_token_ce(logits, ids):
    return F.cross_entropy(logits[0, :-1], ids[0, 1:])


# --------------------------------------------------------------------------------------------
# kv_parameters


@pytest.mark.parametrize("arch", ARCHS)
def test_kv_parameters_are_exactly_the_key_value_projections(load_tiny, arch):
    model = load_tiny(arch, "eager")
    kv = training.kv_parameters(model)
    expected = [model.get_parameter(n.format(l=layer)) for layer in range(2) for n in KV_NAMES[arch]]
    assert sorted(id(item.param) for item in kv) == sorted(id(p) for p in expected)
    assert [item.layer for item in kv] == [0] * len(KV_NAMES[arch]) + [1] * len(KV_NAMES[arch])
    for item in kv:
        assert item.name.startswith(f"layer{item.layer}.")
        fused = arch in ("gpt2", "neox")
        assert (item.mask is not None) == fused
        if fused:
            assert item.mask.shape == item.param.shape and item.mask.dtype == torch.bool


def test_gpt2_c_attn_mask_covers_k_and_v_columns(load_tiny):
    kv = training.kv_parameters(load_tiny("gpt2"))
    weight, bias = kv[0], kv[1]
    assert weight.param.shape == (D, 3 * D)  # Conv1D: d_model -> [Q | K | V]
    assert not weight.mask[:, :D].any() and weight.mask[:, D:].all()
    assert not bias.mask[:D].any() and bias.mask[D:].all()


def test_neox_query_key_value_mask_is_per_head(load_tiny):
    kv = training.kv_parameters(load_tiny("neox"))
    weight, bias = kv[0], kv[1]
    rows = torch.arange(3 * D)
    part = (rows % (3 * HEAD_DIM)) // HEAD_DIM  # 0 = q, 1 = k, 2 = v within each head's block
    expected = part > 0
    assert torch.equal(bias.mask, expected)
    assert torch.equal(weight.mask, expected[:, None].expand(3 * D, D))
    assert int(expected.sum()) == 2 * D


_PROBED: list = []


def _probe_attention(module, query, key, value, attention_mask, **kwargs):
    _PROBED.append((query.detach().clone(), key.detach().clone(), value.detach().clone()))
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


AttentionInterface.register("icl_gd_test_probe", _probe_attention)
AttentionMaskInterface.register("icl_gd_test_probe", ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def _layer0_qkv(model, ids):
    _PROBED.clear()
    with torch.no_grad():
        model.base_model(ids)
    return _PROBED[0]


@pytest.mark.parametrize("arch", ["gpt2", "neox"])
def test_fused_mask_separates_queries_from_keys_and_values(load_tiny, sentences, arch):
    """Moving the masked entries changes only the keys and values the model computes; moving the
    others changes only the queries (read at the attention interface, i.e. after the split)."""
    model = load_tiny(arch)
    model.set_attn_implementation("icl_gd_test_probe")
    ids = ids_of(sentences[0])
    q0, k0, v0 = _layer0_qkv(model, ids)
    item_w, item_b = training.kv_parameters(model)[:2]
    for inside in (True, False):
        saved = [item_w.param.detach().clone(), item_b.param.detach().clone()]
        with torch.no_grad():
            for item in (item_w, item_b):
                where = item.mask if inside else ~item.mask
                item.param.add_(torch.randn_like(item.param) * where)
        q, k, v = _layer0_qkv(model, ids)
        if inside:
            assert torch.equal(q, q0) and not torch.allclose(k, k0) and not torch.allclose(v, v0)
        else:
            assert not torch.allclose(q, q0) and torch.equal(k, k0) and torch.equal(v, v0)
        with torch.no_grad():
            item_w.param.copy_(saved[0])
            item_b.param.copy_(saved[1])


def test_model_without_kv_projection_is_unsupported(load_tiny):
    model = load_tiny("gpt2")
    model.transformer.h[1].attn.c_attn = torch.nn.Identity()
    with pytest.raises(UnsupportedModelError, match="block 1"):
        training.kv_parameters(model)


# --------------------------------------------------------------------------------------------
# finetune with GD


@pytest.mark.parametrize("kind", ["gd", "lcgd"])
@pytest.mark.parametrize("arch", ARCHS)
def test_training_updates_only_keys_and_values(load_tiny, sentences, arch, kind):
    model = load_tiny(arch)
    before = snapshot(model)
    kv = training.kv_parameters(model)
    masks = {id(item.param): item.mask for item in kv}
    log = training.finetune(model, sentences, lr=LR, kind=kind)

    kv_names = {n.format(l=layer) for layer in range(2) for n in KV_NAMES[arch]}
    for name, param in model.named_parameters():
        new = param.detach()
        if name not in kv_names:
            assert torch.equal(new, before[name]), f"{name} must not change"
            continue
        mask = masks[id(param)]
        if mask is None:
            mask = torch.ones_like(param, dtype=torch.bool)
        else:
            assert torch.equal(new[~mask], before[name][~mask]), f"query part of {name} must not change"
        changed = (new[mask] != before[name][mask]).float().mean()
        if name.endswith("weight"):
            assert changed > 0.9, f"{name}: the key/value weights must change"
        elif "k_proj" not in name:
            # a key bias shifts every score of a query row alike, so softmax gives it no gradient;
            # value biases (and the fused K|V bias through its V part) do move
            assert changed > 0.4, f"{name}: the value bias must change"
        assert not param.requires_grad  # the model comes back frozen

    assert log["loss"].shape == (3,) and log["loss"].dtype == np.float64
    assert np.isfinite(log["loss"]).all() and (log["loss"] > 0).all()
    assert log["grad_norm"].shape == (3, 2) and (log["grad_norm"] > 0).all()
    assert log["skipped"].shape == (3,) and not log["skipped"].any()


def test_gpt2_gd_keeps_query_part_bit_identical(load_tiny, sentences):
    model = load_tiny("gpt2")
    before = snapshot(model)
    training.finetune(model, sentences, lr=LR, kind="gd")
    for layer in range(2):
        w = model.get_parameter(f"transformer.h.{layer}.attn.c_attn.weight").detach()
        b = model.get_parameter(f"transformer.h.{layer}.attn.c_attn.bias").detach()
        w0 = before[f"transformer.h.{layer}.attn.c_attn.weight"]
        b0 = before[f"transformer.h.{layer}.attn.c_attn.bias"]
        assert torch.equal(w[:, :D], w0[:, :D]) and torch.equal(b[:D], b0[:D])
        for part in (slice(D, 2 * D), slice(2 * D, 3 * D)):  # K, then V
            assert not torch.equal(w[:, part], w0[:, part])
        assert not torch.equal(b[2 * D :], b0[2 * D :])  # V bias (a K bias gets no gradient through softmax)


def test_opt_gd_leaves_q_proj_unchanged(load_tiny, sentences):
    model = load_tiny("opt")
    before = snapshot(model)
    training.finetune(model, sentences, lr=LR, kind="gd")
    for layer in range(2):
        prefix = f"model.decoder.layers.{layer}.self_attn"
        for w in ("weight", "bias"):
            assert torch.equal(model.get_parameter(f"{prefix}.q_proj.{w}"), before[f"{prefix}.q_proj.{w}"])
            assert not torch.equal(model.get_parameter(f"{prefix}.v_proj.{w}"), before[f"{prefix}.v_proj.{w}"])
        assert not torch.equal(model.get_parameter(f"{prefix}.k_proj.weight"), before[f"{prefix}.k_proj.weight"])


def test_gd_step_is_plain_sgd_on_the_mean_next_token_loss(load_tiny, sentences):
    """One step: loss = mean CE over the predicted tokens, update = -lr * gradient, norms per layer."""
    ref = load_tiny("gpt2")
    ids = ids_of(sentences[0])
    loss = next_token_ce(ref(ids).logits, ids)
    params = [ref.get_parameter(n.format(l=layer)) for layer in range(2) for n in KV_NAMES["gpt2"]]
    grads = torch.autograd.grad(loss, params)

    model = load_tiny("gpt2")
    log = training.finetune(model, [sentences[0]], lr=LR, kind="gd")
    assert log["loss"][0] == pytest.approx(loss.item(), rel=1e-6)
    for layer in range(2):
        gw, gb = grads[2 * layer], grads[2 * layer + 1]
        norm = torch.sqrt(gw[:, D:].double().pow(2).sum() + gb[D:].double().pow(2).sum())
        assert log["grad_norm"][0, layer] == pytest.approx(float(norm), rel=1e-5)
        for j, name in enumerate(KV_NAMES["gpt2"]):
            p0 = ref.get_parameter(name.format(l=layer)).detach()
            g = grads[2 * layer + j]
            expected = p0.clone()
            expected[..., D:] -= LR * g[..., D:]
            torch.testing.assert_close(model.get_parameter(name.format(l=layer)).detach(), expected, atol=1e-7, rtol=0)


def test_sequence_loss_gd_matches_transformers_loss(load_tiny, sentences):
    model = load_tiny("llama")
    ids = ids_of(sentences[1])
    with torch.no_grad():
        assert float(training.sequence_loss(model, ids, "gd")) == pytest.approx(
            float(model(ids, labels=ids).loss), rel=1e-6
        )
    with pytest.raises(ValueError, match="unknown training kind"):
        training.sequence_loss(model, ids, "adam")


def test_clip_grad_norm_bounds_the_global_update(load_tiny, sentences):
    model = load_tiny("gpt2")
    before = snapshot(model)
    raw = training.finetune(load_tiny("gpt2"), [sentences[0]], lr=LR, kind="gd")["grad_norm"][0]
    raw_total = float(np.sqrt((raw.astype(np.float64) ** 2).sum()))
    threshold = raw_total / 10
    log = training.finetune(model, [sentences[0]], lr=LR, kind="gd", clip_grad_norm=threshold)
    np.testing.assert_allclose(log["grad_norm"][0], raw, rtol=1e-6)  # logged before clipping
    update_sq = sum(float((p.detach() - before[n]).double().pow(2).sum()) for n, p in model.named_parameters())
    assert np.sqrt(update_sq) == pytest.approx(LR * threshold, rel=1e-4)

    unclipped = load_tiny("gpt2")
    training.finetune(unclipped, [sentences[0]], lr=LR, kind="gd", clip_grad_norm=raw_total * 10)
    update_sq = sum(float((p.detach() - before[n]).double().pow(2).sum()) for n, p in unclipped.named_parameters())
    assert np.sqrt(update_sq) == pytest.approx(LR * raw_total, rel=1e-4)  # below the threshold: untouched


def test_non_finite_gradient_skips_the_step(load_tiny, sentences):
    model = load_tiny("gpt2")
    with torch.no_grad():
        model.transformer.ln_f.weight[0] = float("nan")
    before = snapshot(model)
    log = training.finetune(model, sentences[:2], lr=LR, kind="gd")
    assert log["skipped"].tolist() == [True, True]
    for layer in range(2):
        name = f"transformer.h.{layer}.attn.c_attn.weight"
        assert torch.equal(model.get_parameter(name), before[name])


@pytest.mark.parametrize("kind", ["gd", "lcgd", "linearized"])
def test_attached_xglm_trains_as_its_own_eager_attention(load_tiny, sentences, kind):
    """The extraction attaches before it finetunes: XGLM's re-routed attention (SDPA, and plain
    operations for the linearized model's forward-mode duals) must take the eager class's steps."""
    from icl_gd.activations import capture

    eager, attached, start = load_tiny("xglm"), load_tiny("xglm"), load_tiny("xglm")
    capture.attach(attached)
    assert eager.config._attn_implementation == "eager"
    log_eager = training.finetune(eager, sentences, lr=0.3, kind=kind)
    log_attached = training.finetune(attached, sentences, lr=0.3, kind=kind)
    np.testing.assert_allclose(log_attached["loss"], log_eager["loss"], rtol=1e-5)
    np.testing.assert_allclose(log_attached["grad_norm"], log_eager["grad_norm"], rtol=1e-4)
    for (name, p), q, p0 in zip(attached.named_parameters(), eager.parameters(), start.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6, msg=name)
        if name.endswith("v_proj.weight"):
            assert not torch.allclose(p, p0, atol=1e-4), name  # training did move it


# --------------------------------------------------------------------------------------------
# layer-causal GD


def block_inputs(model, ids) -> list[torch.Tensor]:
    with torch.no_grad():
        hidden = model(ids, output_hidden_states=True).hidden_states
    return [h.detach() for h in hidden[:2]]  # inputs of block 0 and block 1


def run_block(model, arch, layer, x):
    if arch == "gpt2":
        out = model.transformer.h[layer](x)
    else:  # llama
        positions = torch.arange(x.shape[1])[None]
        out = model.model.layers[layer](x, position_embeddings=model.model.rotary_emb(x, positions))
    return out[0] if isinstance(out, tuple) else out


def final_norm_of(model, arch):
    return model.transformer.ln_f if arch == "gpt2" else model.model.norm


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_lcgd_gradient_of_each_block_comes_from_its_own_layer_loss(load_tiny, sentences, arch):
    model = load_tiny(arch)
    ids = ids_of(sentences[2])
    x = block_inputs(model, ids)
    kv = {layer: [model.get_parameter(n.format(l=layer)) for n in KV_NAMES[arch]] for layer in range(2)}

    expected, layer_losses = {}, []
    for layer in range(2):
        h = run_block(model, arch, layer, x[layer])
        if layer == 0:  # the hand-run block reproduces the model's own block 1 input
            torch.testing.assert_close(h.detach(), x[1], atol=1e-5, rtol=0)
        loss_l = next_token_ce(model.lm_head(final_norm_of(model, arch)(h)), ids)
        layer_losses.append(float(loss_l))
        expected[layer] = torch.autograd.grad(loss_l, kv[layer])

    loss = training.sequence_loss(model, ids, "lcgd")
    assert float(loss) == pytest.approx(sum(layer_losses), rel=1e-5)
    got = torch.autograd.grad(loss, kv[0] + kv[1])
    for layer in range(2):
        for g, e in zip(got[2 * layer : 2 * layer + 2], expected[layer]):
            torch.testing.assert_close(g, e, atol=1e-6, rtol=1e-5)

    # vanilla GD: the last block gets the same gradient (its loss term is the model's loss), the
    # first block a different one (GD's gradient also flows through block 1)
    gd = torch.autograd.grad(training.sequence_loss(model, ids, "gd"), kv[0] + kv[1])
    for g, e in zip(gd[2:], expected[1]):
        torch.testing.assert_close(g, e, atol=1e-6, rtol=1e-5)
    assert not torch.allclose(gd[0], expected[0][0], atol=1e-4)


def test_lcgd_finetune_logs_the_sum_of_layer_losses_and_differs_from_gd(load_tiny, sentences):
    ids = ids_of(sentences[0])
    ref = load_tiny("gpt2")
    x = block_inputs(ref, ids)
    with torch.no_grad():
        hand = sum(
            float(next_token_ce(ref.lm_head(ref.transformer.ln_f(run_block(ref, "gpt2", l, x[l]))), ids))
            for l in range(2)
        )

    gd_model, lcgd_model = load_tiny("gpt2"), load_tiny("gpt2")
    gd_log = training.finetune(gd_model, [sentences[0]], lr=LR, kind="gd")
    lcgd_log = training.finetune(lcgd_model, [sentences[0]], lr=LR, kind="lcgd")
    assert lcgd_log["loss"][0] == pytest.approx(hand, rel=1e-5)
    assert lcgd_log["loss"][0] > gd_log["loss"][0]  # two loss terms, the last of which is GD's loss
    name0 = "transformer.h.0.attn.c_attn.weight"
    assert not torch.allclose(gd_model.get_parameter(name0), lcgd_model.get_parameter(name0), atol=1e-6)
    assert gd_log["grad_norm"][0, 1] == pytest.approx(lcgd_log["grad_norm"][0, 1], rel=1e-5)
    assert gd_log["grad_norm"][0, 0] != pytest.approx(lcgd_log["grad_norm"][0, 0], rel=1e-3)


def test_layer_causal_hooks_are_removed(load_tiny, sentences):
    model = load_tiny("gpt2")
    with training.layer_causal(model) as outputs:
        model.base_model(ids_of(sentences[0]))
    assert len(outputs) == 2 and outputs[0].shape == (1, len(sentences[0]), D)
    assert all(not block._forward_pre_hooks and not block._forward_hooks for block in model.transformer.h)


# --------------------------------------------------------------------------------------------
# half precision: float32 master weights


def _kv_vector(model) -> torch.Tensor:
    return torch.cat([item.param.detach().float().flatten() for item in training.kv_parameters(model)])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_half_precision_training_changes_the_model_as_float32_does(load_tiny, tokenizer, arch, dtype):
    """32 SGD steps, each below a tenth of the half-precision rounding step of a typical weight
    (the regime of the protocol's learning rates on a real model): with float32 master weights the
    half-precision model ends where the float32 run ends, rounded once. Updating the half-precision
    weights in place instead loses most steps to rounding (here cosine ~0.87, norm ~0.88)."""
    from tests.conftest import corpus

    sequences = [[tokenizer.bos_token_id] + tokenizer.encode(t, add_special_tokens=False) for t in corpus(32, seed=3)]
    before = _kv_vector(load_tiny(arch))
    probe = load_tiny(arch)
    training.finetune(probe, sequences[:1], lr=1.0, kind="gd")
    step = (_kv_vector(probe) - before).abs()
    resolution = torch.finfo(dtype).eps * before.abs().to(dtype).float()
    lr = 0.1 / float((step / resolution)[step > 0].median())  # a typical step is 1/10 of a rounding step

    reference = load_tiny(arch)
    training.finetune(reference, sequences, lr=lr, kind="gd")
    change32 = _kv_vector(reference) - before

    half = load_tiny(arch).to(dtype)
    start = _kv_vector(half)
    master = training.master_weights(half)
    assert all(m.dtype == torch.float32 for m in master)
    log = training.finetune(half, sequences, lr=lr, kind="gd", master=master)
    assert not log["skipped"].any()
    for item, m in zip(training.kv_parameters(half), master):  # the model holds its masters, rounded
        assert item.param.dtype == dtype and torch.equal(item.param.detach(), m.to(dtype))
    change = _kv_vector(half) - start
    cosine = float(F.cosine_similarity(change, change32, dim=0))
    assert cosine > 0.99 and 0.97 < float(change.norm() / change32.norm()) < 1.03, (
        cosine,
        change.norm() / change32.norm(),
    )
    master_change = torch.cat([m.flatten() for m in master]) - start
    assert float(F.cosine_similarity(master_change, change32, dim=0)) > 0.995


def test_float16_steps_that_overflow_are_redone_at_a_lower_loss_scale(load_tiny, sentences, monkeypatch, caplog):
    """A loss scale so large that the float16 gradients overflow is halved until they do not: the
    step is taken (not skipped), and equals the float32 step to float16 precision."""
    monkeypatch.setattr(training, "FLOAT16_LOSS_SCALE", 2.0**40)
    reference, half = load_tiny("llama"), load_tiny("llama").to(torch.float16)
    start = _kv_vector(half)
    training.finetune(reference, sentences[:1], lr=LR, kind="gd")
    with caplog.at_level("INFO", logger="icl_gd.activations.training"):
        log = training.finetune(half, sentences[:1], lr=LR, kind="gd")
    assert not log["skipped"].any() and "loss scale now" in caplog.text
    change32 = _kv_vector(reference) - _kv_vector(load_tiny("llama"))
    assert float(F.cosine_similarity(_kv_vector(half) - start, change32, dim=0)) > 0.99


# --------------------------------------------------------------------------------------------
# layer-causal GD's chunked head


def _frozen_but_kv(model) -> list[torch.Tensor]:
    """Freeze the model as ``finetune`` does: only the K/V parameters require grad."""
    for param in model.parameters():
        param.requires_grad_(False)
    kv = [item.param for item in training.kv_parameters(model)]
    for param in kv:
        param.requires_grad_(True)
    return kv


def unchunked_lcgd_loss(model, ids):
    """Layer-causal GD's loss as it was computed before the chunked head: every block's output at
    every position through ``output_logits`` at once, the mean cross-entropy over layers x tokens
    times the layers."""
    from icl_gd.models.loading import final_norm, output_logits

    with training.layer_causal(model) as outputs:
        model.base_model(input_ids=ids)
    logits = output_logits(model, final_norm(model)(torch.cat(outputs)))
    targets = ids.expand(len(outputs), -1)
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets[:, 1:].flatten()) * len(outputs)


def _relative(got, want) -> float:
    return float((got.double() - want.double()).norm() / want.double().norm())


@pytest.mark.parametrize("arch", ARCHS)
def test_lcgd_loss_and_gradients_equal_the_unchunked_formula(load_tiny, sentences, arch):
    model = load_tiny(arch)
    kv = _frozen_but_kv(model)
    ids = ids_of(sentences[1])
    want = unchunked_lcgd_loss(model, ids)
    want_grads = torch.autograd.grad(want, kv)
    got = training.sequence_loss(model, ids, "lcgd")
    got_grads = torch.autograd.grad(got, kv)
    assert float(got) == pytest.approx(float(want), rel=1e-6)
    assert_same_gradients(got_grads, want_grads, 1e-5)


def assert_same_gradients(got, want, tol):
    """Equal to ``tol`` relative, as one vector and each tensor; a tensor whose exact gradient is
    zero (a key bias: softmax ignores a shift of every score) to ``tol`` of the largest entry."""
    assert _relative(torch.cat([g.flatten() for g in got]), torch.cat([w.flatten() for w in want])) < tol
    top = max(float(w.abs().max()) for w in want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.double(), w.double(), rtol=tol, atol=tol * top)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lcgd_in_half_precision_equals_the_unchunked_formula_to_its_precision(load_tiny, sentences, dtype):
    """The chunked head in half precision: the float32 softmax of the half-precision logits, the
    gradient rounded to the weight's dtype for the product, as the unchunked formula's autograd
    does (float16: its small probabilities kept by a power-of-two scale). Scaled as finetune scales
    a float16 loss."""
    model = load_tiny("llama").to(dtype)
    kv = _frozen_but_kv(model)
    ids = ids_of(sentences[0])
    scale = training.FLOAT16_LOSS_SCALE if dtype == torch.float16 else 1.0
    want = unchunked_lcgd_loss(model, ids)
    want_grads = torch.autograd.grad(want * scale, kv)
    got = training.sequence_loss(model, ids, "lcgd")
    got_grads = torch.autograd.grad(got * scale, kv)
    assert float(got) == pytest.approx(float(want), rel=1e-3)
    eps = torch.finfo(dtype).eps
    for g, w in zip(got_grads, want_grads):
        assert g.dtype == dtype and torch.isfinite(g).all()
        assert _relative(g, w) < 4 * eps, _relative(g, w)


def test_lcgd_chunks_give_the_same_result_and_bound_the_logits(load_tiny, sentences):
    """Any chunk size, one row, fewer rows than one layer's tokens, one layer's, more, all rows:
    the same loss and gradients; and no tensor bigger than a chunk of logits is ever made."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Largest(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.vocab_rows = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.is_view:  # a view allocates nothing (the head's weight, transposed, has vocab columns)
                return out
            for tensor in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(tensor, torch.Tensor) and vocab in tensor.shape:
                    self.vocab_rows = max(self.vocab_rows, tensor.numel() // vocab)
            return out

    model = load_tiny("gpt2")
    vocab = model.config.vocab_size
    kv = _frozen_but_kv(model)
    ids = ids_of(sentences[2])
    predicted = ids.shape[1] - 1
    rows = 2 * predicted
    want = training.sequence_loss(model, ids, "lcgd", chunk_rows=rows)
    want_grads = torch.autograd.grad(want, kv)
    for chunk in (1, 3, predicted - 1, predicted, predicted + 2, rows, 10 * rows, None):
        with Largest() as largest:
            got = training.sequence_loss(model, ids, "lcgd", chunk_rows=chunk)
            got_grads = torch.autograd.grad(got, kv)
        assert largest.vocab_rows == min(chunk or rows, rows), chunk
        assert float(got) == pytest.approx(float(want), rel=1e-6), chunk
        assert_same_gradients(got_grads, want_grads, 1e-6)
    with Largest() as largest:  # the unchunked formula holds every row's logits at once
        unchunked_lcgd_loss(model, ids)
    assert largest.vocab_rows >= 2 * ids.shape[1]


@pytest.mark.parametrize("family", ["gemma2", "cohere", "granite", "phi"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_chunked_head_differentiates_the_logit_postprocessing(family, dtype):
    """Soft-capping (Gemma 2), logit scale (Cohere), logit scaling (Granite) and a head bias (Phi):
    the chunked head's loss and input gradient equal those of models.output_logits + autograd,
    in float32 to 1e-5, in half precision as close to float64 as the unchunked formula is."""
    import transformers as T

    from icl_gd.models.loading import logit_postprocessing, output_logits
    from tests.unit.models.test_families import FAMILIES, IDS

    configs = {
        **FAMILIES,
        "phi": lambda: T.PhiConfig(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=4,
            intermediate_size=96,
            max_position_embeddings=64,
            **IDS,
        ),
    }
    torch.manual_seed(0)
    model = T.AutoModelForCausalLM.from_config(configs[family]()).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.3)
    assert bool(logit_postprocessing(model.config)) == (family != "phi")
    assert (training.linear_head(model)[1] is not None) == (family == "phi")
    hidden = torch.randn(50, 64, generator=torch.Generator().manual_seed(1)) * 2
    targets = torch.randint(0, IDS["vocab_size"], (50,), generator=torch.Generator().manual_seed(2))

    def unchunked(m, h):
        h = h.detach().requires_grad_()
        loss = F.cross_entropy(output_logits(m, h).double(), targets, reduction="sum")
        return loss, torch.autograd.grad(loss * 1e3, h)[0].double() / 1e3

    exact, exact_grad = unchunked(model.double(), hidden.double())
    model.to(dtype)
    h = hidden.to(dtype).requires_grad_()
    got = training.head_cross_entropy(model, h, targets, chunk_rows=7)
    got_grad = torch.autograd.grad(got * 1e3, h)[0].double() / 1e3  # as a float16 loss is scaled
    if dtype == torch.float32:
        assert float(got) == pytest.approx(float(exact), rel=1e-6)
        assert _relative(got_grad, exact_grad) < 1e-5
    else:
        old, old_grad = unchunked(model, h.float().to(dtype))
        assert abs(float(got) - float(exact)) <= 1.5 * abs(float(old) - float(exact)) + 1e-6 * float(exact)
        assert _relative(got_grad, exact_grad) <= 2 * _relative(old_grad, exact_grad) + 1e-6


def test_a_head_that_is_not_a_plain_linear_layer_takes_the_generic_path(load_tiny, sentences):
    model = load_tiny("llama")
    kv = _frozen_but_kv(model)
    ids = ids_of(sentences[0])
    handle = model.lm_head.register_forward_hook(lambda module, args, output: output * 2)
    try:
        assert training.linear_head(model) is None
        got = training.sequence_loss(model, ids, "lcgd", chunk_rows=3)
        want = unchunked_lcgd_loss(model, ids)  # through the hooked module
        assert float(got) == pytest.approx(float(want), rel=1e-6)
        assert_same_gradients(torch.autograd.grad(got, kv), torch.autograd.grad(want, kv), 1e-5)
    finally:
        handle.remove()
    assert float(training.sequence_loss(model, ids, "lcgd")) != pytest.approx(float(want), rel=1e-3)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_lcgd_graph_reaches_only_the_key_value_weights(load_tiny, sentences, arch):
    """The head (GPT-2's tied to the input embedding) and the final norm are frozen: the loss's
    graph accumulates into no weight but the K/V ones, and finetune leaves no .grad behind."""
    model = load_tiny(arch)
    kv = _frozen_but_kv(model)
    loss = training.sequence_loss(model, ids_of(sentences[0]), "lcgd")
    reached, seen, stack = set(), set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            reached.add(id(node.variable))
        stack.extend(next_fn for next_fn, _ in node.next_functions)
    assert reached == {id(p) for p in kv}
    if arch == "gpt2":
        assert model.lm_head.weight is model.transformer.wte.weight
    training.finetune(model, sentences, lr=LR, kind="lcgd")
    assert all(param.grad is None for param in model.parameters())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_lcgd_steps_follow_float32(load_tiny, sentences, dtype):
    """finetune's half-precision path (float32 masters, float16's loss scale) with the chunked head."""
    reference, half = load_tiny("llama"), load_tiny("llama").to(dtype)
    start32, start = _kv_vector(reference), _kv_vector(half)
    training.finetune(reference, sentences, lr=LR, kind="lcgd")
    log = training.finetune(half, sentences, lr=LR, kind="lcgd")
    assert not log["skipped"].any()
    change32, change = _kv_vector(reference) - start32, _kv_vector(half) - start
    assert float(F.cosine_similarity(change, change32, dim=0)) > 0.99
