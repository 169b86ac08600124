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

from icl_gd.config import resolve as cfg
from icl_gd.data import label_pools, prompts
from icl_gd.models import curve, episodes, loading, pretraining, shipped

log = logging.getLogger(__name__)

LABEL_WORD_REPEATS = 2000


def _corpus(frames: dict[str, pd.DataFrame]) -> list[str]:
    """Every formatted demonstration, plus each label word often enough that even a small BPE
    vocabulary learns it as one token (the protocol needs single-token label words)."""
    texts = []
    for task, frame in frames.items():
        spec = episodes.preset(task)
        for _, row in frame.iterrows():
            texts.append(prompts.format_prompt(spec, row) + " " + spec.label_words[int(row["label"])])
        texts.extend(" " + word for word in spec.label_words for _ in range(LABEL_WORD_REPEATS))
    return texts


def _check_label_words(tokenizer, spec: dict, name: str, tasks) -> None:
    """Every label word of the tasks it trains on must be one token; a vocabulary too small to hold
    them is the config's fault (``vocab_size``), not the tasks'."""
    split = {}
    for task in tasks:
        task_spec = episodes.preset(task)
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
        return build_gpt2(tokenizer, **shape, n_inner=spec.get("n_inner"))
    return build_qwen2(
        tokenizer,
        **shape,
        sliding_window=spec.get("sliding_window"),
        sliding_layers=spec.get("sliding_layers", 1),
        n_inner=spec.get("n_inner"),
    )


def make(
    train_paths: dict[str, str],
    out_dir: str | Path,
    spec: dict,
    device: str = "auto",
    name: str = "<name>",
    shipped_folder: str | Path | None = None,
) -> dict:
    """The rule's job: the shipped weights (``shipped_folder``, config key ``weights``) where they
    were made for this recipe, else :func:`build`; either way ``out_dir`` ends with the recipe's
    checksum (``recipe.json``, models/shipped.py). ``trained`` in the result says which."""
    frames = {task: pd.read_parquet(path) for task, path in sorted(train_paths.items())}
    checksum = shipped.recipe_checksum(spec, frames)
    if spec.get("weights"):
        if shipped_folder is None:
            why = f"{spec['weights']} does not exist (config key weights, relative to the working directory)"
        else:
            copied, why = shipped.use_shipped(shipped_folder, checksum, out_dir)
            if copied:
                log.info(
                    "built-in model %s: the shipped weights of this recipe (%s), copied from %s",
                    name,
                    checksum[:12],
                    shipped_folder,
                )
                return {"trained": False, "checksum": checksum}
        log.warning(
            "built-in model %s: %s; training it instead, as the recipe says. Ship the result with "
            "python -m icl_gd.models.shipped %s %s",
            name,
            why,
            out_dir,
            spec["weights"],
        )
    summary = build(train_paths, out_dir, spec, device=device, name=name)
    shipped.write_recipe(out_dir, spec, checksum)
    return {**summary, "trained": True, "checksum": checksum}


