"""Record what the model computes at one position per example, without slowing attention down.

Two hook points per layer, named after TransformerLens' units:
- ``attn_out``: the attention module's output (after the output projection, before dropout and
  the residual add), read by a forward hook on the module;
- ``attn_scores``: the pre-softmax, scaled scores q.k * scaling of the recorded query row over
  every key, computed inside a registered attention function from the very query and key the
  model hands to its kernel (after projections, norms, rotary embeddings and the model's own
  scaling), then passed on to SDPA. Only the one row per example is computed: the full attention
  matrix never exists, and ``output_attentions`` (slow eager attention) is never needed.

Architectures whose attention does not go through that interface but projects q and k with
``q_proj`` / ``k_proj`` itself (the BART family, e.g. XGLM, the reference model's architecture) are
recorded from forward hooks on those projections instead; ``attach`` checks once, on a probe
sequence, that the hooked scores reproduce the model's own attention probabilities.
"""

from __future__ import annotations

import contextlib

import torch
import torch.autograd.forward_ad as fwAD
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

from .models import UnsupportedModelError, decoder_layers

CAPTURE_IMPLEMENTATION = "icl_gd_capture"


class Recorder:
    """Holds, for the forward pass in flight, which position of each sequence to record."""

    def __init__(self):
        self.layer_of: dict[int, int] = {}  # id(attention module) -> layer index
        self.probing = False
        self.positions: torch.Tensor | None = None  # (batch,) index into the current query chunk
        self.attn_scores: dict[int, torch.Tensor] = {}  # layer -> (batch, heads, keys)
        self.attn_out: dict[int, torch.Tensor] = {}  # layer -> (batch, d_model)
        # A context shared by every sequence of a batch: its keys and values per layer, batch of
        # one, kept once and attended to without copying them per sequence (``shared_prefix``).
        self.shares_prefix = True  # False where attention bypasses the interface (XGLM)
        self.prefix: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.prefix_mode: str | None = None  # "store" while running the context, "use" after

    @contextlib.contextmanager
    def record(self, positions: torch.Tensor):
        self.positions, self.attn_scores, self.attn_out = positions, {}, {}
        try:
            yield self
        finally:
            self.positions = None

    @contextlib.contextmanager
    def shared_prefix(self, mode: str):
        """``store``: keep each layer's keys and values of the (batch of one) context run inside;
        ``use``: let the sequences run inside attend to that context first (their position ids
        must start after it). ``clear_prefix`` frees it."""
        self.prefix_mode = mode
        if mode == "store":
            self.prefix = {}
        try:
            yield self
        finally:
            self.prefix_mode = None

    def clear_prefix(self) -> None:
        self.prefix = {}

    def stacked(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(batch, layers, d_model) attention outputs and (batch, layers, heads, keys) scores."""
        layers = range(len(self.layer_of))
        return (
            torch.stack([self.attn_out[i] for i in layers], dim=1),
            torch.stack([self.attn_scores[i] for i in layers], dim=1),
        )


_ACTIVE: Recorder | None = None


def realize(tensor: torch.Tensor) -> torch.Tensor:
    """The value a tensor stands for: primal + tangent for a forward-mode dual (a linearized
    model, see ``training.linearized``), the tensor itself otherwise."""
    primal, tangent = fwAD.unpack_dual(tensor)
    return primal if tangent is None else primal + tangent


def _is_dual(tensor: torch.Tensor) -> bool:
    return fwAD.unpack_dual(tensor).tangent is not None


def _repeat_kv(tensor: torch.Tensor, heads: int) -> torch.Tensor:
    """Grouped-query attention shares each key/value head among a group of query heads."""
    return tensor if tensor.shape[1] == heads else tensor.repeat_interleave(heads // tensor.shape[1], dim=1)


def _masked_scores(query, key, attention_mask, scale) -> torch.Tensor:
    """Float scores q.k * scale, masked: causal aligned to the last key unless a mask is given."""
    scores = torch.matmul(query, _repeat_kv(key, query.shape[1]).transpose(-1, -2)).float() * scale
    if attention_mask is None:
        q_len, k_len = scores.shape[-2:]
        attention_mask = torch.ones(q_len, k_len, dtype=torch.bool, device=scores.device).tril(k_len - q_len)
    if attention_mask.dtype == torch.bool:
        return scores.masked_fill(~attention_mask, torch.finfo(torch.float32).min)
    return scores + attention_mask


def _math_attention(query, key, value, attention_mask, scaling):
    """Softmax attention in plain operations, for forward-mode AD (SDPA's CPU and flash kernels
    have no forward derivative). Output laid out as SDPA's: (batch, queries, heads, d_head)."""
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    probs = torch.softmax(_masked_scores(query, key, attention_mask, scale), dim=-1).to(value.dtype)
    return torch.matmul(probs, _repeat_kv(value, query.shape[1])).transpose(1, 2).contiguous(), None


def _prefix_attention(query, key, value, prefix_keys, prefix_values, attention_mask, scaling):
    """Softmax attention over [shared prefix; this chunk], the prefix held once (batch of one).

    The prefix part runs as one matrix product over all batch rows x queries, so its keys and
    values are never copied per sequence; the two parts are merged with a shared maximum.
    Output laid out as SDPA's: (batch, queries, heads, d_head).
    """
    batch, heads, q_len, d_head = query.shape
    value = _repeat_kv(value, heads)
    scale = d_head**-0.5 if scaling is None else scaling
    rows = query.transpose(0, 1).reshape(heads, batch * q_len, d_head)
    s_prefix = (torch.bmm(rows, prefix_keys[0].transpose(1, 2)).float() * scale).view(heads, batch, q_len, -1)
    s_chunk = _masked_scores(query, key, attention_mask, scale)  # (batch, heads, q, q)
    top = torch.maximum(s_prefix.amax(-1).transpose(0, 1), s_chunk.amax(-1)).unsqueeze(-1)  # (b, h, q, 1)
    e_prefix = (s_prefix - top.transpose(0, 1)).exp()  # (heads, batch, q, prefix)
    e_chunk = (s_chunk - top).exp()
    total = e_prefix.sum(-1).transpose(0, 1).unsqueeze(-1) + e_chunk.sum(-1, keepdim=True)
    from_prefix = torch.bmm(e_prefix.reshape(heads, batch * q_len, -1).to(value.dtype), prefix_values[0])
    from_prefix = from_prefix.view(heads, batch, q_len, d_head).transpose(0, 1)
    out = (from_prefix + torch.matmul(e_chunk.to(value.dtype), value)) / total.to(value.dtype)
    return out.transpose(1, 2).contiguous(), None


def _capture_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    # each attached module knows its own recorder, so several attached models do not mix up
    rec = getattr(module, "_icl_gd_recorder", None)
    if rec is None and _ACTIVE is not None and _ACTIVE.probing:
        _ACTIVE.layer_of.setdefault(id(module), len(_ACTIVE.layer_of))
    prefix = None
    if rec is not None:
        layer, heads = rec.layer_of[id(module)], query.shape[1]
        if rec.prefix_mode == "store":
            rec.prefix[layer] = (_repeat_kv(key, heads), _repeat_kv(value, heads))
        elif rec.prefix_mode == "use":
            prefix = rec.prefix[layer]
    if rec is not None and rec.positions is not None:
        batch = query.shape[0]
        rows = query[torch.arange(batch, device=query.device), :, rec.positions].float()  # (batch, heads, d_head)
        scale = query.shape[-1] ** -0.5 if scaling is None else scaling
        scores = torch.einsum("bhd,bhkd->bhk", rows, _repeat_kv(key, heads).float()) * scale
        if prefix is not None:  # keys are absolute positions: the shared prefix comes first
            scores = torch.cat([torch.einsum("bhd,hkd->bhk", rows, prefix[0][0].float()) * scale, scores], dim=-1)
        rec.attn_scores[layer] = realize(scores)
    if prefix is not None:
        return _prefix_attention(query, key, value, *prefix, attention_mask, scaling)
    if _is_dual(query) or _is_dual(key) or _is_dual(value):
        return _math_attention(query, key, value, attention_mask, scaling)
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)


