"""Record what the model computes at one position per example, without slowing attention down.

Two hook points per layer, named after TransformerLens' units:
- ``attn_out``: the attention module's output (after the output projection, before dropout and
  the residual add), read by a forward hook on the module;
- ``attn_scores``: the pre-softmax, scaled scores q.k * scaling of the recorded query row over
  every key, computed inside a registered attention function from the very query and key the
  model hands to its kernel (after projections, norms, rotary embeddings and the model's own
  scaling), then passed on to SDPA. Only the one row per example is computed: the full attention
  matrix never exists, and ``output_attentions`` (slow eager attention) is never needed.

XGLM (the reference model's architecture) computes eager attention inline instead of calling that
interface; ``attach`` gives each of its self-attention modules (on that model only) a forward that
does, and checks once, on a probe sequence, that it computes what the class's own forward does.

The attention computed here is the model's own, variants included: the model's masks (sliding
windows among them; the shared prefix applies each layer's window itself), soft-capping and
attention sinks (plain attention, as SDPA does neither), grouped-query attention, the call's own
scaling. ``attach`` refuses a model whose attention it cannot reproduce, naming why.
"""

from __future__ import annotations

import contextlib
import logging
import types

import torch
import torch.autograd.forward_ad as fwAD
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

from icl_gd.models.loading import UnsupportedModelError, output_logits

log = logging.getLogger(__name__)

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
        self.prefix: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.prefix_mode: str | None = None  # "store" while running the context, "use" after
        # layer -> the sliding window of that layer (a query at p sees keys p-W+1..p), or None
        self.window: dict[int, int | None] = {}
        self.probe_masks: dict[int, torch.Tensor | None] = {}  # what the model masked, while probing
        self.probe_kwargs: set[str] = set()  # attention arguments the model passed, while probing

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


def _softcap(scores: torch.Tensor, cap: float | None) -> torch.Tensor:
    """Gemma 2's logit soft-capping, tanh(s / c) * c; the scores as they are without a cap."""
    return scores if cap is None else torch.tanh(scores / cap) * cap


def _masked_scores(query, key, attention_mask, scale, softcap=None) -> torch.Tensor:
    """Float scores q.k * scale (soft-capped: tanh(s / c) * c, before the mask, as Gemma 2 does),
    masked: causal aligned to the last key unless a mask is given (boolean: True attends; float:
    added)."""
    scores = _softcap(torch.matmul(query, _repeat_kv(key, query.shape[1]).transpose(-1, -2)).float() * scale, softcap)
    if attention_mask is None:
        q_len, k_len = scores.shape[-2:]
        attention_mask = torch.ones(q_len, k_len, dtype=torch.bool, device=scores.device).tril(k_len - q_len)
    if attention_mask.dtype == torch.bool:
        return scores.masked_fill(~attention_mask, torch.finfo(torch.float32).min)
    return scores + attention_mask