def build(
    train_paths: dict[str, str], out_dir: str | Path, spec: dict, device: str = "auto", name: str = "<name>"
) -> dict:
    """Train the tokenizer and the model on the train splits ``train_paths`` names (the six twins',
    or those of the config's ``pretrain_tasks``: real sentences); save both in ``out_dir``.

    The weights are initialised on the CPU (the same on every machine) and pretrained on
    ``device`` (a GPU where there is one: a model of the reference's shape takes hours on a CPU).
    With ``pretrain_curve``, the model's reading of held-out rows is recorded as it trains
    (``training_curve.tsv``; models/curve.py).
    """
    out_dir = Path(out_dir)
    frames = {task: pd.read_parquet(path) for task, path in sorted(train_paths.items())}
    tokenizer = train_tokenizer(_corpus(frames), spec["vocab_size"], out_dir, model_max_length=spec["n_positions"])
    _check_label_words(tokenizer, spec, name, frames)
    model = _architecture(tokenizer, spec)
    if spec.get("attention_init", "default") == "mimetic":
        pretraining.mimetic_init(model, seed=spec["seed"])
    if spec.get("pooling_layers"):
        pretraining.pooling_init(model, spec["pooling_layers"])
    model = model.to(loading.pick_device(device))
    track = spec.get("pretrain_curve") or {}
    train, held_out = curve.split_held_out(
        frames,
        int(track.get("examples", 0)) if track else 0,
        drawn=bool(track) and track.get("held_out") == "drawn",
        seed=spec["seed"],
    )
    mapping, canonical_steps = spec.get("pretrain_label_mapping", "canonical"), spec.get("pretrain_canonical_steps", 0)
    # under the pool mapping, the curve also reads the held-out pool's words, which no episode uses
    pools = label_pools.label_pools(tokenizer) if mapping == "pool" else None
    sampler = episodes.Episodes(
        tokenizer,
        episode_frames(train, spec),
        seed=spec["seed"],
        demos=spec.get("pretrain_demos", (1, 16)),
        max_len=min(spec["pretrain_len"], spec["n_positions"]),
        pool=pools.train if pools else (),
        pool_share=spec.get("pretrain_pool_share", 0.0),
    )
    size = spec.get("pretrain_batch", 8)
    label_ids = sorted({i for task in frames for i in prompts.label_token_ids(tokenizer, episodes.preset(task))})
    rows, recent = [], []

    def on_step(step: int, loss: float | None) -> None:
        if loss is not None:
            recent.append(loss)
        if track and (step % track["every"] == 0 or step == spec["pretrain_steps"]):
            novel = pools.held_out if pools else None
            for row in curve.reading(model, tokenizer, train, held_out, k=track["k"], novel=novel).values():
                rows.append({"step": step, "loss": float(np.mean(recent)) if recent else np.nan, **row})
            recent.clear()

    zero_shot_from = spec.get("pretrain_zero_shot_from")

    def batch(step: int) -> list:
        mapped = "canonical" if step < canonical_steps else mapping
        return sampler.batch(size, mapped, zero_shot=zero_shot_from is not None and step >= zero_shot_from)

    losses = pretraining.pretrain(
        model,
        batch,
        steps=spec["pretrain_steps"],
        lr=spec["pretrain_lr"],
        seed=spec["seed"],
        loss=spec.get("pretrain_loss", "tokens"),
        weighted_ids=label_ids,
        weight=spec.get("pretrain_label_weight", 1.0),
        on_step=on_step,
    )
    model.save_pretrained(out_dir)
    if rows:
        pd.DataFrame(rows).to_csv(out_dir / CURVE_FILE, sep="\t", index=False, float_format="%.4g")
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


CURVE_FILE = "training_curve.tsv"


def episode_frames(frames: dict[str, pd.DataFrame], spec: dict) -> dict[str, pd.DataFrame]:
    """The twins the pretraining draws its episodes from: every twin but those ``pretrain_leave_out``
    names, which the model is then read on as a task it never trained on (its tokenizer still fits
    every twin's train rows, so that their label words are single tokens; its curve reads them too)."""
    left_out = list(spec.get("pretrain_leave_out") or ())
    unknown = sorted(set(left_out) - set(frames))
    if unknown:
        raise cfg.ConfigError(
            f"pretrain_leave_out: {', '.join(map(repr, unknown))} is no task the built-in model trains on; "
            f"name some of {', '.join(sorted(frames))}"
        )
    kept = {task: frame for task, frame in frames.items() if task not in left_out}
    if not kept:
        raise cfg.ConfigError("pretrain_leave_out: every twin is left out, so there is nothing to train on; keep one")
    return kept


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


def build_gpt2(
    tokenizer, *, n_layer: int, n_embd: int, n_head: int, n_positions: int, seed: int, n_inner: int | None = None
):
    """A randomly initialised GPT-2 whose special-token ids are the tokenizer's own."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        n_inner=n_inner,
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
    n_inner: int | None = None,
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
        intermediate_size=n_inner or 4 * n_embd,
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
