"""Finetuning the attention keys and values: vanilla GD and layer-causal GD (PROTOCOL.md).

Both are plain SGD (no momentum, no weight decay, constant learning rate), batch size 1, one step
per demonstration, on the K and V projections only (weights and biases, every layer).
- ``gd``: next-token cross-entropy of the model's output, averaged over the sequence;
- ``lcgd``: every block's input is detached and the loss is the sum over blocks l of the
  cross-entropy of U(h_l), U the frozen final norm + unembedding, h_l block l's output; each
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

from .models import UnsupportedModelError, decoder_layers, final_norm

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
                elif leaf == "c_attn":
                    mask = _fused_gpt2_mask(param, d_model)
                elif leaf == "query_key_value":
                    mask = _fused_neox_mask(param, model.config.num_attention_heads)
                else:
                    continue
                found.append(KVParameter(layer, name, param, mask, module, p_name))
        if len(found) == before:
            raise UnsupportedModelError(
                f"{type(model).__name__}: found no key/value projection in block {layer} "
                "(looked for k_proj/v_proj, key/value, c_attn, query_key_value)"
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
    """Copies of the K/V parameters: theta0 of a linearized model."""
    return [item.param.detach().clone() for item in kv_parameters(model)]


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
def linearized(model, base: list[torch.Tensor]):
    """While inside, the model computes its first-order expansion around the K/V values ``base``
    in the direction of its current ones: each tensor it produces is a forward-mode dual whose
    primal + tangent is the linearized value (``capture.realize`` reads it)."""
    kv = kv_parameters(model)
    implementation = model.config._attn_implementation
    fused = implementation in NO_FORWARD_AD  # these kernels have no forward derivative
    if fused:
        model.set_attn_implementation("eager")
    try:
        with fwAD.dual_level(), torch.no_grad():
            duals = [fwAD.make_dual(b, item.param.detach() - b) for item, b in zip(kv, base)]
            with substituted(kv, duals):
                yield
    finally:
        if fused:
            model.set_attn_implementation(implementation)


def _linearized_loss_and_grads(model, ids, kv, base):
    with linearized(model, base):
        primal, tangent = fwAD.unpack_dual(model(input_ids=ids).logits)
        logits = primal + tangent
    logits = logits.detach().requires_grad_()
    loss = _next_token_loss(logits, ids)
    (dloss,) = torch.autograd.grad(loss, logits)
    leaves = [b.detach().requires_grad_() for b in base]
    with substituted(kv, leaves):  # J(theta0)^T dloss: a backward pass at theta0
        grads = torch.autograd.grad(model(input_ids=ids).logits, leaves, grad_outputs=dloss)
    return loss.detach(), grads


def _next_token_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())


def sequence_loss(model, ids: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "gd":
        return _next_token_loss(model(input_ids=ids).logits, ids)
    if kind == "lcgd":
        unembed, norm = model.get_output_embeddings(), final_norm(model)
        with layer_causal(model) as outputs:
            model.base_model(input_ids=ids)
        return sum(_next_token_loss(unembed(norm(h)), ids) for h in outputs)
    raise ValueError(f"unknown training kind {kind!r}")


def finetune(model, sequences: list[list[int]], *, lr: float, kind: str, clip_grad_norm: float | None = None, base: list[torch.Tensor] | None = None, progress=None):
    """Train in place, one SGD step per sequence; returns per-step loss, per-layer K/V gradient
    norms (before clipping) and whether the step was skipped for non-finite gradients.

    ``linearized`` expands around ``base`` (default: the K/V values before training)."""
    kv = kv_parameters(model)
    if kind == "linearized" and base is None:
        base = snapshot(model)
    n_layers = model.config.num_hidden_layers
    for param in model.parameters():
        param.requires_grad_(False)
    for item in kv:
        item.param.requires_grad_(True)
    model.eval()  # dropout off: the reference trained with dropout 0
    losses, norms, skipped = [], [], []
    for seq in sequences:
        ids = torch.tensor([seq], device=model.device)
        if kind == "linearized":
            loss, grads = _linearized_loss_and_grads(model, ids, kv, base)
        else:
            loss = sequence_loss(model, ids, kind)
            grads = torch.autograd.grad(loss, [item.param for item in kv])
        grads = [g if item.mask is None else torch.where(item.mask, g, torch.zeros_like(g)) for item, g in zip(kv, grads)]
        layer_sq = torch.zeros(n_layers, dtype=torch.float64)
        for item, g in zip(kv, grads):
            layer_sq[item.layer] += g.double().pow(2).sum().cpu()
        total = float(layer_sq.sum().sqrt())
        bad = not np.isfinite(total)
        if bad:
            log.warning("step %d: non-finite K/V gradient, step skipped", len(losses))
        else:
            scale = 1.0
            if clip_grad_norm is not None and total > clip_grad_norm:
                scale = clip_grad_norm / total
            with torch.no_grad():
                for item, g in zip(kv, grads):
                    item.param.sub_(g.to(item.param.dtype), alpha=lr * scale)
        losses.append(loss.item())
        norms.append(layer_sq.sqrt().numpy())
        skipped.append(bad)
        if progress is not None:
            progress.update(1)
    for param in model.parameters():
        param.requires_grad_(False)
    return {"loss": np.array(losses), "grad_norm": np.stack(norms), "skipped": np.array(skipped)}
