"""One choice job (``plan.choice_job_spec``): for each variant and choosing method of a model on a
task, the method's grid of learning rates and epochs, each point finetuned on every seed's own
demonstrations and scored on the development rows (``plan.choice_spec``).

The development rows are train rows that no seed of the task takes among its first k
demonstrations (``data.splits.select_dev``); the evaluation split is never read. Each rate trains
once, for the grid's most epochs, and is scored after every pass the grid names: the weights
after e passes are those a run of e epochs trains (``training.finetune_epochs``), and a point's
predictions are those its run's cache would hold on these rows (``extract.evaluate``). Which point
wins is the rule of ``metrics.setting_choice``, applied by the job's script.
"""

from __future__ import annotations

import contextlib
import logging
import time

import numpy as np
import pandas as pd
import torch

from icl_gd.activations import capture, extract, training, work
from icl_gd.common import benchmark
from icl_gd.data import prompts
from icl_gd.models import loading

log = logging.getLogger(__name__)

COLUMNS = ["seed", "lr", "epochs", "n_examples", "accuracy", "zsl_accuracy", "loss", "skipped"]


def restore(model, values: list[torch.Tensor]) -> None:
    """Put the K/V parameters back to ``values`` (``training.snapshot``), in their own dtype."""
    with torch.no_grad():
        for item, value in zip(training.kv_parameters(model), values):
            item.param.copy_(value.to(item.param.dtype))


def run_job(
    spec: dict,
    *,
    model_dirs: dict[str, str],
    train_path: str,
    eval_path: str,
    device: str = "auto",
    batch_size: int | None = None,
) -> pd.DataFrame:
    """Every choice of a job (``spec["choices"]``), each variant's model (``model_dirs``: variant ->
    its folder) loaded once for all its methods: :func:`run_grid`'s rows, with the variant, the
    method and its kind."""
    tables, gflop, loaded = [], 0.0, {}
    for one in spec["choices"]:
        variant = one["variant"]
        if variant not in loaded:
            loaded = {variant: _load(model_dirs[variant], one["runs"][0]["dtype"], device)}
        table = run_grid(one, loaded=loaded[variant], train_path=train_path, eval_path=eval_path, batch_size=batch_size)
        gflop += table.attrs["gflop"]
        tables.append(table.assign(variant=variant, method=one["method"], kind=one["runs"][0]["kind"]))
    table = pd.concat(tables, ignore_index=True)
    table.attrs["device"] = str(next(iter(loaded.values()))[0].device)  # for the table's provenance
    # for the job's benchmark record: its work, counted as the cost estimate counts it
    benchmark.note(gflop=round(gflop, 4))
    return table


def _load(model_dir: str, dtype: str, device: str):
    model = loading.load_model(model_dir, dtype=dtype, device=device)
    return model, loading.load_tokenizer(model_dir), capture.attach(model)


def run_grid(
    spec: dict,
    *,
    model_dir: str | None = None,
    loaded: tuple | None = None,
    train_path: str,
    eval_path: str,
    device: str = "auto",
    batch_size: int | None = None,
) -> pd.DataFrame:
    """One row per (seed, lr, epochs) of one choice's grid (:data:`COLUMNS`): the finetuned model's
    accuracy on the development rows, beside the model's own (zero-shot) accuracy there, the mean
    loss of that point's last pass and how many of its steps were skipped (non-finite gradients).
    The model from ``model_dir``, or ``loaded`` (model, tokenizer, recorder: left as it came)."""
    started = time.time()
    runs, grid = spec["runs"], spec["grid"]
    if any((run.get("queries") or {}).get("split") != "development" for run in runs):
        raise ValueError("a choice reads development rows only: each run of its spec needs queries.split development")
    model, tokenizer, rec = loaded if loaded is not None else _load(model_dir, runs[0]["dtype"], device)
    batch = extract.evaluation_batch_size(batch_size, model.device)
    start = training.snapshot(model)
    scored = sorted(int(e) for e in grid["epochs"])
    context = [tokenizer.bos_token_id]
    rows, prepared_runs, zsl = [], {}, None
    for run in runs:
        prepared = prepared_runs[run["seed"]] = extract.sequences_of(
            run, tokenizer, loading.context_length(model), train_path, eval_path
        )
        queries, label_ids = prepared.queries, prepared.label_ids
        restore(model, start)
        if zsl is None:  # every seed reads the same development rows, and ZSL no demonstration: once
            zsl = extract.accuracy(extract.evaluate(model, rec, context, queries, label_ids, batch_size=batch))
        demos = prepared.demo_ids if run["ft_demos"] == "all" else prepared.demo_ids[: prepared.true_k]
        sequences = prompts.ft_sequences(tokenizer, demos)
        for lr in sorted(float(x) for x in grid["lr"]):
            torch.manual_seed(run["seed"])  # as the run's own job seeds itself
            restore(model, start)
            master = training.master_weights(model)
            base = training.snapshot(model) if run["kind"] == "linearized" else None

            def score(epoch: int, pass_log: dict, lr=lr, master=master, base=base) -> None:
                if epoch not in scored:
                    return
                linear = training.linearized(model, base, master) if base is not None else contextlib.nullcontext()
                with linear:
                    records = extract.evaluate(model, rec, context, queries, label_ids, batch_size=batch)
                rows.append(
                    dict(
                        seed=int(run["seed"]),
                        lr=lr,
                        epochs=epoch,
                        n_examples=len(queries),
                        accuracy=extract.accuracy(records),
                        zsl_accuracy=zsl,
                        loss=float(np.mean(pass_log["loss"])) if len(pass_log["loss"]) else float("nan"),
                        skipped=int(np.sum(pass_log["skipped"])),
                    )
                )

            training.finetune_epochs(
                model,
                sequences,
                scored[-1],
                after_epoch=score,
                lr=lr,
                kind=run["kind"],
                clip_grad_norm=run["clip_grad_norm"],
                master=master,
                base=base,
            )
            mine = [r for r in rows if r["seed"] == run["seed"] and r["lr"] == lr]
            log.info(
                "seed %d, lr %g: development accuracy %s (zero-shot %.3f)",
                run["seed"],
                lr,
                ", ".join(f"{r['accuracy']:.3f} after {r['epochs']} epoch(s)" for r in mine),
                zsl,
            )
    restore(model, start)
    counted = work.choice_work(work.shape_of_model(model, runs[0]["dtype"]), spec, lambda r: prepared_runs[r["seed"]])
    log.info(
        "%s: %d grid points x %d seeds in %.1fs",
        spec["method"],
        len(grid["lr"]) * len(scored),
        len(runs),
        time.time() - started,
    )
    table = pd.DataFrame(rows, columns=COLUMNS)
    table.attrs.update(device=str(model.device), gflop=counted.flops / 1e9)
    return table
