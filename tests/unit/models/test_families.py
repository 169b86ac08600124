"""Conformance of every path the workflow computes itself, per model family, against the model's
own forward with eager attention: sliding windows (set smaller than the test's context), soft-
capping, attention sinks, grouped-query attention, q/k norms, custom query scaling and logit
post-processing. A family is one line of FAMILIES; a family the recorder cannot reproduce is one
line of REFUSED, with the words its error must contain.

For each family, tiny random weights (moved off their initial values so that attention is far from
uniform) are loaded into an attached copy and an eager copy. Checked to 1e-5 (float32):
- label log-probs and attention outputs of ZSL, shared-prefix ICL and the naive full-sequence path;
- the recorded score rows over the query keys: their differences equal those of the log of the
  eager attention probabilities wherever a key is seen (the pre-softmax scores up to the softmax's
  per-row constant; a key outside a window has probability 0 and is left out);
- the K/V weights after GD, layer-causal GD and linearized GD, trained through the recorder's
  attention, against the same training through eager attention.
Every test fails on a FutureWarning or DeprecationWarning (pyproject.toml's filterwarnings): a
deprecated argument of a transformers call is one the next release may remove, breaking the
workflow's call.
"""

from __future__ import annotations

import copy
import os

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402

from icl_gd.activations import capture, extract, training  # noqa: E402
from icl_gd.data.prompts import Query  # noqa: E402
from icl_gd.models.loading import UnsupportedModelError  # noqa: E402


def test_a_deprecated_argument_is_caught():
    """pyproject.toml's filterwarnings make a deprecation an error in every test: here, what
    transformers' own deprecation decorator raises (5.24 renamed past_key_values to cache)."""
    from transformers.utils.deprecation import deprecate_kwarg

    @deprecate_kwarg("past_key_values", "99.0.0", new_name="cache")
    def forward(cache=None):
        return cache

    with pytest.raises(FutureWarning, match="past_key_values"):
        forward(past_key_values=3)
    assert forward(cache=4) == 4


@pytest.mark.parametrize("family", ["gpt2", "llama", "xglm"])
def test_loading_a_saved_model_makes_no_deprecated_call(tmp_path, family):
    """loading.load_model's from_pretrained arguments (dtype, attn_implementation) under the guard."""
    from icl_gd.models import loading

    model = T.AutoModelForCausalLM.from_config(FAMILIES[family]())
    model.save_pretrained(tmp_path)
    loaded = loading.load_model(tmp_path, dtype="float32", device="cpu")
    assert loaded.dtype == torch.float32 and loaded.config.model_type == model.config.model_type


W = 4  # every sliding window: far shorter than the ~30-token sequences below
IDS = dict(vocab_size=96, pad_token_id=0, bos_token_id=1, eos_token_id=2)
L = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=96, max_position_embeddings=64)
GQA = dict(L, num_key_value_heads=2)
SLIDE_FULL = ["sliding_attention", "full_attention"]