def _softmax_with_sinks(scores: torch.Tensor, sinks: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the keys; attention sinks (GPT-OSS: one logit per head) join the denominator
    as one more key whose value is zero."""
    if sinks is None:
        return torch.softmax(scores, dim=-1)
    column = sinks.float().view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
    return torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]


def _math_attention(query, key, value, attention_mask, scaling, softcap=None, sinks=None):
    """Softmax attention in plain operations: for forward-mode AD (SDPA's CPU and flash kernels
    have no forward derivative), soft-capping and sinks (which SDPA does not do). Output laid out
    as SDPA's: (batch, queries, heads, d_head)."""
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    probs = _softmax_with_sinks(_masked_scores(query, key, attention_mask, scale, softcap), sinks).to(value.dtype)
    return torch.matmul(probs, _repeat_kv(value, query.shape[1])).transpose(1, 2).contiguous(), None


def _prefix_attention(
    query, key, value, prefix_keys, prefix_values, attention_mask, scaling, softcap=None, sinks=None, window=None
):
    """Softmax attention over [shared prefix; this chunk], the prefix held once (batch of one).

    The prefix part runs as one matrix product over all batch rows x queries, so its keys and
    values are never copied per sequence; the two parts are merged with a shared maximum. The
    chunk's queries sit right after the prefix (absolute positions n_prefix + i): with a sliding
    ``window`` W, prefix key j is seen by query i only where j > n_prefix + i - W (the chunk's
    own mask, built by the model, already holds the window among the chunk's keys).
    Output laid out as SDPA's: (batch, queries, heads, d_head).
    """
    batch, heads, q_len, d_head = query.shape
    value = _repeat_kv(value, heads)
    scale = d_head**-0.5 if scaling is None else scaling
    n_prefix = prefix_keys.shape[2]
    rows = query.transpose(0, 1).reshape(heads, batch * q_len, d_head)
    # the prefix scores are the largest tensor here and attention over them is memory-bound:
    # scale, cap, mask, shift and exponentiate them in place rather than through fresh copies
    s_prefix = torch.bmm(rows, prefix_keys[0].transpose(1, 2)).float().mul_(scale).view(heads, batch, q_len, -1)
    if softcap is not None:
        s_prefix.div_(softcap).tanh_().mul_(softcap)
    if window is not None and window < n_prefix + q_len:
        first_seen = torch.arange(q_len, device=query.device) + n_prefix - window + 1  # per query
        unseen = torch.arange(n_prefix, device=query.device) < first_seen[:, None]  # (q, prefix)
        s_prefix.masked_fill_(unseen, torch.finfo(torch.float32).min)
    s_chunk = _masked_scores(query, key, attention_mask, scale, softcap)  # (batch, heads, q, q)
    top = torch.maximum(s_prefix.amax(-1).transpose(0, 1), s_chunk.amax(-1)).unsqueeze(-1)  # (b, h, q, 1)
    if sinks is not None:
        sinks = sinks.float().view(1, -1, 1, 1)
        top = torch.maximum(top, sinks)
    e_prefix = s_prefix.sub_(top.transpose(0, 1)).exp_()  # (heads, batch, q, prefix)
    e_chunk = (s_chunk - top).exp()
    total = e_prefix.sum(-1).transpose(0, 1).unsqueeze(-1) + e_chunk.sum(-1, keepdim=True)
    if sinks is not None:
        total = total + (sinks - top).exp()
    from_prefix = torch.bmm(e_prefix.reshape(heads, batch * q_len, -1).to(value.dtype), prefix_values[0])
    from_prefix = from_prefix.view(heads, batch, q_len, d_head).transpose(0, 1)
    out = (from_prefix + torch.matmul(e_chunk.to(value.dtype), value)) / total.to(value.dtype)
    return out.transpose(1, 2).contiguous(), None


# Arguments of the attention interface that the functions here honour (softcap, s_aux) or that
# do not change what attention computes (the window is read from the model's own masks, see
# ``_find_windows``). Any other argument a model passes makes ``attach`` refuse it.
HANDLED_ARGUMENTS = {
    "softcap",
    "s_aux",
    "sliding_window",
    "position_ids",
    "use_cache",
    "output_router_logits",
    "cache_position",
}


def _capture_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None, s_aux=None, **kwargs
):
    # each attached module knows its own recorder, so several attached models do not mix up
    rec = getattr(module, "_icl_gd_recorder", None)
    if rec is None and _ACTIVE is not None and _ACTIVE.probing:
        layer = _ACTIVE.layer_of.setdefault(id(module), len(_ACTIVE.layer_of))
        _ACTIVE.probe_masks[layer] = attention_mask
        _ACTIVE.probe_kwargs.update(name for name, v in kwargs.items() if v is not None)
        _ACTIVE.probe_kwargs.update(name for name, v in (("softcap", softcap), ("s_aux", s_aux)) if v is not None)
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
        rec.attn_scores[layer] = realize(_softcap(scores, softcap))  # what the softmax sees, before any mask
    if prefix is not None:
        return _prefix_attention(
            query, key, value, *prefix, attention_mask, scaling, softcap, s_aux, rec.window.get(layer)
        )
    if softcap is not None or s_aux is not None or _is_dual(query) or _is_dual(key) or _is_dual(value):
        return _math_attention(query, key, value, attention_mask, scaling, softcap, s_aux)
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)


AttentionInterface.register(CAPTURE_IMPLEMENTATION, _capture_attention)
AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def _attn_out_hook(rec: Recorder, layer: int):
    def hook(module, args, output):
        if rec.positions is not None:
            out = output[0] if isinstance(output, tuple) else output
            rec.attn_out[layer] = realize(out[torch.arange(out.shape[0], device=out.device), rec.positions]).float()

    return hook


