"""Finetuning the attention keys and values: vanilla GD and layer-causal GD (docs/protocol.md).

Both are plain SGD (no momentum, no weight decay, constant learning rate), batch size 1, one step
per demonstration, on the K and V projections only (weights and biases, every layer).
- ``gd``: next-token cross-entropy of the model's output, averaged over the sequence;
- ``lcgd``: every block's input is detached and the loss is the sum over blocks l of the
  cross-entropy of U(h_l), U the frozen final norm + output head, h_l block l's output; each
  block therefore gets gradient from its own layer's loss only.
- ``linearized`` (paper 002): the loss of the first-order Taylor expansion of the model around
  its pretrained K/V values theta0, f_lin(theta) = f(theta0) + J(theta0)(theta - theta0). Each
  step runs one forward-mode pass (a Jacobian-vector product, never the Jacobian) for f_lin, and
  one backward pass at theta0 for J^T times the loss gradient. At theta = theta0 it is GD.
Optionally the K/V gradient is clipped to a global l2 norm (paper 003, Table 3).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import numpy as np
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

from .models import UnsupportedModelError, decoder_layers, final_norm, output_logits

log = logging.getLogger(__name__)

# Attention kernels without forward-mode derivatives; a linearized model runs eager attention
# instead (the recording attention of ``capture`` handles dual tensors itself).
NO_FORWARD_AD = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")


@dataclass
class KVParameter:
    layer: int
    name: str
    param: torch.nn.Parameter
    mask: torch.Tensor | None  # True where the entry belongs to K or V (fused projections)
    module: torch.nn.Module | None = None  # the module holding ``param`` as ``attr``
    attr: str = ""


def _fused_gpt2_mask(param: torch.Tensor, d_model: int) -> torch.Tensor:
    # GPT-2's Conv1D c_attn maps d_model -> [Q | K | V] along its last dimension.
    mask = torch.zeros_like(param, dtype=torch.bool)
    mask[..., d_model:] = True
    return mask


def _fused_rows_mask(param: torch.Tensor, q_size: int) -> torch.Tensor:
    # a Linear whose output rows are [Q | K | V]: everything after the first q_size rows
    mask = torch.zeros_like(param, dtype=torch.bool)
    mask[q_size:] = True
    return mask


def _fused_neox_mask(param: torch.Tensor, n_heads: int) -> torch.Tensor:
    # GPT-NeoX's query_key_value output is laid out per head as [q | k | v].
    mask = torch.zeros_like(param, dtype=torch.bool)
    view = mask.view(n_heads, 3, -1, *param.shape[1:])
    view[:, 1:] = True
    return mask


def kv_parameters(model) -> list[KVParameter]:
    """Every layer's K and V projection parameters, with a mask where they are fused with Q."""
    d_model = model.config.hidden_size
    found = []
    for layer, block in enumerate(decoder_layers(model)):
        before = len(found)
        for mod_name, module in block.named_modules():
            leaf = mod_name.rsplit(".", 1)[-1]
            for p_name, param in module.named_parameters(recurse=False):
                name = f"layer{layer}.{mod_name}.{p_name}"
                if leaf in ("k_proj", "v_proj", "key", "value"):
                    mask = None
                elif leaf == "c_attn" and type(module).__name__ == "Conv1D":
                    mask = _fused_gpt2_mask(param, d_model)
                elif leaf == "c_attn" and getattr(model.config, "multi_query", False):
                    mask = _fused_rows_mask(param, d_model)  # GPT-BigCode, multi-query: [Q | K | V]
                elif leaf in ("query_key_value", "c_attn"):  # per head [q | k | v]: NeoX, BigCode
                    mask = _fused_neox_mask(param, model.config.num_attention_heads)
                elif leaf == "qkv_proj":  # Phi-3: [Q | K | V], K and V of the key/value heads
                    head_dim = getattr(model.config, "head_dim", None) or d_model // model.config.num_attention_heads
                    mask = _fused_rows_mask(param, model.config.num_attention_heads * head_dim)
                else:
                    continue
                found.append(KVParameter(layer, name, param, mask, module, p_name))
        if len(found) == before:
            raise UnsupportedModelError(
                f"{type(model).__name__}: found no key/value projection in block {layer} "
                "(looked for k_proj/v_proj, key/value, c_attn, query_key_value, qkv_proj)"
            )
    return found


