"""The recordings of an activation cache made the ways a researcher would otherwise make them.

``benchmarks/against_peers.py`` times these beside the workflow's own extraction, and
``tests/unit/activations/test_peers.py`` keeps them in agreement with it. Every peer takes what
``extract.evaluate`` takes (a context, the queries run after it, the label word ids) and returns
what it records, in its layout:

- ``label_logprobs`` (n, labels): log-softmax over the vocabulary at the answer position;
- ``attn_out`` (n, layers, d_model): each attention module's output at the recorded position;
- ``attn_scores`` (n, layers, heads, query keys): the pre-softmax scaled scores of the recorded
  query row over the query's own keys (NaN past the query's length);
- ``context_scores`` (n, layers, context keys): the same over the context's keys, summed over heads.

The peers:

- ``workflow``: ``extract.evaluate``, the context's keys and values computed once;
- ``transformer_lens``: TransformerLens' ``TransformerBridge.run_with_cache``, batched, with a names
  filter on the hook points whose names the cache follows (``blocks.{l}.hook_attn_out``,
  ``blocks.{l}.attn.hook_attn_scores``); an optional extra (``pip install -e '.[peers]'``);
- ``hooks``: plain transformers, batched: a forward hook on each attention module for its output,
  and ``output_attentions=True`` with an eager attention function that returns the pre-softmax
  scores as its weights (transformers' own eager attention returns the softmax pattern, from which
  the scores cannot be recovered: a row's constant is lost);
- ``reference_loop``: the reference code's loop, one prompt at a time, the whole sequence each time
  (the ``hooks`` peer with batches of one).

Every peer but the workflow runs each prompt in full (context + query) and keeps every layer's full
attention matrix for the batch, as these tools do. Sequences are right-padded: causal attention
never lets a real token see the padding.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import numpy as np
import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

from icl_gd.activations import capture, extract
from icl_gd.data.prompts import Query
from icl_gd.models import loading

SCORES_IMPLEMENTATION = "eager_scores"
RECORDS = ("label_logprobs", "attn_out", "attn_scores", "context_scores")
PEERS = ("workflow", "transformer_lens", "hooks", "reference_loop")
# what the families call a block's attention module (GPT-2, Llama and most, GPT-NeoX, Falcon)
ATTENTION_NAMES = ("attn", "self_attn", "attention", "self_attention")
# what each optional peer needs installed, and how to get it
REQUIRES = {"transformer_lens": ("transformer_lens", "pip install -e '.[peers]'")}


def _eager_scores_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention that hands back the pre-softmax scores (q.k * scaling) as its weights."""
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scale
    masked = scores
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            masked = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            masked = scores + attention_mask[..., : key.shape[-2]]
    probs = torch.softmax(masked.float(), dim=-1).to(query.dtype)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), scores


AttentionInterface.register(SCORES_IMPLEMENTATION, _eager_scores_attention)
AttentionMaskInterface.register(SCORES_IMPLEMENTATION, ALL_MASK_ATTENTION_FUNCTIONS["eager"])


def missing(peer: str) -> str | None:
    """Why ``peer`` cannot run here (what to install), or None when it can."""
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; known: {', '.join(PEERS)}")
    if peer in REQUIRES and importlib.util.find_spec(REQUIRES[peer][0]) is None:
        module, command = REQUIRES[peer]
        return f"{module} is not installed ({command})"
    return None


def _empty(n: int, layers: int, heads: int, d_model: int, n_ctx: int, queries: list[Query], labels: int) -> dict:
    q_max = max(q.record_offset + 1 for q in queries)
    return {
        "label_logprobs": np.zeros((n, labels), np.float32),
        "attn_out": np.zeros((n, layers, d_model), np.float32),
        "attn_scores": np.full((n, layers, heads, q_max), np.nan, np.float32),
        "context_scores": np.zeros((n, layers, n_ctx), np.float32),
    }


def _keep(
    out: dict,
    i: int,
    n_ctx: int,
    query: Query,
    logits: torch.Tensor,
    attn_out: list[torch.Tensor],
    score_rows: list[torch.Tensor],
    label_ids: list[int],
) -> None:
    """Store example i's records from its answer logits (vocab,), each layer's attention output
    at the recorded position (d_model,) and its score row there, (heads, keys >= recorded + 1)."""
    q_len = query.record_offset + 1
    out["label_logprobs"][i] = torch.log_softmax(logits.float(), dim=-1)[label_ids].numpy()
    out["attn_out"][i] = torch.stack(attn_out).float().numpy()
    rows = torch.stack(score_rows).float()  # (layers, heads, keys)
    out["attn_scores"][i, :, :, :q_len] = rows[..., n_ctx : n_ctx + q_len].numpy()
    out["context_scores"][i] = rows[..., :n_ctx].sum(dim=1).numpy()


