"""The work of a model job, counted before it runs: FLOPs from the model's shape and the tokens
the job feeds it (``extract.sequences_of``), as ``disk`` counts a cache's bytes.

2 FLOPs per multiply-add of every block's linear layers, of the head where logits are computed,
and of attention's q.k and p.v over the causal pairs (4 d per attended pair and layer):
- ZSL evaluates each query (with its BOS) alone; logits at one position per example.
- ICL runs the demonstrations' prefix once and every query attending to it and to itself.
- A training method first takes one step per demonstration (``ft_demos``) and epoch: gd a forward with the
  head on every position and its backward (about twice the forward); lcgd the head on every
  block's output at every predicting position (L times the rows) and the blocks' input gradients;
  linearized a forward, a tangent pass and a backward (about three forwards). Then ZSL's evaluation.
- A choice of a method's rate and epochs on development rows: each grid rate's training (for the
  grid's most epochs) and an evaluation after each epoch the grid scores, per seed.
- The built-in model's pretraining: its steps of 8 sequences at its pretraining length, forward
  with the head on every position and its backward.

An extraction job notes its own count in its benchmark record (``gflop``); the cost estimate
(``icl_gd.planning.cost``) counts every job of a config the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from icl_gd.common.specs import is_icl_setting

TRAIN_KINDS = ("gd", "lcgd", "linearized")
PRETRAIN_BATCH = 8  # the built-in model's default batch size (pretrain_batch)


@dataclass(frozen=True)
class Shape:
    """What a job's work depends on of the model."""

    n_layers: int
    d_model: int
    n_heads: int
    vocab: int
    block_params: int  # parameters of the blocks' linear layers (no embeddings, norms or head)
    dtype_bytes: int = 4


def forward_flops(shape: Shape, tokens: float, attended: float, logit_rows: float) -> float:
    """One forward: the blocks on ``tokens`` rows, attention over ``attended`` causal pairs, the
    head on ``logit_rows`` rows."""
    return (
        2.0 * shape.block_params * tokens
        + 4.0 * shape.n_layers * shape.d_model * attended
        + (2.0 * shape.d_model * shape.vocab * logit_rows)
    )


def pairs(n: float) -> float:
    """Causal (query, key) pairs of a sequence of n tokens."""
    return n * (n + 1) / 2


@dataclass
class Work:
    """What one job computes: FLOPs by part, and the sizes its memory follows."""

    path: str  # zsl, icl, gd, lcgd, linearized, pretrain
    eval_flops: float = 0.0
    train_flops: float = 0.0
    examples: int = 0
    longest: int = 0  # the longest sequence the model runs at once (query, prefix + query, demonstration)
    steps: int = 0  # training steps
    prefix: int = 0  # ICL: the context's tokens, kept as keys and values for every batch

    @property
    def flops(self) -> float:
        return self.eval_flops + self.train_flops


def eval_work(shape: Shape, queries: list[int], prefix: int) -> float:
    """ZSL (prefix 1: the BOS) or ICL: the prefix once, each query attending to it and itself."""
    flops = forward_flops(shape, prefix, pairs(prefix), 0) if prefix > 1 else 0.0
    for q in queries:
        q = q + (1 if prefix <= 1 else 0)  # ZSL runs the BOS with each query
        flops += forward_flops(shape, q, pairs(q) + q * (prefix if prefix > 1 else 0), 1)
    return flops


def train_step_flops(shape: Shape, tokens: int, kind: str) -> float:
    """One finetuning step on a demonstration of ``tokens`` tokens."""
    forward = forward_flops(shape, tokens, pairs(tokens), tokens)
    if kind == "lcgd":
        blocks = forward_flops(shape, tokens, pairs(tokens), 0)
        head = 2.0 * shape.d_model * shape.vocab * shape.n_layers * (tokens - 1)
        return 2 * blocks + 2 * head  # forward and input gradients; the head forward and its input gradient
    if kind == "linearized":
        return 3 * forward
    return 2 * forward  # gd: forward, input gradients and the K/V weights' gradients


