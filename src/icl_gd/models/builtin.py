"""The built-in tiny causal LM of the offline default: tokenizer, architecture and pretraining.

A model of a few layers (Qwen2 architecture whose first layers see a sliding window, or GPT-2)
with a byte-level BPE tokenizer, both trained here on the synthetic twins of the six tasks, laid
out as ICL episodes (demonstrations in the protocol's own format), label words weighted in the
loss. "Pretraining" is brief, but the default model learns the twins (ZSL well above chance), so
that the trained / untrained comparison of paper 001 and the prediction changes of paper 003 mean
something offline. It learns the tasks in its weights: in-context learning that beats its own
zero-shot accuracy is not something a few hundred CPU steps teach it (docs/results.md, "The default run").
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from icl_gd.config import resolve as cfg
from icl_gd.data import prompts
from icl_gd.models import loading

log = logging.getLogger(__name__)

LABEL_WORD_REPEATS = 2000


def _preset(task: str) -> cfg.TaskSpec:
    """A built-in task as the protocol defines it (template, label words), whatever the config says."""
    return cfg.task_spec({"tasks": {task: {}}}, task)


def _corpus(frames: dict[str, pd.DataFrame]) -> list[str]:
    """Every formatted demonstration, plus each label word often enough that even a small BPE
    vocabulary learns it as one token (the protocol needs single-token label words)."""
    texts = []
    for task, frame in frames.items():
        spec = _preset(task)
        for _, row in frame.iterrows():
            texts.append(prompts.format_prompt(spec, row) + " " + spec.label_words[int(row["label"])])
        texts.extend(" " + word for word in spec.label_words for _ in range(LABEL_WORD_REPEATS))
    return texts


def _episodes(
    tokenizer, frames: dict[str, pd.DataFrame], n_episodes: int, max_len: int, seed: int, mapping: str = "canonical"
) -> list[list[int]]:
    """Token sequences of <s> + a few random demonstrations of one task, each ending in </s>.

    ``mapping`` says which label word stands for which class in an episode: ``canonical`` (the
    task's own words), ``flip`` (half the episodes reverse the label order) or ``permute`` (a random
    order per episode). Under flip or permute the words can only be read from the episode's own
    demonstrations, so the loss rewards in-context use of them (symbol tuning, Wei et al. 2023)."""
    rng = np.random.default_rng(seed)
    encoded = {}
    for task, frame in frames.items():
        spec = _preset(task)
        label_ids = prompts.label_token_ids(tokenizer, spec)
        demos = prompts.demonstration_ids(tokenizer, spec, frame, label_ids)
        # each demonstration without its label word, which the episode's mapping puts back
        encoded[task] = ([demo[:-1] for demo in demos], frame["label"].to_numpy(), np.asarray(label_ids))
    tasks = sorted(encoded)
    episodes = []
    for _ in range(n_episodes):
        bodies, labels, label_ids = encoded[tasks[rng.integers(len(tasks))]]
        order = rng.permutation(len(bodies))[: rng.integers(1, 17)]
        words = _episode_label_ids(label_ids, mapping, rng)  # draws nothing when canonical
        episode = prompts.icl_context(tokenizer, [bodies[i] + [int(words[labels[i]])] for i in order])
        episodes.append(episode[:max_len])
    return episodes


def _episode_label_ids(label_ids: np.ndarray, mapping: str, rng: np.random.Generator) -> np.ndarray:
    if mapping == "canonical":
        return label_ids
    if mapping == "flip":
        return label_ids[::-1] if rng.random() < 0.5 else label_ids
    if mapping == "permute":
        return label_ids[rng.permutation(len(label_ids))]
    raise ValueError(f"pretrain_label_mapping must be canonical, flip or permute, got {mapping!r}")


def _check_label_words(tokenizer, spec: dict, name: str) -> None:
    """Every label word of the six tasks must be one token; a vocabulary too small to hold them
    is the config's fault (``vocab_size``), not the tasks'."""
    split = {}
    for task in cfg.TASK_PRESETS:
        task_spec = _preset(task)
        for word in task_spec.label_words:
            ids = tokenizer.encode(" " + word, add_special_tokens=False)
            if len(ids) != 1:
                split[word] = len(ids)
    if split:
        raise cfg.ConfigError(
            f"models.{name}.vocab_size: {spec['vocab_size']} tokens are too few for the built-in tokenizer to "
            f"hold every label word as one token ({', '.join(f'{w!r}: {n} tokens' for w, n in split.items())}); "
            "use a larger vocab_size (1000, the default, always does)"
        )


def _architecture(tokenizer, spec: dict):
    shape = dict(
        n_layer=spec["n_layer"],
        n_embd=spec["n_embd"],
        n_head=spec["n_head"],
        n_positions=spec["n_positions"],
        seed=spec["seed"],
    )
    # .get: the schema's defaults, for specs that did not pass through it (tests, scripts)
    if spec.get("architecture", "gpt2") == "gpt2":
        return build_gpt2(tokenizer, **shape)
    return build_qwen2(
        tokenizer, **shape, sliding_window=spec.get("sliding_window"), sliding_layers=spec.get("sliding_layers", 1)
    )


def build(
    train_paths: dict[str, str], out_dir: str | Path, spec: dict, device: str = "auto", name: str = "<name>"
) -> dict:
    """Train the tokenizer and the model on the twins' train splits; save both in ``out_dir``.

    The weights are initialised on the CPU (the same on every machine) and pretrained on
    ``device`` (a GPU where there is one: a model of the reference's shape takes hours on a CPU).
    """
    out_dir = Path(out_dir)
    frames = {task: pd.read_parquet(path) for task, path in sorted(train_paths.items())}
    tokenizer = train_tokenizer(_corpus(frames), spec["vocab_size"], out_dir, model_max_length=spec["n_positions"])
    _check_label_words(tokenizer, spec, name)
    model = _architecture(tokenizer, spec).to(loading.pick_device(device))
    max_len = min(spec["pretrain_len"], spec["n_positions"])
    episodes = _episodes(
        tokenizer,
        frames,
        n_episodes=4000,
        max_len=max_len,
        seed=spec["seed"],
        mapping=spec.get("pretrain_label_mapping", "canonical"),
    )
    label_ids = sorted({i for task in frames for i in prompts.label_token_ids(tokenizer, _preset(task))})
    losses = pretrain(
        model,
        episodes,
        steps=spec["pretrain_steps"],
        batch_size=8,
        lr=spec["pretrain_lr"],
        seed=spec["seed"],
        weighted_ids=label_ids,
        weight=spec.get("pretrain_label_weight", 1.0),
    )
    model.save_pretrained(out_dir)
    summary = {
        "spec": spec,
        "device": str(next(model.parameters()).device),
        "n_params": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "first_loss": losses[0] if losses else None,
        "final_loss": float(np.mean(losses[-20:])) if losses else None,
    }
    (out_dir / "pretraining.json").write_text(json.dumps(summary, indent=2))
    log.info("built-in model: %s", summary)
    return summary


SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}


def train_tokenizer(texts, vocab_size: int, out_dir: str | Path, model_max_length: int):
    """A GPT-2-style byte-level BPE tokenizer with fairseq's special tokens, trained offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=model_max_length, **SPECIAL_TOKENS)
    fast.save_pretrained(out_dir)
    return fast


def build_gpt2(tokenizer, *, n_layer: int, n_embd: int, n_head: int, n_positions: int, seed: int):
    """A randomly initialised GPT-2 whose special-token ids are the tokenizer's own."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    torch.manual_seed(seed)
    return GPT2LMHeadModel(config)


def build_qwen2(
    tokenizer,
    *,
    n_layer: int,
    n_embd: int,
    n_head: int,
    n_positions: int,
    seed: int,
    sliding_window: int | None = None,
    sliding_layers: int = 0,
):
    """A randomly initialised Qwen2-architecture model (RoPE, RMSNorm, SwiGLU, tied embeddings) whose
    first ``sliding_layers`` layers attend only to the last ``sliding_window`` tokens.

    A window about one demonstration long hands every position a summary of its own sentence at
    no cost in learning: the built-in model then learns the twins in a few hundred steps and keeps
    its predictions at the 1024-token contexts of ICL, where a GPT-2 of the same size, trained as
    long, stays near chance."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    sliding = int(sliding_layers) if sliding_window else 0
    if sliding > n_layer:
        raise ValueError(f"sliding_layers ({sliding}) cannot exceed n_layer ({n_layer})")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=n_embd,
        intermediate_size=4 * n_embd,
        num_hidden_layers=n_layer,
        num_attention_heads=n_head,
        num_key_value_heads=n_head,
        max_position_embeddings=n_positions,
        use_sliding_window=bool(sliding),
        sliding_window=sliding_window if sliding else None,
        layer_types=["sliding_attention" if i < sliding else "full_attention" for i in range(n_layer)],
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def pretrain(
    model: nn.Module,
    sequences: list[list[int]],
    *,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    weighted_ids: list[int] = (),
    weight: float = 1.0,
):
    """AdamW language-model training on token sequences (the built-in model's 'pretraining'), on the
    model's device. Zero steps leave the model as initialised (a random model of a chosen shape, as
    the GPU benchmark uses). Predicting a token of ``weighted_ids`` counts ``weight`` times in the
    loss (the built-in model weighs its label words: one token in twenty of an episode).

    Sequences longer than the model's context are an error of the caller."""
    if steps == 0:
        model.eval()
        return []
    gen = torch.Generator().manual_seed(seed)  # on the CPU: the same batches on every device
    pad = model.config.pad_token_id
    device = next(model.parameters()).device
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * (1 - s / steps))
    losses = []
    for step in range(steps):
        idx = torch.randint(len(sequences), (batch_size,), generator=gen).tolist()
        width = max(len(sequences[i]) for i in idx)
        batch = torch.full((batch_size, width), pad)
        for row, i in enumerate(idx):
            batch[row, : len(sequences[i])] = torch.tensor(sequences[i])
        labels = batch.masked_fill(batch == pad, -100)
        # Episodes are shorter than the context: start each batch at a random position, so that
        # every learned position embedding is trained, not only the first few hundred.
        offset = int(torch.randint(loading.context_length(model) - width + 1, (1,), generator=gen))
        positions = torch.arange(offset, offset + width).expand(batch_size, -1)
        logits = model(input_ids=batch.to(device), position_ids=positions.to(device)).logits[:, :-1]
        loss = _weighted_loss(logits, labels[:, 1:].to(device), weighted_ids, weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == steps - 1:
            log.info("pretrain step %d/%d loss %.3f", step + 1, steps, loss.item())
    model.eval()
    return losses


def _weighted_loss(logits: torch.Tensor, targets: torch.Tensor, weighted_ids, weight: float) -> torch.Tensor:
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