FAMILIES = {
    "gpt2": lambda: T.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, **IDS),
    "opt": lambda: T.OPTConfig(
        num_hidden_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        ffn_dim=96,
        word_embed_proj_dim=64,
        max_position_embeddings=64,
        **IDS,
    ),
    "xglm": lambda: T.XGLMConfig(
        num_layers=2, d_model=64, attention_heads=4, ffn_dim=96, max_position_embeddings=64, **IDS
    ),
    "gpt_neox": lambda: T.GPTNeoXConfig(**L, rotary_pct=0.5, **IDS),
    "llama": lambda: T.LlamaConfig(**GQA, **IDS),
    "mistral": lambda: T.MistralConfig(**GQA, sliding_window=W, **IDS),  # every layer slides
    "qwen2": lambda: T.Qwen2Config(**GQA, use_sliding_window=True, sliding_window=W, max_window_layers=1, **IDS),
    "qwen3": lambda: T.Qwen3Config(
        **GQA, head_dim=16, use_sliding_window=True, sliding_window=W, max_window_layers=1, **IDS
    ),
    "gemma": lambda: T.GemmaConfig(**GQA, head_dim=16, **IDS),
    # layer 0 slides; soft-capped scores and logits; scaling from query_pre_attn_scalar, not head_dim
    "gemma2": lambda: T.Gemma2Config(
        **GQA,
        head_dim=16,
        sliding_window=W,
        query_pre_attn_scalar=24,
        attn_logit_softcapping=5.0,
        final_logit_softcapping=3.0,
        **IDS,
    ),
    "gemma3": lambda: T.Gemma3TextConfig(
        **GQA,
        head_dim=16,
        sliding_window=W,
        query_pre_attn_scalar=24,
        final_logit_softcapping=3.0,
        layer_types=SLIDE_FULL,
        **IDS,
    ),
    "phi3": lambda: T.Phi3Config(**GQA, sliding_window=W, **IDS),  # fused qkv_proj
    "starcoder2": lambda: T.Starcoder2Config(**GQA, sliding_window=W, **IDS),
    "ministral": lambda: T.MinistralConfig(**GQA, head_dim=16, sliding_window=W, layer_types=SLIDE_FULL, **IDS),
    "cohere2": lambda: T.Cohere2Config(**GQA, sliding_window=W, layer_types=SLIDE_FULL, **IDS),  # logit scale
    "olmo2": lambda: T.Olmo2Config(**GQA, **IDS),  # q/k norms over the whole projection
    "olmo3": lambda: T.Olmo3Config(**GQA, sliding_window=W, layer_types=SLIDE_FULL, **IDS),
    "cohere": lambda: T.CohereConfig(**GQA, logit_scale=0.5, use_qk_norm=True, **IDS),
    "granite": lambda: T.GraniteConfig(
        **GQA, embedding_multiplier=2.0, logits_scaling=2.0, residual_multiplier=0.5, attention_multiplier=0.2, **IDS
    ),
    "stablelm": lambda: T.StableLmConfig(**GQA, qk_layernorm=True, use_qkv_bias=True, **IDS),
    "gpt_bigcode": lambda: T.GPTBigCodeConfig(n_layer=2, n_embd=64, n_head=4, n_positions=64, multi_query=True, **IDS),
    # attention sinks (s_aux), layer 0 slides, mixture of experts
    "gpt_oss": lambda: T.GptOssConfig(
        num_hidden_layers=2,
        hidden_size=64,
        intermediate_size=64,
        head_dim=16,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=W,
        max_position_embeddings=64,
        **IDS,
    ),
}

REFUSED = {
    "bloom": (lambda: T.BloomConfig(n_layer=2, hidden_size=64, n_head=4, **IDS), "ALiBi"),
    "mpt": (lambda: T.MptConfig(n_layers=2, d_model=64, n_heads=4, max_seq_len=64, **IDS), "ALiBi"),
    "falcon_alibi": (
        lambda: T.FalconConfig(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=4,
            alibi=True,
            multi_query=False,
            new_decoder_architecture=False,
            bias=True,
            **IDS,
        ),
        "ALiBi",
    ),
    "falcon": (
        lambda: T.FalconConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, multi_query=True, **IDS),
        "inline",
    ),
}

LABEL_IDS = [5, 6]