def _xglm_self_attention(self, hidden_states, past_key_values=None, attention_mask=None, cache=None, **kwargs):
    """``XGLMAttention.forward`` (transformers 5.x) for self-attention, with the softmax attention
    handed to ``_capture_attention`` the way OPT's forward (the same attention) hands it on.
    The key/value cache is ``cache`` from transformers 5.24 on, ``past_key_values`` before."""
    past_key_values = cache if cache is not None else past_key_values
    batch, length, _ = hidden_states.shape
    shape = (batch, length, -1, self.head_dim)
    # XGLM scales q before its product with k; the kernel then runs with scaling 1, so the recorded
    # scores are the very numbers XGLM's softmax sees
    query = (self.q_proj(hidden_states) * self.scaling).view(shape).transpose(1, 2)
    key = self.k_proj(hidden_states).view(shape).transpose(1, 2)
    value = self.v_proj(hidden_states).view(shape).transpose(1, 2)
    if past_key_values is not None:
        cache = getattr(past_key_values, "self_attention_cache", past_key_values)  # encoder-decoder cache
        key, value = cache.update(key, value, self.layer_idx)
    out, weights = _capture_attention(
        self, query, key, value, attention_mask, scaling=1.0, dropout=self.dropout if self.training else 0.0, **kwargs
    )
    return self.out_proj(out.reshape(batch, length, -1).contiguous()), weights


def _route_xglm(model) -> list[nn.Module]:
    """Route an XGLM model's self-attention through the recorder; its modules ([] if not XGLM).

    Instance by instance, so other XGLM models in the process keep the class's own forward."""
    from transformers.models.xglm.modeling_xglm import XGLMDecoderLayer

    modules = [layer.self_attn for layer in model.modules() if isinstance(layer, XGLMDecoderLayer)]
    for module in modules:
        module.forward = types.MethodType(_xglm_self_attention, module)
    if modules:  # the mask is then built for SDPA: none where causal alone does, the fast path
        model.config._attn_implementation = CAPTURE_IMPLEMENTATION
        log.info("%s: attention of %d layers re-routed through the recorder", type(model).__name__, len(modules))
    return modules


def _check_rerouted(model, rec: Recorder, modules: list[nn.Module], probe: torch.Tensor) -> None:
    """Re-routed attention must compute what the class's own (eager) forward computes on the same
    input: the probabilities of the recorded scores and the output, at the probe's last token."""
    inputs = {}

    def keep_input(module, args, kwargs):
        inputs[id(module)] = args[0] if args else kwargs["hidden_states"]

    handles = [module.register_forward_pre_hook(keep_input, with_kwargs=True) for module in modules]
    last = torch.full((probe.shape[0],), probe.shape[1] - 1, device=probe.device)
    try:
        with torch.no_grad(), rec.record(last):
            model.base_model(probe)
    finally:
        for handle in handles:
            handle.remove()
    for module in modules:
        layer, x = rec.layer_of[id(module)], inputs[id(module)]
        n = x.shape[1]
        causal = torch.full((n, n), torch.finfo(x.dtype).min, dtype=x.dtype, device=x.device).triu(1)
        with torch.no_grad():
            out, probs = type(module).forward(module, x, attention_mask=causal[None, None])
        # float32 agrees to rounding; half precision to its own resolution (eager softmaxes in it)
        tol = max(1e-4, 8 * torch.finfo(x.dtype).eps)
        out = out[:, -1].float()
        same = torch.allclose(rec.attn_scores[layer].softmax(-1), probs[:, :, -1].float(), rtol=0, atol=tol)
        same = same and torch.allclose(rec.attn_out[layer], out, rtol=0, atol=tol * float(out.abs().max()))
        if not same:
            raise UnsupportedModelError(
                f"{type(model).__name__}: the recorder's forward for {type(module).__name__} does not "
                f"reproduce the attention of layer {layer}; this transformers version changed it, so "
                "_xglm_self_attention in capture.py must follow"
            )


def _inline_attention_error(model) -> UnsupportedModelError:
    config = model.config
    alibi = config.model_type in ("bloom", "mpt") or bool(getattr(config, "alibi", False))
    what = "ALiBi attention (a position bias inside its own attention code)" if alibi else "attention"
    return UnsupportedModelError(
        f"{type(model).__name__} ({config.model_type}) computes its {what} inline, not through "
        "transformers' attention interface, so the workflow can neither record its pre-softmax scores "
        "nor run its shared-prefix and finetuning paths exactly; supported families are listed in "
        "docs/models.md"
    )


def _probe_window(config) -> int | None:
    """The window the attach probe runs with: the model's own, cut to 2 so that a 4-token probe
    shows which layers slide (the mask functions read ``config.sliding_window`` when called)."""
    window = getattr(config, "sliding_window", None)
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return min(window, 2)
    return None


