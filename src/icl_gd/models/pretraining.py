"""The built-in model's pretraining loop, and the initialisation that lets it learn to read its
demonstrations.

Two losses (config key ``pretrain_loss``): ``tokens``, next-token prediction on every token with
the label words weighted (a language model of the twins' episodes), and ``labels``, on the label
words alone, at the demonstrations whose class an earlier demonstration of the episode showed (under
a permuted mapping nothing else can be known; models/episodes.py says why the rest is left out).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import torch
from torch import nn

from icl_gd.models import loading
from icl_gd.models.episodes import Episode

log = logging.getLogger(__name__)

LOSSES = ("tokens", "labels")


def mimetic_init(model, scale: float = 1.0, noise: float = 0.02, seed: int = 0) -> None:
    """Start the last layer's attention as a head that attends to positions like its own and copies
    what it reads there: W_Q and W_K near ``scale`` times the identity (so W_Q^T W_K near the
    identity), W_V and W_O near the identity (Trockman and Kolter 2023, "Mimetic initialization of
    self-attention layers"; our copying sign).

    Reading a demonstration's label is such a head (attend to label words whose sentence is like the
    query's, copy the word). From a random start its two halves, which way to attend and what to
    copy, each give no gradient to the other until both exist: the plateau at chance that thousands
    of steps did not leave (docs/results.md, "A model that reads its demonstrations"). Qwen2 only,
    whose projections are square at one key-value head per head."""
    attention = model.base_model.layers[-1].self_attn
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, factor in (("q_proj", scale), ("k_proj", scale), ("v_proj", 1.0), ("o_proj", 1.0)):
            weight = getattr(attention, name).weight
            if weight.shape[0] != weight.shape[1]:
                raise ValueError(f"mimetic initialisation needs square projections; {name} is {tuple(weight.shape)}")
            eye = torch.eye(weight.shape[0], dtype=weight.dtype)
            weight.copy_(factor * eye + noise * torch.randn(weight.shape, generator=gen, dtype=weight.dtype))


def pooling_init(model, layers: int) -> None:
    """Make the first ``layers`` attention layers pool their window by content alone: their query
    weights zero, and kept so (no gradient; only the query bias learns), so that every position
    weighs the tokens of its window alike whatever token it is itself.

    A demonstration's label word then carries the same summary of its sentence as the query's
    "Label:" does, which is what the last layer matches them on; a first layer with queries of
    its own learns to summarise the sentence at "Label:" only, where the loss asks for it, and the
    label words are left without their class (a linear probe read it there at chance on five of
    the six twins after the canonical steps: docs/results.md)."""
    for layer in model.base_model.layers[:layers]:
        query = layer.self_attn.q_proj
        with torch.no_grad():
            query.weight.zero_()
        query.weight.requires_grad_(False)


def pretrain(
    model: nn.Module,
    batches: Callable[[int], list[Episode]],
    *,
    steps: int,
    lr: float,
    seed: int,
    loss: str = "tokens",
    weighted_ids=(),
    weight: float = 1.0,
    on_step: Callable[[int, float | None], None] | None = None,
) -> list[float]:
    """AdamW training on the episodes ``batches(step)`` returns, on the model's device. Zero steps
    leave the model as initialised (a random model of a chosen shape, as the GPU benchmark uses).
    ``loss``: see the module; under ``tokens`` a token of ``weighted_ids`` counts ``weight`` times.
    ``on_step(step, loss)`` is called after every step (the training curve; loss None where the
    step had nothing to learn from). Returns the losses."""
    if loss not in LOSSES:
        raise ValueError(f"pretrain_loss must be one of {', '.join(LOSSES)}, got {loss!r}")
    if steps == 0:
        model.eval()
        return []
    gen = torch.Generator().manual_seed(seed)  # on the CPU: the same offsets on every device
    pad = model.config.pad_token_id
    device = next(model.parameters()).device
    model.train()
    # what a pooling layer keeps at zero (pooling_init) no optimiser step may move, weight decay included
    opt = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.01, betas=(0.9, 0.98)
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: schedule(s, steps))
    losses = []
    for step in range(steps):
        episodes = batches(step)
        width = max(len(e.ids) for e in episodes)
        batch = torch.full((len(episodes), width), pad)
        for row, episode in enumerate(episodes):
            batch[row, : len(episode.ids)] = torch.tensor(episode.ids)
        # Episodes are shorter than the context: start each batch at a random position, so that
        # every learned position embedding (GPT-2) is trained, not only the first few hundred.
        offset = int(torch.randint(loading.context_length(model) - width + 1, (1,), generator=gen))
        positions = torch.arange(offset, offset + width).expand(len(episodes), -1).to(device)
        if loss == "labels":
            value = _label_loss(model, batch.to(device), positions, episodes)
        else:
            logits = model(input_ids=batch.to(device), position_ids=positions).logits[:, :-1]
            targets = batch.masked_fill(batch == pad, -100)[:, 1:].to(device)
            value = weighted_loss(logits, targets, weighted_ids, weight)
        if value is not None:  # None: no label word the episodes tell (labels loss, none told)
            opt.zero_grad(set_to_none=True)
            value.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(value.item())
        sched.step()
        if on_step is not None:
            on_step(step + 1, None if value is None else losses[-1])
        if losses and (step % 50 == 0 or step == steps - 1):
            log.info("pretrain step %d/%d loss %.3f", step + 1, steps, losses[-1])
    model.eval()
    return losses


def schedule(step: int, steps: int) -> float:
    """The learning rate's factor at ``step``: a linear warm-up over the first 100 steps (a tenth of
    the run where shorter), then a cosine decay to a twentieth of the peak."""
    warmup = max(1, min(100, steps // 10))
    return min(1.0, (step + 1) / warmup) * max(0.05, 0.5 * (1 + math.cos(math.pi * step / steps)))


def _label_loss(model, batch: torch.Tensor, positions: torch.Tensor, episodes: list[Episode]):
    """Cross-entropy of the label words an earlier demonstration tells; the output layer runs at
    those positions only (a twentieth of the tokens or fewer)."""
    rows = [row for row, e in enumerate(episodes) for _ in e.told]
    if not rows:
        return None
    rows = torch.tensor(rows, device=batch.device)
    cols = torch.tensor([p for e in episodes for p in e.told], device=batch.device)
    hidden = model.base_model(input_ids=batch, position_ids=positions).last_hidden_state
    logits = model.get_output_embeddings()(hidden[rows, cols])
    return nn.functional.cross_entropy(logits.float(), batch[rows, cols + 1])


def weighted_loss(logits: torch.Tensor, targets: torch.Tensor, weighted_ids, weight: float) -> torch.Tensor:
    """Mean next-token cross-entropy over the targets that are not -100, each target in
    ``weighted_ids`` counting ``weight`` times."""
    losses = nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100, reduction="none"
    )
    weights = (targets.reshape(-1) != -100).float()
    if len(weighted_ids) and weight != 1.0:
        weighted = torch.isin(targets.reshape(-1), torch.as_tensor(list(weighted_ids), device=targets.device))
        weights = weights * torch.where(weighted, weight, 1.0)
    return (losses * weights).sum() / weights.sum()