def job_work(shape: Shape, spec: dict, sequences) -> Work:
    """The work of one extraction job (``plan.run_spec``), its sequences from
    ``activations.extract.sequences_of``."""
    queries = [len(q.ids) for q in sequences.queries]
    setting = spec["setting"]
    if is_icl_setting(setting):
        prefix = len(sequences.context)
        work = Work(path="icl", examples=len(queries), longest=prefix + max(queries), prefix=prefix)
        work.eval_flops = eval_work(shape, queries, prefix)
        return work
    training = setting != "zsl"  # a method: finetuning first (its spec has the kind)
    work = Work(path=spec["kind"] if training else "zsl", examples=len(queries), longest=max(queries) + 1)
    work.eval_flops = eval_work(shape, queries, 1)
    if training:
        demos = sequences.demo_ids if spec["ft_demos"] == "all" else sequences.demo_ids[: sequences.true_k]
        lengths = [len(d) + 1 for d in demos]  # with the BOS (prompts.ft_sequences)
        epochs = int(spec.get("epochs", 1))
        work.train_flops = epochs * sum(train_step_flops(shape, n, spec["kind"]) for n in lengths)
        work.steps = epochs * len(lengths)
        work.longest = max([work.longest, *lengths])
    return work


def choice_work(shape: Shape, spec: dict, sequences) -> Work:
    """The work of one choice (``plan.choice_spec``): per seed, each learning rate trains for the
    grid's most epochs and is scored on the development rows after each epoch the grid names; and
    the model is scored there once as it is (every seed reads the same rows); ``sequences(run)``: a
    run's ``RunSequences``."""
    grid, runs = spec["grid"], spec["runs"]
    n_lr, most, scored = len(grid["lr"]), max(grid["epochs"]), len(grid["epochs"])
    total = Work(path=runs[0]["kind"])
    for i, run in enumerate(runs):
        one = job_work(shape, {**run, "epochs": 1}, sequences(run))
        evaluations = n_lr * scored + (1 if i == 0 else 0)
        total.train_flops += n_lr * most * one.train_flops
        total.eval_flops += evaluations * one.eval_flops
        total.steps += n_lr * most * one.steps
        total.examples += evaluations * one.examples
        total.longest = max(total.longest, one.longest)
    return total


def pretrain_work(shape: Shape, steps: int, length: int, batch: int = PRETRAIN_BATCH) -> Work:
    tokens = batch * length
    forward = forward_flops(shape, tokens, batch * pairs(length), tokens)
    return Work(path="pretrain", train_flops=3.0 * forward * steps, longest=length, steps=steps)


# tokens of a twin's demonstration under the built-in tokenizer, over the six twins (22 for SST-2's
# to 61 for AGNews', whose template names the four classes), and the label word and </s>
DEMO_TOKENS = 36


def pretrain_length(spec: dict) -> int:
    """A built-in model's pretraining episode length in tokens (the width of a batch): its
    demonstrations' mean number (``pretrain_demos``) of twin demonstrations, at most
    ``pretrain_len`` and the context."""
    low, high = spec.get("pretrain_demos", (1, 16))
    return min(spec["pretrain_len"], spec["n_positions"], 1 + round(DEMO_TOKENS * (low + high) / 2))


def pretrain_spec_work(shape: Shape, spec: dict, steps: int | None = None) -> Work:
    """A built-in model's pretraining as its keys ask for it (``steps`` of it, if given)."""
    steps = spec["pretrain_steps"] if steps is None else steps
    return pretrain_work(shape, steps, pretrain_length(spec), spec.get("pretrain_batch", PRETRAIN_BATCH))


DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def shape_of(folder: str, dtype: str = "float32") -> Shape:
    """A model's shape from its folder: its config, the parameters counted on the meta device
    (no weights read); ``dtype``: the run's (config key dtype)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    return shape_of_model(model, dtype)


def shape_of_model(model, dtype: str = "float32") -> Shape:
    """A loaded model's shape (its weights anywhere, the meta device included)."""
    import torch

    config = model.config
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    head = model.get_output_embeddings()
    skip = embeddings | ({id(head.weight)} if head is not None else set())
    block_params = sum(p.numel() for p in model.parameters() if p.dim() == 2 and id(p) not in skip)
    return Shape(
        n_layers=config.num_hidden_layers,
        d_model=config.hidden_size,
        n_heads=config.num_attention_heads,
        vocab=config.vocab_size,
        block_params=int(block_params),
        dtype_bytes=DTYPE_BYTES[dtype],
    )
