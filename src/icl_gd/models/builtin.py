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

from icl_gd.config import resolve as cfg
from icl_gd.models import loading
from icl_gd.data import prompts

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


def _episodes(tokenizer, frames: dict[str, pd.DataFrame], n_episodes: int, max_len: int, seed: int,
              mapping: str = "canonical") -> list[list[int]]:
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
    shape = dict(n_layer=spec["n_layer"], n_embd=spec["n_embd"], n_head=spec["n_head"],
                 n_positions=spec["n_positions"], seed=spec["seed"])
    # .get: the schema's defaults, for specs that did not pass through it (tests, scripts)
    if spec.get("architecture", "gpt2") == "gpt2":
        return loading.build_gpt2(tokenizer, **shape)
    return loading.build_qwen2(
        tokenizer, **shape, sliding_window=spec.get("sliding_window"), sliding_layers=spec.get("sliding_layers", 1)
    )


def build(train_paths: dict[str, str], out_dir: str | Path, spec: dict, device: str = "auto", name: str = "<name>") -> dict:
    """Train the tokenizer and the model on the twins' train splits; save both in ``out_dir``.

    The weights are initialised on the CPU (the same on every machine) and pretrained on
    ``device`` (a GPU where there is one: a model of the reference's shape takes hours on a CPU).
    """
    out_dir = Path(out_dir)
    frames = {task: pd.read_parquet(path) for task, path in sorted(train_paths.items())}
    tokenizer = loading.train_tokenizer(
        _corpus(frames), spec["vocab_size"], out_dir, model_max_length=spec["n_positions"]
    )
    _check_label_words(tokenizer, spec, name)
    model = _architecture(tokenizer, spec).to(loading.pick_device(device))
    max_len = min(spec["pretrain_len"], spec["n_positions"])
    episodes = _episodes(tokenizer, frames, n_episodes=4000, max_len=max_len, seed=spec["seed"],
                         mapping=spec.get("pretrain_label_mapping", "canonical"))
    label_ids = sorted({i for task in frames for i in prompts.label_token_ids(tokenizer, _preset(task))})
    losses = loading.pretrain(
        model, episodes, steps=spec["pretrain_steps"], batch_size=8, lr=spec["pretrain_lr"], seed=spec["seed"],
        weighted_ids=label_ids, weight=spec.get("pretrain_label_weight", 1.0),
    )
    model.save_pretrained(out_dir)
    summary = {"spec": spec, "device": str(next(model.parameters()).device), "n_params": sum(p.numel() for p in model.parameters()),
               "vocab_size": len(tokenizer), "first_loss": losses[0] if losses else None,
               "final_loss": float(np.mean(losses[-20:])) if losses else None}
    (out_dir / "pretraining.json").write_text(json.dumps(summary, indent=2))
    log.info("built-in model: %s", summary)
    return summary