@contextlib.contextmanager
def layer_causal(model):
    """Detach every block's input; collect every block's output (in order) while inside."""
    outputs: list[torch.Tensor] = []

    def detach_input(module, args, kwargs):
        if args:
            return (args[0].detach(), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": kwargs["hidden_states"].detach()}

    def keep_output(module, args, kwargs, output):
        outputs.append(output[0] if isinstance(output, tuple) else output)

    handles = []
    for block in decoder_layers(model):
        handles.append(block.register_forward_pre_hook(detach_input, with_kwargs=True))
        handles.append(block.register_forward_hook(keep_output, with_kwargs=True))
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


def snapshot(model) -> list[torch.Tensor]:
    """Float32 copies of the K/V parameters: theta0 of a linearized model."""
    return [item.param.detach().float().clone() for item in kv_parameters(model)]


def master_weights(model) -> list[torch.Tensor]:
    """The float32 values of the K/V parameters that training updates (``finetune``'s ``master``).

    A float32 parameter is its own master (no copy). A half-precision one gets a float32 copy: an
    SGD step below the weight's rounding step (bfloat16 keeps 8 bits) would otherwise be lost or
    distorted, and the protocol's learning rates make many such steps. The model's own parameter
    then holds the master rounded, as fairseq's fp16 optimiser (the reference's) left it."""
    return [
        item.param.detach() if item.param.dtype == torch.float32 else item.param.detach().float().clone()
        for item in kv_parameters(model)
    ]


@contextlib.contextmanager
def substituted(kv: list[KVParameter], tensors: list[torch.Tensor]):
    """While inside, the K/V modules compute with ``tensors`` in place of their parameters."""
    saved = [item.module._parameters[item.attr] for item in kv]
    for item, tensor in zip(kv, tensors):
        item.module._parameters[item.attr] = tensor
    try:
        yield
    finally:
        for item, param in zip(kv, saved):
            item.module._parameters[item.attr] = param


@contextlib.contextmanager
def linearized(model, base: list[torch.Tensor], current: list[torch.Tensor] | None = None):
    """While inside, the model computes its first-order expansion around the K/V values ``base``
    in the direction of ``current`` (default: its parameters; give the float32 masters of a
    half-precision model, so that the direction is not the difference of two rounded weights):
    each tensor it produces is a forward-mode dual whose primal + tangent is the linearized value
    (``capture.realize`` reads it)."""
    kv = kv_parameters(model)
    if current is None:
        current = [item.param.detach() for item in kv]
    implementation = model.config._attn_implementation
    fused = implementation in NO_FORWARD_AD  # these kernels have no forward derivative
    experts = getattr(model.config, "_experts_implementation", None)
    grouped = experts not in (None, "eager")  # nor have mixture-of-experts' grouped products
    if fused:
        model.set_attn_implementation("eager")
    if grouped:
        model.set_experts_implementation("eager")
    try:
        with fwAD.dual_level(), torch.no_grad():
            duals = [
                fwAD.make_dual(b.to(item.param.dtype), (c.float() - b.float()).to(item.param.dtype))
                for item, b, c in zip(kv, base, current)
            ]
            with substituted(kv, duals):
                yield
    finally:
        if fused:
            model.set_attn_implementation(implementation)
        if grouped:
            model.set_experts_implementation(experts)


def _linearized_loss_and_grads(model, ids, kv, base, current, loss_scale):
    with linearized(model, base, current):
        primal, tangent = fwAD.unpack_dual(model(input_ids=ids).logits)
        logits = primal + tangent
    logits = logits.detach().requires_grad_()
    loss = _next_token_loss(logits, ids)
    (dloss,) = torch.autograd.grad(loss * loss_scale, logits)
    leaves = [b.to(item.param.dtype).requires_grad_() for item, b in zip(kv, base)]
    with substituted(kv, leaves):  # J(theta0)^T dloss: a backward pass at theta0
        grads = torch.autograd.grad(model(input_ids=ids).logits, leaves, grad_outputs=dloss)
    return loss.detach(), grads


def _next_token_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())


