"""Finetuning the attention keys and values: vanilla GD and layer-causal GD (docs/protocol.md).

Both are plain SGD (no momentum, no weight decay, constant learning rate), batch size 1, one step
per demonstration, on the K and V projections only (weights and biases, every layer).
- ``gd``: next-token cross-entropy of the model's output, averaged over the sequence;
- ``lcgd``: every block's input is detached and the loss is the sum over blocks l of the
  cross-entropy of U(h_l), U the frozen final norm + output head, h_l block l's output; each
  block therefore gets gradient from its own layer's loss only. The (layers x tokens) rows go
  through the head a chunk at a time, the gradient of the cross-entropy written by hand
  (``head_cross_entropy``): two products with the head per row, no (rows, vocab) tensor kept.
- ``linearized`` (paper 002): the loss of the first-order Taylor expansion of the model around
  its pretrained K/V values theta0, f_lin(theta) = f(theta0) + J(theta0)(theta - theta0). Each
  step runs one forward pass carrying forward-mode tangents (a Jacobian-vector product, never the
  Jacobian) for f_lin, whose primal, the model at theta0, is recorded for one backward pass: J^T
  times the loss gradient. At theta = theta0 it is GD.
Optionally the K/V gradient is clipped to a global l2 norm (paper 003, Table 3).
"""

from __future__ import annotations

import contextlib
import logging
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

from icl_gd.models.loading import (
    UnsupportedModelError,
    apply_logit_postprocessing,
    decoder_layers,
    final_norm,
    logit_postprocessing,
    output_logits,
)

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


class _Linear(torch.autograd.Function):
    """``F.linear`` whose forward-mode derivative multiplies only by the tangents there are:
    torch's own (2.x) materialises a zero tangent for a weight that has none and multiplies by it,
    one more product the size of the layer's and a weight-sized copy in every layer, most of a
    linearized step's tangent pass. Backward as ``F.linear``'s."""

    @staticmethod
    def forward(x, weight, bias):
        return F.linear(x, weight, bias)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias = inputs
        ctx.save_for_backward(x, weight)
        ctx.save_for_forward(x, weight)
        ctx.set_materialize_grads(False)  # an input without a tangent (or gradient) comes as None

    @staticmethod
    def jvp(ctx, x_t, weight_t, bias_t):
        x, weight = ctx.saved_tensors
        with torch.no_grad():  # the tangent is not differentiated backward: record nothing
            # a tangent in another dtype than its primal is cast to it: on CUDA, layer norm's
            # forward derivative leaves a half-precision input's tangent in float32 (GPT-2's ln_2 ->
            # mlp.c_fc), which a half-precision weight cannot multiply
            x_t, weight_t, bias_t = (
                t.to(p.dtype) if t is not None and t.dtype != p.dtype else t
                for t, p in ((x_t, x), (weight_t, weight), (bias_t, weight))
            )
            out = F.linear(x_t, weight) if x_t is not None else None
            if weight_t is not None:
                term = F.linear(x, weight_t)
                out = term if out is None else out.add_(term)
            if bias_t is not None:
                out = bias_t.expand(*x.shape[:-1], -1).clone() if out is None else out.add_(bias_t)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        if grad is None:
            return None, None, None
        flat = grad.reshape(-1, grad.shape[-1])
        return (
            grad @ weight if ctx.needs_input_grad[0] else None,
            flat.t() @ x.reshape(-1, x.shape[-1]) if ctx.needs_input_grad[1] else None,
            flat.sum(0) if ctx.needs_input_grad[2] else None,
        )