AttentionInterface.register(CAPTURE_IMPLEMENTATION, _capture_attention)
AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def _attn_out_hook(rec: Recorder, layer: int):
    def hook(module, args, output):
        if rec.positions is not None:
            out = output[0] if isinstance(output, tuple) else output
            rec.attn_out[layer] = realize(out[torch.arange(out.shape[0], device=out.device), rec.positions]).float()

    return hook


def _projection_attention(block: nn.Module) -> nn.Module | None:
    """A block's self-attention module that projects q and k itself with ``q_proj``/``k_proj``."""
    for name in ("self_attn", "attention", "attn"):
        module = getattr(block, name, None)
        if all(isinstance(getattr(module, p, None), nn.Module) for p in ("q_proj", "k_proj")) and hasattr(module, "head_dim"):
            return module
    return None


def _projection_hooks(rec: Recorder, layer: int, module: nn.Module) -> None:
    """Scores q.k * scaling of the recorded rows, from the outputs of ``q_proj`` and ``k_proj``
    (and, when the module runs on top of a key/value cache, the cached keys before them)."""
    seen: dict[str, object] = {}
    head_dim = module.head_dim
    scale = getattr(module, "scaling", head_dim**-0.5)

    def keep(name):
        def hook(proj, args, output):
            if rec.positions is not None:
                seen[name] = output

        return hook

    def keep_cache(attn, args, kwargs):
        if rec.positions is not None:
            seen["cache"] = kwargs.get("past_key_values", kwargs.get("past_key_value"))

    def scores(attn, args, output):
        if rec.positions is not None:
            q, k, cache = seen.pop("q"), seen.pop("k"), seen.pop("cache", None)
            cache = getattr(cache, "self_attention_cache", cache)  # an encoder-decoder cache
            batch = q.shape[0]
            rows = q[torch.arange(batch, device=q.device), rec.positions].view(batch, -1, head_dim)
            keys = k.view(batch, k.shape[1], -1, head_dim).transpose(1, 2)  # (batch, kv heads, keys, d)
            cached, index = getattr(cache, "layers", None), getattr(attn, "layer_idx", None)
            if cached and index is not None and len(cached) > index and getattr(cached[index], "keys", None) is not None:
                keys = cached[index].keys  # after the update: the cached keys, then this call's
            if keys.shape[1] != rows.shape[1]:
                keys = keys.repeat_interleave(rows.shape[1] // keys.shape[1], dim=1)
            rec.attn_scores[layer] = realize(torch.einsum("bhd,bhkd->bhk", rows.float(), keys.float()) * scale)

    module.q_proj.register_forward_hook(keep("q"))
    module.k_proj.register_forward_hook(keep("k"))
    module.register_forward_pre_hook(keep_cache, with_kwargs=True)
    module.register_forward_hook(scores)


def _check_projection_scores(model, rec: Recorder, ids: torch.Tensor) -> None:
    """The hooked scores must give the model's own attention probabilities on the probe."""
    last = torch.full((ids.shape[0],), ids.shape[1] - 1, device=model.device)
    with torch.no_grad(), rec.record(last):
        attentions = model.base_model(ids, output_attentions=True).attentions
    if attentions is None or len(attentions) != len(rec.layer_of):
        raise UnsupportedModelError(f"{type(model).__name__}: cannot check the recorded scores against its attention")
    for layer, probs in enumerate(attentions):
        ok = torch.allclose(rec.attn_scores[layer].softmax(-1), probs[:, :, -1].float(), atol=1e-4)
        if not ok:
            raise UnsupportedModelError(
                f"{type(model).__name__}: scores from q_proj/k_proj do not reproduce the attention of "
                f"layer {layer} (rotary or other position terms inside attention?); the model must "
                "route attention through transformers' attention interface"
            )


def attach(model) -> Recorder:
    """Route the model's attention through the recorder, find its attention modules, hook them."""
    global _ACTIVE
    try:
        model.set_attn_implementation(CAPTURE_IMPLEMENTATION)
    except Exception as err:  # noqa: BLE001 - report which model refuses and why
        raise UnsupportedModelError(
            f"{type(model).__name__} does not route attention through transformers' attention "
            f"interface, so its pre-softmax scores cannot be recorded ({err})"
        ) from err
    for module in model.modules():  # a second attach of one model starts afresh
        if hasattr(module, "_icl_gd_recorder"):
            del module._icl_gd_recorder
    rec = Recorder()
    _ACTIVE = rec
    rec.probing = True
    probe = torch.arange(1, 5, device=model.device)[None] % model.config.vocab_size
    try:
        with torch.no_grad():
            model.base_model(probe)
    finally:
        rec.probing = False
        _ACTIVE = None
    n_layers = model.config.num_hidden_layers
    projection = not rec.layer_of and model.config._attn_implementation != CAPTURE_IMPLEMENTATION
    rec.shares_prefix = not projection
    if projection:  # eager-only attention that ignores the interface (XGLM): hook the projections
        try:
            blocks = list(decoder_layers(model))
        except UnsupportedModelError:
            blocks = []
        modules = [_projection_attention(block) for block in blocks]
        if blocks and all(m is not None for m in modules):
            for layer, module in enumerate(modules):
                rec.layer_of[id(module)] = layer
                _projection_hooks(rec, layer, module)
    if len(rec.layer_of) != n_layers:
        raise UnsupportedModelError(
            f"{type(model).__name__}: {len(rec.layer_of)} attention calls for {n_layers} layers; "
            "the workflow needs one self-attention module per layer, routed through transformers' "
            "attention interface or projecting q and k with q_proj/k_proj"
        )
    for module in model.modules():
        if id(module) in rec.layer_of:
            module._icl_gd_recorder = rec
            module.register_forward_hook(_attn_out_hook(rec, rec.layer_of[id(module)]))
    if projection:
        _check_projection_scores(model, rec, probe)
    return rec