def _find_windows(model, rec: Recorder, probe_window: int | None, length: int) -> dict[int, int | None]:
    """Each layer's sliding window, read from the mask the model built for it on the probe:
    a layer whose last query sees ``probe_window`` keys slides (with the config's window), one
    that sees all keys does not; any other pattern (chunked or bidirectional attention) is refused."""
    windows = {}
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    sliding = causal.triu(1 - probe_window) if probe_window else None
    for layer, mask in rec.probe_masks.items():
        if mask is None:
            windows[layer] = None
            continue
        seen = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
        seen = seen[0, 0].cpu() if seen.dim() == 4 else seen.cpu()
        if torch.equal(seen, causal):
            windows[layer] = None
        elif sliding is not None and torch.equal(seen, sliding):
            windows[layer] = model.config.sliding_window
        else:
            raise UnsupportedModelError(
                f"{type(model).__name__}: layer {layer} masks attention in a pattern that is neither causal "
                "nor a causal sliding window (chunked or bidirectional attention?); the shared-prefix path "
                "cannot reproduce it"
            )
    return windows


def _check_head(model, probe: torch.Tensor) -> None:
    """The logits the workflow computes (``models.output_logits`` of the last hidden state) must be
    the model's own: a family that transforms its logits in a way we do not know is refused."""
    with torch.no_grad():
        own = model(input_ids=probe).logits[:, -1].float()
        ours = output_logits(model, model.base_model(probe).last_hidden_state[:, -1]).float()
    tol = max(1e-4, 8 * torch.finfo(model.dtype).eps) * max(1.0, float(own.abs().max()))
    if not torch.allclose(ours, own, rtol=0, atol=tol):
        raise UnsupportedModelError(
            f"{type(model).__name__} ({model.config.model_type}): its logits are not its output embedding "
            "of the last hidden state, nor one of the post-processings models.output_logits knows "
            "(final soft-capping, logit scale or scaling); label log-probabilities would be wrong"
        )


def attach(model) -> Recorder:
    """Route the model's attention through the recorder, find its attention modules and each
    layer's sliding window, hook them; refuse, naming what is missing, a model whose attention
    the recorder cannot reproduce exactly."""
    global _ACTIVE
    try:
        model.set_attn_implementation(CAPTURE_IMPLEMENTATION)
    except Exception as err:  # noqa: BLE001 - report which model refuses and why
        raise UnsupportedModelError(
            f"{type(model).__name__} does not route attention through transformers' attention "
            f"interface, so its pre-softmax scores cannot be recorded ({err})"
        ) from err
    # a model whose attention ignores the interface keeps its own (transformers only warns)
    rerouted = [] if model.config._attn_implementation == CAPTURE_IMPLEMENTATION else _route_xglm(model)
    if model.config._attn_implementation != CAPTURE_IMPLEMENTATION:
        raise _inline_attention_error(model)
    for module in model.modules():  # a second attach of one model starts afresh
        if hasattr(module, "_icl_gd_recorder"):
            del module._icl_gd_recorder
    rec = Recorder()
    _ACTIVE = rec
    rec.probing = True
    length = 4
    probe = torch.arange(1, length + 1, device=model.device)[None] % model.config.vocab_size
    window, probe_window = getattr(model.config, "sliding_window", None), _probe_window(model.config)
    try:
        if probe_window is not None:
            model.config.sliding_window = probe_window
        with torch.no_grad():
            model.base_model(probe)
    finally:
        if probe_window is not None:
            model.config.sliding_window = window
        rec.probing = False
        _ACTIVE = None
    n_layers = model.config.num_hidden_layers
    if len(rec.layer_of) != n_layers:
        raise UnsupportedModelError(
            f"{type(model).__name__}: {len(rec.layer_of)} attention calls for {n_layers} layers; "
            "the workflow needs one self-attention module per layer that calls transformers' "
            "attention interface (or is XGLM's, which the recorder re-routes)"
        )
    unknown = sorted(rec.probe_kwargs - HANDLED_ARGUMENTS)
    if unknown:
        raise UnsupportedModelError(
            f"{type(model).__name__} passes its attention the argument(s) {unknown}, which the recorder "
            f"does not implement (it honours {sorted(HANDLED_ARGUMENTS)}); its attention would differ"
        )
    rec.window = _find_windows(model, rec, probe_window, length)
    rec.probe_masks = {}
    for module in model.modules():
        if id(module) in rec.layer_of:
            module._icl_gd_recorder = rec
            module.register_forward_hook(_attn_out_hook(rec, rec.layer_of[id(module)]))
    if rerouted:
        _check_rerouted(model, rec, rerouted, probe)
    _check_head(model, probe)
    return rec