class _LayerNorm(torch.autograd.Function):
    """``nn.LayerNorm`` whose forward-mode derivative is the closed form for the input's tangent
    (its weight and bias, frozen, have none): g * rstd * (t - mean(t) - xhat * mean(t * xhat)), in
    float32 at least and returned in the input's dtype. Torch's own decomposes into ~110 operations a layer
    norm, a fifth of a linearized GPT-2 step's. Forward and backward are torch's own kernels."""

    @staticmethod
    def forward(ctx, x, weight, bias, shape, eps):
        out, mean, rstd = torch.native_layer_norm(x, shape, weight, bias, eps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        ctx.save_for_forward(x, weight, bias, mean, rstd)
        ctx.shape = shape
        ctx.set_materialize_grads(False)
        return out

    @staticmethod
    def jvp(ctx, x_t, weight_t, bias_t, *_):
        if x_t is None:
            return None
        x, weight, _, mean, rstd = ctx.saved_tensors
        with torch.no_grad():
            dims = tuple(range(-len(ctx.shape), 0))
            wide = torch.promote_types(x.dtype, torch.float32)
            xhat = (x.to(wide) - mean) * rstd
            t = x_t.to(wide)
            t = t - t.mean(dims, keepdim=True)
            t = (t - xhat * (t * xhat).mean(dims, keepdim=True)) * rstd
            return (t if weight is None else t * weight).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        if grad is None:
            return None, None, None, None, None
        x, weight, bias, mean, rstd = ctx.saved_tensors
        need = [ctx.needs_input_grad[0], weight is not None and ctx.needs_input_grad[1]]
        need.append(bias is not None and ctx.needs_input_grad[2])
        grads = torch.ops.aten.native_layer_norm_backward(grad, x, ctx.shape, mean, rstd, weight, bias, need)
        return (*grads, None, None)


class _Elementwise(torch.autograd.Function):
    """An elementwise activation ``fn`` whose derivative, one number an entry, is taken once by a
    backward pass through ``fn`` and multiplies the tangent (forward mode) and the gradient
    (backward): transformers' activations are written as several operations (GPT-2's GELU: seven),
    each of which forward mode would otherwise differentiate on its own (~180 operations a layer)."""

    @staticmethod
    def forward(ctx, x, fn):
        ctx.fn = fn
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return fn(x)

    @staticmethod
    def _slope(ctx):
        if getattr(ctx, "slope", None) is None:
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                leaf = x.detach().requires_grad_()
                (ctx.slope,) = torch.autograd.grad(ctx.fn(leaf), leaf, torch.ones_like(leaf))
        return ctx.slope

    @staticmethod
    def jvp(ctx, x_t, _):
        return None if x_t is None else x_t * _Elementwise._slope(ctx).to(x_t.dtype)

    @staticmethod
    def backward(ctx, grad):
        return (None if grad is None else grad * _Elementwise._slope(ctx)), None


def _linear_forward(module, x):
    if type(module).__name__ == "Conv1D":  # GPT-2: weight (in, out)
        return _Linear.apply(x, module.weight.t(), module.bias)
    return _Linear.apply(x, module.weight, module.bias)


def _layer_norm_forward(module, x):
    return _LayerNorm.apply(x, module.weight, module.bias, module.normalized_shape, module.eps)


def _activation_forward(module, x):
    return _Elementwise.apply(x, type(module).forward.__get__(module))


def _lean_forward(module):
    """The forward that ``_lean_tangents`` gives ``module``, or None: linear layers (``nn.Linear``,
    GPT-2's ``Conv1D``), ``nn.LayerNorm`` and transformers' activations (elementwise, without
    parameters)."""
    kind = type(module)
    if kind is torch.nn.Linear or kind.__name__ == "Conv1D":
        return _linear_forward
    if kind is torch.nn.LayerNorm:
        return _layer_norm_forward
    if kind.__module__ == "transformers.activations" and next(module.parameters(), None) is None:
        return _activation_forward
    return None


@contextlib.contextmanager
def _lean_tangents(model):
    """While inside, the model's linear layers, layer norms and activations compute their forward-mode
    derivatives in closed form (``_Linear``, ``_LayerNorm``, ``_Elementwise``); a module whose forward
    is already replaced (hooks of accelerate, ...) is left alone."""
    patched = []
    for module in model.modules():
        forward = _lean_forward(module)
        if forward is not None and "forward" not in vars(module):
            module.forward = forward.__get__(module)
            patched.append(module)
    try:
        yield
    finally:
        for module in patched:
            del module.forward


@contextlib.contextmanager
def linearized(
    model, base: list[torch.Tensor], current: list[torch.Tensor] | None = None, kv: list[KVParameter] | None = None
):
    """While inside, the model computes its first-order expansion around the K/V values ``base``
    in the direction of ``current`` (default: its parameters; give the float32 masters of a
    half-precision model, so that the direction is not the difference of two rounded weights):
    each tensor it produces is a forward-mode dual whose primal + tangent is the linearized value
    (``capture.realize`` reads it). ``kv``: the model's ``kv_parameters``, where the caller has them
    (finding them again builds the fused projections' masks: ~1000 operations a step)."""
    kv = kv_parameters(model) if kv is None else kv
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
        with fwAD.dual_level():
            # a base that requires grad (training's) stays in the graph: each dual is a view of it
            with torch.set_grad_enabled(any(b.requires_grad for b in base)):
                duals = [
                    fwAD.make_dual(b.to(item.param.dtype), (c.float() - b.detach().float()).to(item.param.dtype))
                    for item, b, c in zip(kv, base, current)
                ]
            with torch.no_grad(), substituted(kv, duals), _lean_tangents(model):
                yield
    finally:
        if fused:
            model.set_attn_implementation(implementation)
        if grouped:
            model.set_experts_implementation(experts)


def _linearized_loss_and_grads(model, ids, kv, base, current, loss_scale):
    # One forward pass: its tangents are the linear model's change J(theta0)(theta - theta0), and its
    # primal, f(theta0), is recorded for the backward pass that gives J(theta0)^T dloss (the primal
    # ops of a dual pass are the plain pass at theta0: no second forward)
    leaves = [b.to(item.param.dtype).detach().requires_grad_() for item, b in zip(kv, base)]
    with linearized(model, leaves, current, kv), torch.enable_grad():
        primal, tangent = fwAD.unpack_dual(model(input_ids=ids).logits)
        logits = (primal + tangent).detach().requires_grad_()
    with torch.enable_grad():  # outside the dual level: the graph's saved tensors are plain again
        loss = _next_token_loss(logits, ids)
        (dloss,) = torch.autograd.grad(loss * loss_scale, logits)
        grads = torch.autograd.grad(primal, leaves, grad_outputs=dloss)
    return loss.detach(), grads


def _next_token_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())