def _batches(context: list[int], queries: list[Query], batch_size: int, pad: int):
    """(indices, right-padded ids, their attention mask, recorded positions, answer positions) of
    each batch."""
    for start in range(0, len(queries), batch_size):
        idx = list(range(start, min(start + batch_size, len(queries))))
        width = len(context) + max(len(queries[i].ids) for i in idx)
        ids = torch.full((len(idx), width), pad, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for row, i in enumerate(idx):
            ids[row, : len(context) + len(queries[i].ids)] = torch.tensor(context + queries[i].ids)
            mask[row, : len(context) + len(queries[i].ids)] = 1
        record = [len(context) + queries[i].record_offset for i in idx]
        answer = [len(context) + queries[i].answer_offset for i in idx]
        yield idx, ids, mask, record, answer


def _pad_id(config) -> int:
    pad = config.pad_token_id if config.pad_token_id is not None else config.eos_token_id
    return 0 if pad is None else int(pad)


def load(folder: str | Path, peer: str, dtype: torch.dtype = torch.float32, device: str = "cpu"):
    """The model as ``peer`` runs it, loaded from ``folder`` (a saved causal LM and tokenizer):
    each peer gets its own copy, since each changes how the model computes attention."""
    from transformers import AutoModelForCausalLM

    why = missing(peer)
    if why:
        raise RuntimeError(f"peer {peer!r} cannot run: {why}")
    implementation = {"workflow": "sdpa", "transformer_lens": "eager"}.get(peer, SCORES_IMPLEMENTATION)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation=implementation)
    model = model.to(device).eval()
    if peer == "workflow":
        return model, capture.attach(model)
    if peer == "transformer_lens":
        # importing it sets transformers' logger to ERROR for the whole process: not ours to change
        logger = logging.getLogger("transformers")
        level = logger.level
        try:
            from transformer_lens.model_bridge import TransformerBridge
        finally:
            logger.setLevel(level)
        bridge = TransformerBridge.boot_transformers(
            str(folder), hf_model=model, tokenizer=loading.load_tokenizer(folder), dtype=dtype, device=device
        )
        return bridge, None
    return model, None


def record(
    peer: str, loaded, context: list[int], queries: list[Query], label_ids: list[int], *, batch_size: int
) -> dict:
    """What ``peer`` records for context + each query (see the module's docstring)."""
    model, rec = loaded
    if peer == "workflow":
        out = extract.evaluate(model, rec, context, queries, label_ids, batch_size=batch_size)
        return {key: out[key] for key in RECORDS}
    if peer == "transformer_lens":
        return _record_transformer_lens(model, context, queries, label_ids, batch_size)
    return _record_hooks(model, context, queries, label_ids, 1 if peer == "reference_loop" else batch_size)


def _record_hooks(model, context, queries, label_ids, batch_size) -> dict:
    config = model.config
    layers = loading.decoder_layers(model)
    attention = [next(m for name, m in block.named_children() if name in ATTENTION_NAMES) for block in layers]
    out = _empty(
        len(queries),
        config.num_hidden_layers,
        config.num_attention_heads,
        config.hidden_size,
        len(context),
        queries,
        len(label_ids),
    )
    outputs: dict[int, torch.Tensor] = {}

    def keep(layer):
        def hook(module, args, output):
            outputs[layer] = output[0] if isinstance(output, tuple) else output

        return hook

    handles = [module.register_forward_hook(keep(layer)) for layer, module in enumerate(attention)]
    try:
        for idx, ids, mask, record_at, answer_at in _batches(context, queries, batch_size, _pad_id(config)):
            with torch.no_grad():
                result = model(
                    input_ids=ids.to(model.device), attention_mask=mask.to(model.device), output_attentions=True
                )
            for row, i in enumerate(idx):
                r = record_at[row]
                _keep(
                    out,
                    i,
                    len(context),
                    queries[i],
                    result.logits[row, answer_at[row]].cpu(),
                    [outputs[layer][row, r].cpu() for layer in range(len(attention))],
                    [scores[row, :, r, : r + 1].cpu() for scores in result.attentions],
                    label_ids,
                )
    finally:
        for handle in handles:
            handle.remove()
    return out


def _record_transformer_lens(bridge, context, queries, label_ids, batch_size) -> dict:
    cfg = bridge.cfg
    out = _empty(len(queries), cfg.n_layers, cfg.n_heads, cfg.d_model, len(context), queries, len(label_ids))
    wanted = ("hook_attn_out", "attn.hook_attn_scores")
    pad = _pad_id(bridge.original_model.config)
    for idx, ids, _, record_at, answer_at in _batches(context, queries, batch_size, pad):
        with torch.no_grad():
            logits, cache = bridge.run_with_cache(ids.to(cfg.device), names_filter=lambda name: name.endswith(wanted))
        for row, i in enumerate(idx):
            r = record_at[row]
            _keep(
                out,
                i,
                len(context),
                queries[i],
                logits[row, answer_at[row]].cpu(),
                [cache[f"blocks.{layer}.hook_attn_out"][row, r].cpu() for layer in range(cfg.n_layers)],
                [
                    cache[f"blocks.{layer}.attn.hook_attn_scores"][row, :, r, : r + 1].cpu()
                    for layer in range(cfg.n_layers)
                ],
                label_ids,
            )
    return out


def relative_error(found: np.ndarray, expected: np.ndarray) -> float:
    """||found - expected|| / ||expected|| over the entries both define (NaN marks undefined)."""
    both = ~(np.isnan(found) | np.isnan(expected))
    if (np.isnan(found) != np.isnan(expected)).any():
        return float("inf")  # a peer that defines other entries records something else
    scale = np.linalg.norm(expected[both].astype(np.float64))
    return float(np.linalg.norm((found[both] - expected[both]).astype(np.float64)) / max(scale, 1e-30))


def agreement(found: dict, expected: dict) -> dict[str, float]:
    """The relative error of each record of ``found`` against ``expected`` (the workflow's).
    Score rows are as wide as the longest query of a call: the wider one's extra keys must be NaN."""
    errors = {}
    for key in RECORDS:
        a, b = found[key], expected[key]
        if key == "attn_scores" and a.shape[-1] != b.shape[-1]:
            width = min(a.shape[-1], b.shape[-1])
            if not (np.isnan(a[..., width:]).all() and np.isnan(b[..., width:]).all()):
                errors[key] = float("inf")
                continue
            a, b = a[..., :width], b[..., :width]
        errors[key] = relative_error(a, b)
    return errors