def assert_close(got, want, what):
    """Equal to 1e-5 of the values' own scale (float32 sums in another order differ by that)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(1.0, float(np.abs(want).max()))
    worst = float(np.abs(got - want).max())
    assert worst <= 1e-5 * scale, f"{what}: differs by {worst:.2e} at a scale of {scale:.2f}"


def pair(config):
    """(attached copy, its recorder, eager copy) of one set of tiny random weights."""
    torch.manual_seed(0)
    # a config of its own for each copy: attaching sets the attention implementation in the config
    eager = T.AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="eager").eval()
    with torch.no_grad():
        for param in eager.parameters():
            param.add_(torch.randn_like(param) * 0.3)
    model = T.AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation="eager").eval()
    model.load_state_dict(eager.state_dict())
    rec = capture.attach(model)
    assert eager.config._attn_implementation == "eager" and model.config._attn_implementation != "eager"
    return model, rec, eager


def sequences():
    """A context of <s> + three demonstrations (~22 tokens) and queries of 5-8 tokens."""
    gen = torch.Generator().manual_seed(1)

    def tokens(n):
        return torch.randint(7, IDS["vocab_size"], (n,), generator=gen).tolist()

    context = [IDS["bos_token_id"]]
    for n in (6, 7, 6):
        context += tokens(n) + [LABEL_IDS[n % 2], IDS["eos_token_id"]]
    queries = []
    for i, n in enumerate((5, 8, 6, 7)):
        ids = tokens(n) + [LABEL_IDS[0]]
        queries.append(Query(i, i % 2, ids, len(ids) - 2, len(ids) - 1))
    return context, queries


def attention_modules(model, rec) -> dict[int, str]:
    """layer -> name of its attention module (the recorder found them on the attached copy)."""
    names = {id(m): name for name, m in model.named_modules()}
    return {layer: names[module_id] for module_id, layer in rec.layer_of.items()}


def eager_reference(eager, modules: dict[int, str], context, queries):
    """The eager model run on each full sequence alone: label log-probs, attention outputs and
    attention probabilities of the recorded row."""
    by_name = dict(eager.named_modules())
    out = {"label_logprobs": [], "attn_out": [], "probs": []}
    for query in queries:
        ids = torch.tensor([context + query.ids])
        outputs = {}
        handles = [
            by_name[name].register_forward_hook(
                lambda mod, args, output, layer=layer: outputs.__setitem__(layer, output[0])
            )
            for layer, name in modules.items()
        ]
        with torch.no_grad():
            res = eager(input_ids=ids, output_attentions=True)
        for handle in handles:
            handle.remove()
        answer, record = len(context) + query.answer_offset, len(context) + query.record_offset
        out["label_logprobs"].append(torch.log_softmax(res.logits[0, answer].float(), -1)[LABEL_IDS].numpy())
        out["attn_out"].append(np.stack([outputs[layer][0, record].numpy() for layer in sorted(outputs)]))
        out["probs"].append([a[0, :, record].numpy() for a in res.attentions])
    return out


def check_scores(recorded, probs, n_ctx, query):
    """Differences of the recorded query-key scores equal those of the log probabilities, on every
    key the recorded position sees (probability > 0)."""
    q_len = query.record_offset + 1
    for layer, layer_probs in enumerate(probs):
        p = layer_probs[:, n_ctx : n_ctx + q_len]  # (heads, query keys)
        s = recorded[layer, :, :q_len]
        seen = p > 0
        assert seen[:, -1].all()
        log_p = np.log(np.where(seen, p, 1.0))
        np.testing.assert_allclose(
            np.where(seen, s - s[:, -1:], 0),
            np.where(seen, log_p - log_p[:, -1:], 0),
            rtol=1e-4,
            atol=1e-4,
            err_msg=f"layer {layer}",
        )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_path_equals_the_models_own_forward(family):
    config = FAMILIES[family]()
    model, rec, eager = pair(config)
    if getattr(config, "sliding_window", None):
        assert any(rec.window.values()), "the test must exercise a sliding window"
    context, queries = sequences()
    ref = eager_reference(eager, attention_modules(model, rec), context, queries)
    for name, ctx, reuse in (
        ("zsl", context[:1], False),
        ("icl, shared prefix", context, True),
        ("icl, naive", context, False),
    ):
        if name == "zsl":
            ref_ctx = eager_reference(eager, attention_modules(model, rec), ctx, queries)
        else:
            ref_ctx = ref
        got = extract.evaluate(model, rec, ctx, queries, LABEL_IDS, batch_size=3, reuse_prefix=reuse)
        assert_close(got["label_logprobs"], np.stack(ref_ctx["label_logprobs"]), f"{name}: label log-probs")
        assert_close(got["attn_out"], np.stack(ref_ctx["attn_out"]), f"{name}: attention outputs")
        for i, query in enumerate(queries):
            check_scores(got["attn_scores"][i], ref_ctx["probs"][i], len(ctx), query)


@pytest.mark.parametrize("kind", ["gd", "lcgd", "linearized"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_finetuning_through_the_recorder_equals_finetuning_the_model(family, kind):
    model, _, eager = pair(FAMILIES[family]())
    context, queries = sequences()
    demos = [context[:9], [IDS["bos_token_id"]] + queries[1].ids, context[:20]]  # 20 tokens: past the window
    training.finetune(model, demos, lr=0.05, kind=kind)
    training.finetune(eager, demos, lr=0.05, kind=kind)
    for ours, theirs in zip(training.kv_parameters(model), training.kv_parameters(eager)):
        assert_close(ours.param.detach().numpy(), theirs.param.detach().numpy(), ours.name)
    moved = training.kv_parameters(pair(FAMILIES[family]())[2])
    assert any(not torch.equal(a.param, b.param) for a, b in zip(moved, training.kv_parameters(model)))


@pytest.mark.parametrize("family", sorted(REFUSED))
def test_families_whose_attention_cannot_be_reproduced_are_refused_by_name(family):
    config, words = REFUSED[family]
    model = T.AutoModelForCausalLM.from_config(config()).eval()
    with pytest.raises(UnsupportedModelError, match=words):
        capture.attach(model)
