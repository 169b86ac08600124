"""One extraction job: a (model, variant, task, seed, setting) run, from data files to a cache.

Settings ``zsl`` and ``icl`` (``icl_switched``, ``icl_permuted``: on other labels of the same
demonstrations; ``icl_novel``: with other label words) evaluate the model as it is; any other setting names a training method from the config: a copy of the model is finetuned on the demonstrations, then evaluated
zero-shot. Everything else of the run (k, true k, learning rate, ...) is recorded in the cache.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from icl_gd.activations import cache, capture, training, work
from icl_gd.common import benchmark, provenance
from icl_gd.common.checksums import sha256_of
from icl_gd.common.specs import TaskSpec, is_base_setting, is_icl_setting
from icl_gd.data import label_pools, prompts, splits
from icl_gd.data.prompts import Query
from icl_gd.models import loading

log = logging.getLogger(__name__)


def evaluate(
    model,
    rec: capture.Recorder,
    context: list[int],
    queries: list[Query],
    label_ids: list[int],
    *,
    batch_size: int,
    reuse_prefix: bool | None = None,
    progress=None,
) -> dict:
    """Run context + each query, batched; record at each query's recorded position.

    With ``reuse_prefix`` (default: when the context is more than ``<s>``) the context's keys and
    values are computed once and every batch runs only its query tokens on top of them;
    otherwise each sequence runs in full (the reference).
    On CUDA, a batch that runs out of memory is retried at half the size.
    Sequences are right-padded: causal attention never lets a real token see the padding, so no
    attention mask is needed and SDPA keeps its fast causal path.
    """
    n, n_ctx = len(queries), len(context)
    if reuse_prefix is None:
        reuse_prefix = n_ctx > 1
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    max_query_len = max(q.record_offset + 1 for q in queries)
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else model.config.eos_token_id
    out = {
        "example_id": np.array([q.example_id for q in queries]),
        "gold": np.array([q.gold for q in queries]),
        "query_len": np.array([q.record_offset + 1 for q in queries]),
        "label_logprobs": np.zeros((n, len(label_ids)), np.float32),
        "attn_out": np.zeros((n, n_layers, model.config.hidden_size), np.float32),
        "attn_scores": np.full((n, n_layers, n_heads, max_query_len), np.nan, np.float32),
        "context_scores": np.zeros((n, n_layers, n_ctx), np.float32),
    }
    # The context runs once; each batch then attends to its keys and values in place.
    if reuse_prefix:
        with torch.no_grad(), rec.shared_prefix("store"):
            model.base_model(input_ids=torch.tensor([context], device=model.device))
    shift = n_ctx if reuse_prefix else 0  # where the query starts in the tokens that are run
    order = sorted(range(n), key=lambda i: len(queries[i].ids))  # similar lengths share a batch
    label_index = torch.tensor(label_ids, device=model.device)

    def run_batch(idx: list[int]) -> None:
        run_ctx = [] if reuse_prefix else context
        width = len(run_ctx) + max(len(queries[i].ids) for i in idx)
        ids = torch.full((len(idx), width), pad, dtype=torch.long)
        for row, i in enumerate(idx):
            ids[row, : len(run_ctx) + len(queries[i].ids)] = torch.tensor(run_ctx + queries[i].ids)
        record = torch.tensor([n_ctx - shift + queries[i].record_offset for i in idx], device=model.device)
        answer = torch.tensor([n_ctx - shift + queries[i].answer_offset for i in idx], device=model.device)
        kwargs, mode = {}, contextlib.nullcontext()
        if reuse_prefix:
            positions = torch.arange(n_ctx, n_ctx + width, device=model.device).expand(len(idx), -1)
            kwargs, mode = {"position_ids": positions}, rec.shared_prefix("use")
        with torch.no_grad(), rec.record(record), mode:
            hidden = model.base_model(input_ids=ids.to(model.device), **kwargs).last_hidden_state
            rows = torch.arange(len(idx), device=model.device)
            logits = capture.realize(loading.output_logits(model, hidden[rows, answer]))
            logprobs = torch.log_softmax(logits.float(), dim=-1)[:, label_index]
            attn_out, scores = rec.stacked()
            # Reduce on the device and move only what the cache keeps: the full score rows (batch x
            # layers x heads x keys) are ~hundreds of MB a batch at the reference's shape. Keys are
            # absolute positions: the context first, then the query.
            q_lens = torch.tensor([queries[i].record_offset + 1 for i in idx], device=scores.device)
            q_max = int(max(queries[i].record_offset + 1 for i in idx))
            past_query = torch.arange(q_max, device=scores.device) >= q_lens[:, None]  # (batch, q_max)
            query_scores = scores[..., n_ctx : n_ctx + q_max].masked_fill(past_query[:, None, None], float("nan"))
            context_scores = scores[..., :n_ctx].sum(dim=2)
        out["attn_scores"][idx, :, :, :q_max] = query_scores.cpu().numpy()
        out["context_scores"][idx] = context_scores.cpu().numpy()
        out["label_logprobs"][idx] = logprobs.cpu().numpy()
        out["attn_out"][idx] = attn_out.cpu().numpy()

    start = 0
    while start < n:
        idx = order[start : start + batch_size]
        try:
            run_batch(idx)
        except torch.cuda.OutOfMemoryError:
            if batch_size == 1:
                raise
            batch_size //= 2  # back off rather than fail: the results do not depend on batching
            log.warning("out of GPU memory; evaluation batch size now %d", batch_size)
            torch.cuda.empty_cache()
            continue
        start += len(idx)
        if progress is not None:
            progress.update(len(idx))
    rec.clear_prefix()
    return out


# How the token sequences of a cache were made, for a reader who has only the cache and the data
# files (the demonstration ids, their labels and true k are in the metadata beside this).
PROMPT_RULES = {
    "example_id": "the split's idx column, else the row number of the split as loaded (sources.normalise_split)",
    "eval_set": "numpy.random.RandomState(1).permutation(len(eval split))[:max_eval] (splits.select_eval); "
    "the cache's example_id column lists them in that order",
    "development_set": "evaluate_on development: the train split's rows that no seed of queries.seeds takes among "
    "its first queries.k, shuffled with numpy.random.RandomState(1), first max_eval (splits.select_dev); "
    "the demonstrations are drawn as ever, so never one of them",
    "demonstrations": "numpy.random.RandomState(seed).permutation(len(train split))[:k], reordered for "
    "permutation p > 0 (splits.select_demos), and in a further order o > 0 (config key orders) "
    "shuffled by splits.demo_order (the first true_k among themselves, the rest among themselves); "
    "demo_ids lists them in the order used",
    "prompt": "template.format(**row), each newline in a text replaced by the line end (prompts.encode_text)",
    "line_end": "demo_separator eos: the tokenizer's EOS token (the reference's </s>); newline: the tokenizer's "
    "newline as it follows a word (prompts.line_end_ids); its ids are tokenizer.line_end_ids",
    "zsl": "<s> + prompt [+ first label word where record_position is label_word]",
    "icl": "<s> + the first true_k demonstrations (prompt + label word + line end) + the ZSL query without <s>",
    "icl_permuted": "icl with every demonstration's label y replaced by (y + 1) mod n_labels "
    "(splits.permute_labels); the cache's gold is the queries' permuted gold, (gold + 1) mod n_labels",
    "icl_novel": "icl with the label words drawn from the tokenizer's held-out pool (data.label_pools: "
    "label_pools(tokenizer).held_out, draw(pool, n_labels, key(seed, task))), class i's the i-th; the queries "
    "are read among them (label_words, label_ids) and their gold is the gold",
    "finetuning": "one sequence per demonstration: <s> + prompt + label word (prompts.ft_sequences)",
    "content_free": "zsl and icl settings: the label words' log-probabilities for queries whose every text "
    "field is one of content_free.texts (Zhao et al. 2021), with the setting's context "
    "(prompts.content_free_queries)",
}


def accuracy(records: dict) -> float:
    """The share of examples whose argmax label (ties to the first class) is the gold one."""
    return float(np.mean(np.argmax(records["label_logprobs"], axis=1) == records["gold"]))


def evaluation_batch_size(requested: int | None, device: torch.device) -> int:
    """The evaluation batch size asked for, or by default one that keeps the device busy."""
    if requested is not None:
        return int(requested)
    return 128 if device.type == "cuda" else 16


def _task_spec(spec: dict) -> TaskSpec:
    """The task as prompts.py reads it (its seeds and learning rate are the spec's business)."""
    return TaskSpec(
        name=spec["task"],
        source=spec["source"],
        template=spec["template"],
        label_words=tuple(spec["label_words"]),
        seeds=(),
        lr=0.0,
        splits=spec["splits"],
        hub_id=spec["hub_id"],
        hub_config=spec["hub_config"],
        path=spec["path"],
    )


@dataclass
class RunSequences:
    """The token sequences of a run, before any model runs: its evaluation queries, and for a
    setting with demonstrations, the demonstrations, how many fit (true k) and the ICL context."""

    task_spec: TaskSpec
    label_ids: list[int]
    queries: list[Query]
    context: list[int]
    demos: pd.DataFrame | None = None
    demo_ids: list[list[int]] = field(default_factory=list)
    true_k: int | None = None
    line_end: list[int] = field(default_factory=list)  # what ends a text's lines and each demonstration
    content_free: list[Query] = field(default_factory=list)  # prompts.CONTENT_FREE, for calibration


# A tokenizer's held-out pool of label words, by its folder and size: finding the pools decodes every
# token (2.2 s for SmolLM2's 49k on 2 busy cores; Gemma's vocabulary is five times larger), once per
# model in a warm worker's jobs.
_HELD_OUT: dict[tuple[str, int], tuple[int, ...]] = {}


def held_out_pool(tokenizer) -> tuple[int, ...]:
    """``data.label_pools.label_pools(tokenizer).held_out``, found once per tokenizer folder."""
    key = (str(tokenizer.name_or_path), len(tokenizer))
    if key not in _HELD_OUT:
        _HELD_OUT[key] = label_pools.label_pools(tokenizer).held_out
    return _HELD_OUT[key]


def query_rows(spec: dict, train_path: str, eval_path: str) -> pd.DataFrame:
    """The examples a run is evaluated on: the evaluation split's (``splits.select_eval``), or with
    ``evaluate_on: development`` (the spec's ``queries``, ``config.resolve.held_out``) the train
    split's rows that no seed of the task takes as a demonstration (``splits.select_dev``)."""
    held = spec.get("queries")
    if held is None:
        return splits.select_eval(pd.read_parquet(eval_path), spec["max_eval"])
    return splits.select_dev(pd.read_parquet(train_path), held["seeds"], held["k"], spec["max_eval"])


def sequences_of(spec: dict, tokenizer, max_len: int, train_path: str, eval_path: str) -> RunSequences:
    """What a run (``plan.run_spec``) feeds the model, from the data files and the tokenizer alone
    (the disk estimate counts its caches' sizes from it, ``planning.disk``). Stops with a
    PromptError where a query does not fit the context ``max_len``, or too few demonstrations do."""
    task, seed, setting = spec["task"], spec["seed"], spec["setting"]
    task_spec = _task_spec(spec)
    eval_rows = query_rows(spec, train_path, eval_path)
    label_ids = prompts.label_token_ids(tokenizer, task_spec)
    if spec.get("demo_labels") == "novel":
        # words no protocol task uses and a pool-trained reader never saw as labels, drawn per task
        # and seed; class i's is the i-th, the queries are read among them, their gold is as ever
        label_ids = label_pools.draw(held_out_pool(tokenizer), task_spec.n_labels, label_pools.key(seed, task))
        task_spec = replace(task_spec, label_words=tuple(tokenizer.decode([i]).strip() for i in label_ids))
    line_end = prompts.line_end_ids(tokenizer, spec.get("demo_separator", "eos"))
    queries = prompts.build_queries(tokenizer, task_spec, eval_rows, label_ids, spec["record_position"], line_end)
    longest = max(len(q.ids) for q in queries)
    if 1 + longest > max_len:
        raise prompts.PromptError(
            f"task {task!r}: the longest evaluation prompt is {longest} tokens, over the model's "
            f"context of {max_len}; use a model with a longer context (the built-in model's n_positions), "
            "shorten the template or drop long examples"
        )
    out = RunSequences(task_spec, label_ids, queries, context=[tokenizer.bos_token_id], line_end=line_end)
    out.content_free = prompts.content_free_queries(tokenizer, task_spec, label_ids, spec["record_position"], line_end)
    if setting == "zsl":  # ZSL uses no demonstrations
        return out
    demos = splits.select_demos(pd.read_parquet(train_path), seed, spec["k"], spec["permutation"])
    if spec["demo_labels"] == "switched":
        demos = splits.switch_labels(demos, task_spec.n_labels, seed)
    elif spec["demo_labels"] == "permuted":
        # The queries' gold becomes the permuted gold, the class whose word the context gives their
        # gold class, and the cache records it as its gold: an accuracy computed from the cache, as
        # every reader of a cache computes one (pred against gold), is then the accuracy of
        # following the demonstrations' labels. Recording both in the cache would leave every such
        # reader to know which to read; the original gold is one step away (splits.permuted_gold is
        # a permutation) and in the run's ZSL cache, which the metrics read beside it.
        demos = splits.permute_labels(demos, task_spec.n_labels)
        targets = splits.permuted_gold([q.gold for q in queries], task_spec.n_labels)
        out.queries = queries = [replace(q, gold=int(g)) for q, g in zip(queries, targets)]
    demo_ids = prompts.demonstration_ids(tokenizer, task_spec, demos, label_ids, line_end)
    k_true = prompts.true_k([len(d) + len(line_end) for d in demo_ids], longest, max_len)
    if k_true < spec["min_true_k"]:
        # ICL with no demonstration is ZSL under another name: say so rather than report it
        first = len(demo_ids[0]) + len(line_end) if demo_ids else 0
        raise prompts.PromptError(
            f"task {task!r}, seed {seed}: only {k_true} of k = {spec['k']} demonstrations fit (min_true_k = "
            f"{spec['min_true_k']}): the longest evaluation prompt is {longest} tokens and the model's "
            f"context {max_len}, leaving {max_len - 1 - longest} tokens, and the first demonstration takes "
            f"{first}. Use a model with a longer context, drop the longest examples (max_eval, your data), "
            "or set min_true_k: 0 to run ICL with fewer demonstrations on purpose"
        )
    if "order" in spec:  # a further order of the same demonstrations (config key orders; absent: the run's own)
        position = splits.demo_order(k_true, len(demo_ids), seed, spec["order"])
        demos, demo_ids = demos.iloc[position].reset_index(drop=True), [demo_ids[i] for i in position]
    out.demos, out.demo_ids, out.true_k = demos, demo_ids, k_true
    if is_icl_setting(setting):
        out.context = prompts.icl_context(tokenizer, demo_ids[:k_true], line_end)
    return out


def run(
    spec: dict,
    *,
    model_name: str,
    variant: str,
    model_dir: str,
    train_path: str,
    eval_path: str,
    out_path: str,
    train_log_path: str | None = None,
    reference_path: str | None = None,
    device: str = "auto",
    batch_size: int | None = None,
) -> dict:
    """Extract one run's cache (and, for a training method, its training log).

    ``spec`` is the run (``plan.run_spec``): everything it reads of the config. In the compact
    layout every setting but ZSL stores its change from the ZSL cache at ``reference_path``.
    ``device`` and ``batch_size`` say how to run it; they do not change the results."""
    started = time.time()
    task, seed, setting = spec["task"], spec["seed"], spec["setting"]
    reference = None
    if spec["cache_dtype"] == "compact" and setting != cache.REFERENCE_SETTING:
        if reference_path is None:
            raise ValueError(
                f"setting {setting!r} in the compact layout stores its change from the "
                f"{cache.REFERENCE_SETTING} cache: give its path (reference_path)"
            )
        reference = cache.read_cache(reference_path)  # memory-mapped; read first, so a damaged one fails early
    torch.manual_seed(seed)
    model = loading.load_model(model_dir, dtype=spec["dtype"], device=device)
    tokenizer = loading.load_tokenizer(model_dir)
    rec = capture.attach(model)
    prepared = sequences_of(spec, tokenizer, loading.context_length(model), train_path, eval_path)
    task_spec, label_ids, queries = prepared.task_spec, prepared.label_ids, prepared.queries
    # for the job's benchmark record: its work, counted as the cost estimate counts it
    flops = work.job_work(work.shape_of_model(model, spec["dtype"]), spec, prepared).flops
    benchmark.note(gflop=round(flops / 1e9, 4))
    identity = {
        "model": model_name,
        "variant": variant,
        "task": task,
        "seed": seed,
        "setting": setting,
        "record_position": spec["record_position"],
        "demo_separator": spec.get("demo_separator", "eos"),
        "label_words": list(task_spec.label_words),
        "label_ids": [int(i) for i in label_ids],
        "dtype": spec["dtype"],
        # enough to rebuild every token sequence from this file and the data files alone
        "template": task_spec.template,
        "max_eval": spec["max_eval"],
        "queries": spec.get("queries") or {"split": "evaluation"},  # the examples evaluated: evaluate_on
        "data": {
            "source": spec["source"],
            "hub_id": spec["hub_id"],
            "hub_config": spec["hub_config"],
            "path": spec["path"],
            "splits": spec["splits"],
            "train_sha256": sha256_of(train_path),
            "eval_sha256": sha256_of(eval_path),
        },
        "tokenizer": {
            "class": type(tokenizer).__name__,
            "vocab_size": len(tokenizer),
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
            "line_end_ids": [int(i) for i in prepared.line_end],
            "model_dir": str(model_dir),
        },
        "prompt_rules": PROMPT_RULES,
        # the libraries, commit, device and dtype that made this file (docs/reruns.md, "Provenance")
        "provenance": provenance.collect(model.device, spec["dtype"]),
    }
    context = prepared.context
    evaluation_mode = contextlib.nullcontext()
    if setting != "zsl":  # ZSL uses no demonstrations
        demos, demo_ids, k_true = prepared.demos, prepared.demo_ids, prepared.true_k
        identity.update(
            k=spec["k"],
            true_k=k_true,
            order=int(spec["order"]) if "order" in spec else 0,
            demo_ids=[int(x) for x in demos["example_id"]],
            demo_labels=spec["demo_labels"],
            demo_label_ids=[int(x) for x in demos["label"]],
        )
    if setting != "zsl" and not is_icl_setting(setting):
        train_demos = demo_ids if spec["ft_demos"] == "all" else demo_ids[:k_true]
        sequences = prompts.ft_sequences(tokenizer, train_demos)
        base = training.snapshot(model) if spec["kind"] == "linearized" else None
        master = training.master_weights(model)  # float32 even where the model is not
        epochs = int(spec.get("epochs", 1))
        with tqdm(total=epochs * len(sequences), desc=f"train {setting}", unit="step", mininterval=1.0) as bar:
            train_log = training.finetune_epochs(
                model,
                sequences,
                epochs,
                lr=spec["lr"],
                kind=spec["kind"],
                clip_grad_norm=spec["clip_grad_norm"],
                base=base,
                master=master,
                progress=bar,
            )
        if base is not None:  # a linearized model is evaluated as the linear model it was trained as
            evaluation_mode = training.linearized(model, base, master)
        identity.update(
            method=setting,
            kind=spec["kind"],
            lr=spec["lr"],
            clip_grad_norm=spec["clip_grad_norm"],
            epochs=epochs,
            n_train_steps=epochs * len(sequences),
            ft_demos=spec["ft_demos"],
        )
        log.info(
            "trained %d steps, final loss %.4f, skipped %d",
            epochs * len(sequences),
            train_log["loss"][-1],
            train_log["skipped"].sum(),
        )
        if train_log_path is not None:
            cache.write_train_log(train_log_path, identity, **train_log)

    with tqdm(total=len(queries), desc=f"evaluate {setting}", unit="ex", mininterval=1.0) as bar, evaluation_mode:
        records = evaluate(
            model,
            rec,
            context,
            queries,
            label_ids,
            batch_size=evaluation_batch_size(batch_size, model.device),
            progress=bar,
        )
    if is_base_setting(setting):
        # the label words' bias in this context, read from queries with no content (Zhao et al. 2021):
        # the metrics' calibrated predictions divide it out (metrics.calibration)
        free = evaluate(model, rec, context, prepared.content_free, label_ids, batch_size=len(prepared.content_free))
        identity["content_free"] = {
            "texts": [*prompts.CONTENT_FREE],
            "label_logprobs": free["label_logprobs"].astype(float).tolist(),
        }
    identity["n_context"] = len(context)
    cache.write_cache(out_path, identity, layout=spec["cache_dtype"], reference=reference, **records)
    log.info(
        "%s/%s/%s seed %d %s: accuracy %.3f, true k %s, %.1fs",
        model_name,
        variant,
        task,
        seed,
        setting,
        accuracy(records),
        identity.get("true_k"),
        time.time() - started,
    )
    return identity