# The bytes of float32 logits that layer-causal GD's head holds at once: it projects its
# (layers x tokens) rows through the vocabulary this many at a time. SmolLM2 (49152 words): 341
# rows a chunk, of the 1170 of a 40-token demonstration, whose whole (rows, vocab) block is 230 MB
# (the unchunked formula kept several such tensors for its backward: ~0.7 GB at its peak). On 2
# CPU cores a step takes 4% less time with 682-row chunks, 11% more with 85-row ones.
HEAD_CHUNK_BYTES = 64 * 2**20


def linear_head(model) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The output embedding's (weight, bias) where it is a plain ``nn.Linear`` with no hooks (what
    ``head_cross_entropy`` computes by hand), else None (the generic path then runs the module)."""
    head = model.get_output_embeddings()
    if (
        type(head) is not torch.nn.Linear
        or head._forward_hooks
        or head._forward_pre_hooks
        or torch.nn.modules.module._global_forward_hooks
        or torch.nn.modules.module._global_forward_pre_hooks
    ):
        return None
    return head.weight, head.bias


class _HeadCrossEntropy(torch.autograd.Function):
    """The summed cross-entropy of ``post(hidden @ weight.T + bias)`` against ``targets``, the
    logits computed ``chunk`` rows at a time and dropped after each chunk; the gradient with
    respect to ``hidden`` is computed in the same pass, ((softmax - onehot) * post') @ weight, and
    kept (one (rows, width) float32 tensor) for the backward pass, which only scales it. The head
    is frozen: no gradient for its weight or bias."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, steps, chunk, need_grad):
        rows = hidden.shape[0]
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad = torch.empty(hidden.shape, dtype=torch.float32, device=hidden.device) if need_grad else None
        factor = 1.0  # the derivative of the post-processing's constant scalings
        for op, value in steps:
            factor = factor * value if op == "mul" else factor / value if op == "div" else factor
        # float16 keeps the small probabilities of the logits' gradient only scaled up (by a power of
        # two: exact), as far as its product with the weight cannot overflow; bfloat16 has float32's range
        gscale = 1.0
        if need_grad and weight.dtype == torch.float16:
            largest = max(float(weight.abs().max()), 1e-30)
            if math.isfinite(largest):  # a damaged head: left to finetune's non-finite check
                gscale = 2.0 ** math.floor(math.log2(min(2.0**15, 2.0**14 / largest) / abs(factor)))
        for start in range(0, rows, chunk):
            end = min(start + chunk, rows)
            # the chunk's logits transposed, (vocab, rows): weight @ hidden.T is the faster product
            # on a CPU (MKL, 2 threads: 61-66 GFLOP/s against 50-57 for hidden @ weight.T at 256-682
            # rows), and the softmax's reductions over the vocabulary run along contiguous rows
            x = hidden[start:end].t()
            logits = torch.mm(weight, x) if bias is None else torch.addmm(bias[:, None], weight, x)
            slope = None  # d(capped)/d(uncapped) of the soft-capping: 1 - (capped / c)^2
            for op, value in steps:  # as models.output_logits does them
                logits = apply_logit_postprocessing(logits, [(op, value)])
                if op == "softcap" and need_grad:
                    term = 1 - (logits.float() / value).square()
                    slope = term if slope is None else slope * term
            logits = logits.float()  # float32 logits are ours to modify in place
            target = targets[None, start:end]
            picked = logits.gather(0, target)
            top = logits.amax(0, keepdim=True)
            logits.sub_(top).exp_()
            norm = logits.sum(0, keepdim=True)
            total += (norm.log() + top - picked).sum()
            if not need_grad:
                continue
            # d(summed cross-entropy)/d(logits) = softmax - onehot; then back through the post-processing
            logits.mul_((factor * gscale) / norm)
            logits.scatter_add_(0, target, torch.full_like(picked, -factor * gscale))
            if slope is not None:
                logits.mul_(slope)
            if weight.dtype == torch.float32:
                torch.mm(logits.t(), weight, out=grad[start:end])
            else:
                grad[start:end] = torch.mm(logits.to(weight.dtype).t(), weight).float().div_(gscale)
        ctx.save_for_backward(grad)
        ctx.dtype = hidden.dtype
        return total

    @staticmethod
    def backward(ctx, grad_total):
        (grad,) = ctx.saved_tensors
        if grad is None:
            raise RuntimeError("head_cross_entropy ran without gradients enabled: it kept no gradient")
        return (grad * grad_total).to(ctx.dtype), None, None, None, None, None, None


def head_cross_entropy(
    model, hidden: torch.Tensor, targets: torch.Tensor, chunk_rows: int | None = None
) -> torch.Tensor:
    """Summed cross-entropy of ``output_logits(model, hidden)`` (rows of ``hidden``,
    (rows, width), against ``targets``, (rows,)), in float32, through the frozen output head:
    ``chunk_rows`` rows at a time (default: ``HEAD_CHUNK_BYTES`` of float32 logits), so the (rows,
    vocab) logits are never all alive, with the gradient for ``hidden`` computed by hand in the
    same pass (one product a chunk forward, one backward; none for the head's weight). A head that
    is not a plain linear layer goes through the module and ``F.cross_entropy`` at once."""
    parts = linear_head(model)
    if parts is None:
        return F.cross_entropy(output_logits(model, hidden).float(), targets, reduction="sum")
    weight, bias = (p.detach() if p is not None else None for p in parts)
    if chunk_rows is None:
        chunk_rows = max(1, HEAD_CHUNK_BYTES // (4 * weight.shape[0]))
    need_grad = torch.is_grad_enabled() and hidden.requires_grad
    return _HeadCrossEntropy.apply(
        hidden.contiguous(),
        weight,
        bias,
        targets.contiguous(),
        logit_postprocessing(model.config),
        int(chunk_rows),
        need_grad,
    )


def sequence_loss(model, ids: torch.Tensor, kind: str, *, chunk_rows: int | None = None) -> torch.Tensor:
    """The loss of one sequence (ids: (1, tokens)): ``gd``, the model's mean next-token
    cross-entropy; ``lcgd``, the sum over blocks of that of each block's output through the frozen
    final norm and head, computed by ``head_cross_entropy`` (``chunk_rows`` rows at a time)."""
    # The key/value cache stays on, though a training pass never reads it (filling it is a tenth of
    # a GPT-2 forward pass's operations): without one, transformers (5.x) checks every pass's
    # positions for packed sequences, a host synchronisation a step on a GPU (seen on an H200)
    if kind == "gd":
        return _next_token_loss(model(input_ids=ids).logits, ids)
    if kind == "lcgd":
        norm = final_norm(model)
        with layer_causal(model) as outputs:
            model.base_model(input_ids=ids)
        # every block's output at every position that predicts a token, through the frozen head
        # together (not one product a layer); the sum over layers x tokens over the tokens is the
        # sum of the per-layer means
        hidden = norm(torch.cat(outputs)[:, :-1])  # (layers, tokens - 1, width)
        targets = ids[:, 1:].expand(len(outputs), -1)
        loss = head_cross_entropy(model, hidden.flatten(0, 1), targets.flatten(), chunk_rows)
        return loss / targets.shape[1]
    raise ValueError(f"unknown training kind {kind!r}")


# float16 gradients underflow below 6e-8: the loss is scaled up before the backward pass and the
# gradients down after it, in float32. The reference scaled dynamically (fairseq: start 4, doubled
# every 256 clean steps) and skipped a step that overflowed; here an overflowing step is redone at
# half the scale, so no demonstration is lost, and only a step still non-finite unscaled is skipped.
FLOAT16_LOSS_SCALE = 2.0**16


def finetune(
    model,
    sequences: list[list[int]],
    *,
    lr: float,
    kind: str,
    clip_grad_norm: float | None = None,
    base: list[torch.Tensor] | None = None,
    master: list[torch.Tensor] | None = None,
    progress=None,
):
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
    # the fused projections' K/V masks; the zero they put in the query part, made once
    fused = [(i, item.mask.to(device)) for i, item in enumerate(kv) if item.mask is not None]
    zero = torch.zeros((), device=device)
    cast = any(item.param.dtype != torch.float32 for item in kv)
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
                grads = torch.autograd.grad(
                    loss * loss_scale if loss_scale != 1.0 else loss, [item.param for item in kv]
                )
            grads = [g.float() for g in grads] if cast else list(grads)
            if loss_scale != 1.0:
                torch._foreach_mul_(grads, 1.0 / loss_scale)
            for i, mask in fused:  # out of place: a contiguous gradient, whose norm sums as before
                grads[i] = torch.where(mask, grads[i], zero)
            param_sq = torch.stack(torch._foreach_norm(grads)).double().square()
            layer_sq = torch.zeros(model.config.num_hidden_layers, dtype=torch.float64, device=device)
            layer_sq.index_add_(0, layer_of, param_sq)
            total = layer_sq.sum().sqrt()
            ok = torch.isfinite(total)
            if loss_scale <= 1.0 or bool(ok):
                break
            loss_scale /= 2  # float16 overflow: redo the step at half the scale
            log.info("step %d: float16 gradients overflowed; loss scale now %g", len(losses), loss_scale)
        # a non-finite step is skipped without asking the device: its gradients count as zero
        factor = torch.where(ok, lr_on_device, 0.0)
        if clip_grad_norm is not None:
            factor = factor * torch.clamp(clip_grad_norm / total, max=1.0)
        grads = [torch.where(ok, g, zero) for g in grads]
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


def finetune_epochs(
    model,
    sequences: list[list[int]],
    epochs: int,
    *,
    after_epoch=None,
    master: list[torch.Tensor] | None = None,
    base: list[torch.Tensor] | None = None,
    **options,
):
    """``epochs`` passes of :func:`finetune` over ``sequences`` in the same order, on one set of
    ``master`` weights (and one ``base``, for a linearized model); the logs of every step, in order.
    ``after_epoch(epoch, log)``, if given, runs after each pass (1, 2, ...) with that pass's log:
    the development choice scores the model there, so a choice of e epochs is scored on the very
    weights a run of e epochs trains (both come through here)."""
    if master is None:
        master = master_weights(model)
    if options.get("kind") == "linearized" and base is None:
        base = snapshot(model)
    logs = []
    for epoch in range(1, int(epochs) + 1):
        logs.append(finetune(model, sequences, master=master, base=base, **options))
        if after_epoch is not None:
            after_epoch(epoch, logs[-1])
    return {key: np.concatenate([log_[key] for log_ in logs]) for key in ("loss", "grad_norm", "skipped")}
