"""Tests of icl_gd.activations.capture: recorded scores and attention outputs against the models' own numbers.

For each architecture, a capture copy (sdpa routed through the recorder; XGLM, whose class has
eager attention only, through the recorder's re-routed forward) is compared with a separately
loaded eager copy of the same weights run with output_attentions=True, and with a plain copy.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from icl_gd.activations import capture  # noqa: E402
from icl_gd.models.loading import UnsupportedModelError  # noqa: E402
from tests.conftest import ARCHS, TINY_HEADS, TINY_HIDDEN  # noqa: E402

HEAD_DIM = TINY_HIDDEN // TINY_HEADS
LENGTHS = (9, 6)  # two right-padded sequences
POSITIONS = (8, 3)  # recorded position of each: the last token of the first, a middle one of the second


def attention_modules(model, arch: str) -> list[nn.Module]:
    """Each layer's self-attention module, by its architecture's own name (not the code's search)."""
    if arch == "gpt2":
        return [block.attn for block in model.transformer.h]
    if arch == "opt":
        return [layer.self_attn for layer in model.model.decoder.layers]
    if arch in ("xglm", "llama"):
        return [layer.self_attn for layer in model.model.layers]
    if arch == "neox":
        return [layer.attention for layer in model.gpt_neox.layers]
    raise ValueError(arch)


def padded_batch(tokenizer) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    ids = torch.full((2, max(LENGTHS)), tokenizer.pad_token_id, dtype=torch.long)
    for row, length in enumerate(LENGTHS):
        ids[row, 0] = tokenizer.bos_token_id
        ids[row, 1:length] = torch.randint(4, len(tokenizer), (length - 1,), generator=gen)
    return ids


def hook_modules(modules, store: dict, *, inputs: bool = False):
    """Keep each module's output (or, with ``inputs``, its hidden-state input) under its index."""
    handles = []
    for i, module in enumerate(modules):
        if inputs:

            def pre(mod, args, kwargs, i=i):
                store[i] = (args[0] if args else kwargs["hidden_states"]).detach().clone()

            handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        else:

            def post(mod, args, output, i=i):
                store[i] = (output[0] if isinstance(output, tuple) else output).detach().clone()

            handles.append(module.register_forward_hook(post))
    return handles


class Runs(dict):
    """arch -> everything the per-architecture tests compare, computed once per architecture
    (lazily, so that one broken architecture fails only its own tests)."""

    def __init__(self, compute):
        super().__init__()
        self.compute = compute

    def __missing__(self, arch):
        self[arch] = self.compute(arch)
        return self[arch]


@pytest.fixture(scope="module")
def runs(load_tiny, tokenizer):
    ids = padded_batch(tokenizer)
    positions = torch.tensor(POSITIONS)

    def compute(arch):
        model = load_tiny(arch)
        rec = capture.attach(model)
        own_out, own_in = {}, {}
        handles = hook_modules(attention_modules(model, arch), own_out)
        handles += hook_modules(attention_modules(model, arch), own_in, inputs=True)
        with torch.no_grad(), rec.record(positions):
            hidden = model.base_model(ids).last_hidden_state
            attn_out, scores = rec.stacked()
        for h in handles:
            h.remove()
        with torch.no_grad():
            logits_outside = model(ids).logits  # after recording: plain forward again

        eager = load_tiny(arch, "eager")
        eager_out = {}
        handles = hook_modules(attention_modules(eager, arch), eager_out)
        with torch.no_grad():
            eager_res = eager.base_model(ids, output_attentions=True)
        for h in handles:
            h.remove()

        plain = load_tiny(arch)
        with torch.no_grad():
            plain_hidden = plain.base_model(ids).last_hidden_state
            plain_logits = plain(ids).logits
        return dict(
            model=model,
            rec=rec,
            hidden=hidden,
            attn_out=attn_out,
            scores=scores,
            own_out=own_out,
            own_in=own_in,
            logits_outside=logits_outside,
            eager_attn=eager_res.attentions,
            eager_out=eager_out,
            plain_hidden=plain_hidden,
            plain_logits=plain_logits,
            plain_impl=plain.config._attn_implementation,
        )

    return Runs(compute)


@pytest.mark.parametrize("arch", ARCHS)
def test_recorded_shapes(runs, arch):
    r = runs[arch]
    assert r["attn_out"].shape == (2, 2, TINY_HIDDEN)
    assert r["scores"].shape == (2, 2, TINY_HEADS, max(LENGTHS))  # (batch, layers, heads, keys)
    assert r["attn_out"].dtype == torch.float32 and r["scores"].dtype == torch.float32
    assert sorted(r["rec"].layer_of.values()) == [0, 1]


@pytest.mark.parametrize("arch", ARCHS)
def test_softmax_of_scores_is_the_models_attention(runs, arch):
    r = runs[arch]
    assert len(r["eager_attn"]) == 2
    for layer in range(2):
        probs = r["eager_attn"][layer]  # (batch, heads, query, key)
        for b, p in enumerate(POSITIONS):
            mine = torch.softmax(r["scores"][b, layer, :, : p + 1], dim=-1)
            torch.testing.assert_close(mine, probs[b, :, p, : p + 1], atol=1e-5, rtol=0)
            # the causal prefix is all the model attends to: its row sums to one there
            torch.testing.assert_close(probs[b, :, p, : p + 1].sum(-1), torch.ones(TINY_HEADS), atol=1e-5, rtol=0)
    # the attention is far from uniform, so the comparison is not vacuous
    assert r["eager_attn"][0][0, :, 8, :9].max() > 0.3


@pytest.mark.parametrize("arch", ["gpt2", "opt", "xglm"])
def test_scores_are_scaled_q_dot_k_over_all_keys(runs, arch):
    """Unmasked pre-softmax scores q.k/sqrt(d_head), recomputed by hand from the projections."""
    r = runs[arch]
    for layer, attn in enumerate(attention_modules(r["model"], arch)):
        x = r["own_in"][layer]  # the attention module's input (after the block's first norm)
        with torch.no_grad():
            if arch == "gpt2":
                q, k, _ = attn.c_attn(x).split(TINY_HIDDEN, dim=-1)
            else:
                q, k = attn.q_proj(x), attn.k_proj(x)
        q = q.view(2, -1, TINY_HEADS, HEAD_DIM)
        k = k.view(2, -1, TINY_HEADS, HEAD_DIM)
        for b, p in enumerate(POSITIONS):
            expected = torch.einsum("hd,khd->hk", q[b, p], k[b]) / HEAD_DIM**0.5
            torch.testing.assert_close(r["scores"][b, layer], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_attn_out_is_the_attention_modules_output(runs, arch):
    r = runs[arch]
    for layer in range(2):
        for b, p in enumerate(POSITIONS):
            # the very tensor the module returned in this forward pass
            assert torch.equal(r["attn_out"][b, layer], r["own_out"][layer][b, p])
            # and the eager model's attention output, computed independently
            torch.testing.assert_close(r["attn_out"][b, layer], r["eager_out"][layer][b, p], atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_capture_does_not_change_the_model(runs, arch):
    r = runs[arch]
    if arch == "xglm":  # the plain model runs eager attention, the attached one SDPA: rounding apart
        assert r["plain_impl"] == "eager"
        torch.testing.assert_close(r["hidden"], r["plain_hidden"], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(r["logits_outside"], r["plain_logits"], atol=1e-5, rtol=1e-5)
        return
    assert r["plain_impl"] == "sdpa"
    # the capture implementation hands the very same tensors to the same kernel: bit-identical
    assert torch.equal(r["hidden"], r["plain_hidden"])
    assert torch.equal(r["logits_outside"], r["plain_logits"])


def test_xglm_attention_runs_through_the_recorder_and_sdpa(load_tiny, tokenizer, monkeypatch):
    """XGLM's class computes eager attention inline; attached, every layer calls SDPA instead."""
    model = load_tiny("xglm")
    rec = capture.attach(model)
    assert model.config._attn_implementation == capture.CAPTURE_IMPLEMENTATION
    calls = []

    def counting_sdpa(module, *args, **kwargs):
        calls.append(module)
        return sdpa(module, *args, **kwargs)

    sdpa = capture.sdpa_attention_forward
    monkeypatch.setattr(capture, "sdpa_attention_forward", counting_sdpa)
    with torch.no_grad(), rec.record(torch.tensor(POSITIONS)):
        model.base_model(padded_batch(tokenizer))
    assert calls == attention_modules(model, "xglm")
    # another XGLM model in the process keeps the class's own forward
    other = load_tiny("xglm")
    assert "forward" not in vars(other.model.layers[0].self_attn)


def test_llama_fixture_uses_grouped_query_attention(runs):
    attn = runs["llama"]["model"].model.layers[0].self_attn
    assert attn.k_proj.out_features == TINY_HIDDEN // 2  # 2 key/value heads for 4 query heads


def test_recording_positions_are_per_sequence(load_tiny, tokenizer):
    """Recording row b at position p gives the same numbers whichever position the other row uses."""
    model = load_tiny("gpt2")
    rec = capture.attach(model)
    ids = padded_batch(tokenizer)
    results = []
    for positions in ([8, 3], [2, 3]):
        with torch.no_grad(), rec.record(torch.tensor(positions)):
            model.base_model(ids)
            results.append(rec.stacked())
    assert torch.equal(results[0][0][1], results[1][0][1])
    assert torch.equal(results[0][1][1], results[1][1][1])
    assert not torch.allclose(results[0][0][0], results[1][0][0])
    assert rec.positions is None  # cleared on leaving record()


def test_two_attached_models_record_independently(load_tiny, tokenizer):
    ids = padded_batch(tokenizer)
    first, second = load_tiny("gpt2"), load_tiny("opt")
    rec1 = capture.attach(first)
    rec2 = capture.attach(second)  # attaching another model must not break the first
    with torch.no_grad(), rec1.record(torch.tensor(POSITIONS)):
        first.base_model(ids)
    assert set(rec1.attn_scores) == {0, 1} and rec2.attn_scores == {}
    assert rec1.stacked()[1].shape == (2, 2, TINY_HEADS, max(LENGTHS))


def test_attach_refusal_is_unsupported_model_error(load_tiny, monkeypatch):
    model = load_tiny("gpt2")

    def refuse(*args, **kwargs):
        raise ValueError("no attention interface here")

    monkeypatch.setattr(model, "set_attn_implementation", refuse)
    with pytest.raises(UnsupportedModelError, match="GPT2LMHeadModel.*attention interface"):
        capture.attach(model)


class NoInterfaceAttention(nn.Module):
    """A stand-in attention that never calls transformers' attention interface."""

    def __init__(self, width: int):
        super().__init__()
        self.mix = nn.Linear(width, width)

    def forward(self, hidden_states, *args, **kwargs):
        return self.mix(hidden_states), None


def test_layer_without_self_attention_is_refused(load_tiny):
    model = load_tiny("gpt2")
    model.transformer.h[1].attn = NoInterfaceAttention(TINY_HIDDEN)  # one call for two layers
    with pytest.raises(UnsupportedModelError, match="1 attention calls for 2 layers"):
        capture.attach(model)


def test_model_outside_the_interface_is_refused(load_tiny):
    model = load_tiny("gpt2")
    for block in model.transformer.h:
        block.attn = NoInterfaceAttention(TINY_HIDDEN)
    with pytest.raises(UnsupportedModelError, match="0 attention calls for 2 layers"):
        capture.attach(model)


def test_xglm_attention_the_recorder_does_not_reproduce_is_refused(load_tiny, monkeypatch):
    """If XGLM's own attention differs from the recorder's forward for it (here, one that moves
    keys by position inside, as a future transformers version might), attach must refuse rather
    than record numbers the model does not compute."""
    from transformers.models.xglm.modeling_xglm import XGLMAttention

    model = load_tiny("xglm")

    def positional_forward(self, hidden_states, attention_mask=None, **kwargs):
        batch, length, _ = hidden_states.shape
        q = self.q_proj(hidden_states).view(batch, length, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(batch, length, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(batch, length, -1, self.head_dim).transpose(1, 2)
        k = k * (1.0 + torch.arange(length, dtype=k.dtype)[:, None])  # a position term inside attention
        scores = q @ k.transpose(-1, -2) * self.scaling + attention_mask
        probs = scores.softmax(-1)
        out = (probs @ v).transpose(1, 2).reshape(batch, length, -1)
        return self.out_proj(out), probs

    monkeypatch.setattr(XGLMAttention, "forward", positional_forward)
    with pytest.raises(UnsupportedModelError, match="does not reproduce the attention of layer 0"):
        capture.attach(model)


@pytest.mark.parametrize("arch", ["xglm", "llama"])
def test_recording_after_finetuning_an_attached_model(load_tiny, tokenizer, sentences, arch):
    """The extraction attaches first and finetunes after: recording must follow the new weights."""
    from icl_gd.activations import training

    model = load_tiny(arch)
    rec = capture.attach(model)
    training.finetune(model, sentences, lr=0.05, kind="lcgd")
    ids = padded_batch(tokenizer)
    with torch.no_grad(), rec.record(torch.tensor(POSITIONS)):
        model.base_model(ids)
        _, scores = rec.stacked()
    eager = load_tiny(arch, "eager")
    eager.load_state_dict(model.state_dict())
    with torch.no_grad():
        probs = eager.base_model(ids, output_attentions=True).attentions
        before = load_tiny(arch, "eager").base_model(ids, output_attentions=True).attentions
    for layer in range(2):
        for b, p in enumerate(POSITIONS):
            mine = torch.softmax(scores[b, layer, :, : p + 1], dim=-1)
            torch.testing.assert_close(mine, probs[layer][b, :, p, : p + 1], atol=1e-5, rtol=0)
    assert not torch.allclose(probs[1], before[1], atol=1e-4)  # training did move the attention


@pytest.mark.parametrize("arch", ARCHS)
def test_recording_on_top_of_a_key_value_cache(load_tiny, tokenizer, arch):
    """Running the context once and the queries on its cached keys and values (as the extraction
    does) records the same scores over all keys, context first, and the same attention output."""
    model = load_tiny(arch)
    rec = capture.attach(model)
    full = padded_batch(tokenizer)
    n_ctx = 3  # both recorded positions (8 and 3) lie in the query part
    positions = torch.tensor(POSITIONS)
    with torch.no_grad(), rec.record(positions):
        hidden_full = model.base_model(full).last_hidden_state
        out_full, scores_full = rec.stacked()
    with torch.no_grad():
        past = model.base_model(full[:, :n_ctx], use_cache=True).past_key_values
        with rec.record(positions - n_ctx):
            hidden = model.base_model(full[:, n_ctx:], cache=past, use_cache=True).last_hidden_state  # 5.24's name
            out, scores = rec.stacked()
    assert scores.shape == scores_full.shape  # keys are absolute: the cached context, then the query
    torch.testing.assert_close(scores, scores_full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, out_full, atol=1e-5, rtol=1e-5)
    for b, p in enumerate(POSITIONS):
        torch.testing.assert_close(hidden[b, p - n_ctx], hidden_full[b, p], atol=1e-5, rtol=1e-5)