def sequence_loss(model, ids: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "gd":
        return _next_token_loss(model(input_ids=ids).logits, ids)
    if kind == "lcgd":
        norm = final_norm(model)
        with layer_causal(model) as outputs:
            model.base_model(input_ids=ids)
        # every block's output through the frozen head at once (one product, not one a layer);
        # the mean over layers x tokens, times the layers, is the sum of the per-layer means
        logits = output_logits(model, norm(torch.cat(outputs)))  # (layers, tokens, vocab)
        return _next_token_loss(logits, ids.expand(len(outputs), -1)) * len(outputs)
    raise ValueError(f"unknown training kind {kind!r}")


# float16 gradients underflow below 6e-8: the loss is scaled up before the backward pass and the
# gradients down after it, in float32. The reference scaled dynamically (fairseq: start 4, doubled
# every 256 clean steps) and skipped a step that overflowed; here an overflowing step is redone at
# half the scale, so no demonstration is lost, and only a step still non-finite unscaled is skipped.
FLOAT16_LOSS_SCALE = 2.0**16


def finetune(model, sequences: list[list[int]], *, lr: float, kind: str, clip_grad_norm: float | None = None, base: list[torch.Tensor] | None = None, master: list[torch.Tensor] | None = None, progress=None):
    """Train in place, one SGD step per sequence; returns per-step loss, per-layer K/V gradient
    norms (before clipping) and whether the step was skipped for non-finite gradients.

    The steps update float32 ``master`` weights (default: ``master_weights(model)``; pass your own
    to keep using them afterwards, e.g. for a linearized model's direction), and each step leaves
    the model's parameters at their value in the model's dtype. On a GPU the steps run without
    waiting for it (no host synchronisation per step; float16's overflow check excepted).
    ``linearized`` expands around ``base`` (default: the K/V values before training)."""
    kv = kv_parameters(model)
    if kind == "linearized" and base is None:
        base = snapshot(model)
    if master is None:
        master = master_weights(model)
    halved = [(item, m) for item, m in zip(kv, master) if m.data_ptr() != item.param.data_ptr()]  # copies
    device = model.device
    layer_of = torch.tensor([item.layer for item in kv], device=device)
    masks = [item.mask.to(device) if item.mask is not None else None for item in kv]
    loss_scale = FLOAT16_LOSS_SCALE if any(item.param.dtype == torch.float16 for item in kv) else 1.0
    for param in model.parameters():
        param.requires_grad_(False)
    for item in kv:
        item.param.requires_grad_(True)
    model.eval()  # dropout off: the reference trained with dropout 0
    # every sequence moves to the device once, not with a blocking copy per step
    flat = torch.tensor([t for seq in sequences for t in seq], device=device)
    ends = np.cumsum([len(seq) for seq in sequences]).tolist()
    lr_on_device = torch.tensor(lr, device=device, dtype=torch.float64)  # once, not a copy per step
    losses, norms, finite = [], [], []
    for start, end in zip([0] + ends[:-1], ends):
        ids = flat[start:end][None]
        while True:
            if kind == "linearized":
                loss, grads = _linearized_loss_and_grads(model, ids, kv, base, master, loss_scale)
            else:
                loss = sequence_loss(model, ids, kind)
                grads = torch.autograd.grad(loss * loss_scale if loss_scale != 1.0 else loss, [item.param for item in kv])
            grads = [g.float() for g in grads]
            if loss_scale != 1.0:
                torch._foreach_mul_(grads, 1.0 / loss_scale)
            grads = [g if mask is None else torch.where(mask, g, 0.0) for g, mask in zip(grads, masks)]
            param_sq = torch.stack(torch._foreach_norm(grads)).double().square()
            layer_sq = torch.zeros(model.config.num_hidden_layers, dtype=torch.float64, device=device)
            layer_sq.index_add_(0, layer_of, param_sq)
            total = layer_sq.sum().sqrt()
            ok = torch.isfinite(total)
            if loss_scale <= 1.0 or bool(ok):
                break
            loss_scale /= 2  # float16 overflow: redo the step at half the scale
            log.info("step %d: float16 gradients overflowed; loss scale now %g", len(losses), loss_scale)
        # a non-finite step is skipped without asking the GPU: its gradients count as zero
        factor = torch.where(ok, lr_on_device, 0.0)
        if clip_grad_norm is not None:
            factor = factor * torch.clamp(clip_grad_norm / total, max=1.0)
        grads = [torch.where(ok, g, 0.0) for g in grads]
        torch._foreach_mul_(grads, factor.float())
        with torch.no_grad():
            torch._foreach_sub_(master, grads)
            if halved:
                torch._foreach_copy_([item.param for item, _ in halved], [m for _, m in halved])
        losses.append(loss.detach().double())
        norms.append(layer_sq.sqrt())
        finite.append(ok)
        if progress is not None:
            progress.update(1)
    for param in model.parameters():
        param.requires_grad_(False)
    skipped = ~torch.stack(finite).cpu().numpy() if finite else np.zeros(0, bool)
    for step in np.flatnonzero(skipped):
        log.warning("step %d: non-finite K/V gradient, step skipped", step)
    return {
        "loss": torch.stack(losses).cpu().numpy() if losses else np.zeros(0),
        "grad_norm": torch.stack(norms).cpu().numpy() if norms else np.zeros((0, model.config.num_hidden_layers)),
        "skipped": skipped,
    }
