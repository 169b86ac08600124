"""What a run will cost, known before it starts: every model job's predicted wall time and peak
memory (``estimate``), from a count of its work and rates measured on the machine at hand, and the
estimate in words (``describe``).

The work: each job's FLOPs, counted as ``activations/work.py`` counts them (and as each extraction
job notes them in its benchmark record), from the token sequences the extraction will build
(``sequences_from_files``).

The rates: timed on this machine by the calibration (``timing``: each model's paths at two small
sizes, forked side by side as the run's jobs will run), or, on a GPU that is not at hand, the
figures measured on such a GPU (``devices``). The built-in model's build is priced apart
(``build_cost``): a training or a copy of shipped weights, not an extraction.
"""

from __future__ import annotations

import math

import pandas as pd

from icl_gd.activations.work import TRAIN_KINDS, Shape, Work, choice_work, job_work
from icl_gd.common.specs import is_icl_setting
from icl_gd.planning import plan
from icl_gd.planning.build_cost import build_row
from icl_gd.planning.devices import Device, activation_mb, on_device, run_start
from icl_gd.planning.timing import Calibration, predict

COLUMNS = [
    "rule",
    "model",
    "variant",
    "task",
    "seed",
    "order",
    "setting",
    "path",
    "gflop",
    "seconds",
    "peak_mb",
    "gpu_mb",
]


def describe(table: pd.DataFrame, where: str, notes: str = "") -> str:
    """The estimate in words: totals per rule and setting, and the whole run; ``where``: the
    machine (and the calibration's seconds) or the named device's figures and their sources."""
    lines = [f"{len(table)} model jobs; {where}"]
    gpu = table["gpu_mb"].notna().any()
    by = table.groupby(["rule", "setting"], sort=False, dropna=False).agg(
        jobs=("seconds", "size"),
        seconds=("seconds", "sum"),
        peak_mb=("peak_mb", "max"),
        gpu_mb=("gpu_mb", "max"),
        gflop=("gflop", "sum"),
    )
    for (rule, setting), row in by.iterrows():
        lines.append(
            f"  {rule:22s} {setting or '-':14s} {int(row.jobs):5d} jobs  {_duration(row.seconds):>12s}  "
            f"peak {row.peak_mb:8,.0f} MB"
            + (f" (GPU {row.gpu_mb:8,.0f} MB)" if gpu else "")
            + f"  {row.gflop:12,.1f} GFLOP"
        )
    total = table["seconds"].sum()
    lines.append(
        f"total: {_duration(total)} of job time, peak {table['peak_mb'].max():,.0f} MB in one job"
        + (f" (GPU {table['gpu_mb'].max():,.0f} MB)" if gpu else "")
        + f", {table['gflop'].sum():,.1f} GFLOP"
    )
    return "\n".join(lines + ([notes] if notes else []))


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes = seconds / 60
    if minutes < 60:
        return f"{minutes:.1f} min"
    return f"{minutes / 60:.2f} h"


def estimate(
    config: dict,
    shapes: dict[str, Shape],
    sequences,
    calibration: Calibration | None,
    device: Device | None = None,
    *,
    warm: bool = True,
    slots: int = 1,
    checkpoints: dict | None = None,
    copied: dict | None = None,
) -> pd.DataFrame:
    """Every model job the config plans (the built-in model's pretraining, each extraction and
    finetuning, the further orders), one row each, with its work and its predicted seconds and
    peak MB: from ``calibration`` (this machine's rates), or on a named ``device`` by the figures
    measured on it (then also ``gpu_mb``). ``sequences(model, spec)``: a run's ``RunSequences``.
    On a device: ``warm``, the jobs are forked by the warm worker (a local run; else each imports
    torch itself, and the run has no start to wait for); ``slots``, model jobs at once;
    ``checkpoints``, each model's (bytes, stored value's bytes) (``devices.checkpoint_of``).
    ``copied``: the built-in models whose build copies shipped weights, with the folder's bytes
    (``build_cost.shipped_copies``): each build priced as a copy, not a training."""
    rows = []
    checkpoints, copied = checkpoints or {}, copied or {}
    # the activations' batch where unset: extract's default on a GPU (a named device) or a CPU (a
    # difference from the calibration run, which ran at the jobs' own batch size, is all it changes)
    batch = int(config.get("batch_size") or (128 if device is not None else 16))
    for model, spec in config["models"].items():
        row = build_row(
            model, spec, shapes.get(model), calibration, device, batch, warm, checkpoints.get(model), copied.get(model)
        )
        if row is not None:
            rows.append(row)
    jobs = [(e, 0) for e in plan.extractions(config)] + [(e, e["order"]) for e in plan.order_extractions(config)]
    for e, order in jobs:
        spec = plan.run_spec(config, e["task"], e["setting"], e["seed"], order, model=e["model"])
        shape = shapes[e["model"]]
        work = job_work(shape, spec, sequences(e["model"], spec))
        gpu = math.nan
        if device is not None:
            seconds, peak, gpu = on_device(
                shape, work, device, batch, warm=warm, checkpoint=checkpoints.get(e["model"])
            )
        elif work.path in TRAIN_KINDS:
            rates = calibration.paths[e["model"]]
            train = rates[work.path]  # its training's own fixed seconds and seconds per GFLOP
            seconds, peak = predict(shape, work, rates["zsl"], calibration.start_s, batch, train.s_per_gflop)
            seconds += train.fixed_s
            peak = max(
                peak,
                rates[work.path].peak_mb
                + max(activation_mb(shape, work, batch) - activation_mb(shape, rates[work.path].work, batch), 0),
            )
        else:
            rates = calibration.paths[e["model"]]
            seconds, peak = predict(shape, work, rates[work.path], calibration.start_s, batch)
        if e["setting"] == "zsl":
            rule = "extract_zsl"
        elif is_icl_setting(e["setting"]):
            rule = "extract_order" if order else "extract_base"
        else:
            rule = "finetune_order" if order else "finetune_and_extract"
        rows.append(dict(e, rule=rule, order=order, path=work.path, work=work, s=seconds, mb=peak, gpu=gpu))
    for job in plan.choice_jobs(config):  # the finetuning choices on development rows
        rows.append(
            _choice_row(config, job, shapes[job["model"]], sequences, calibration, device, batch, warm, checkpoints)
        )
    table = pd.DataFrame(
        [
            {
                **{k: r.get(k) for k in ("rule", "model", "variant", "task", "seed", "setting", "path")},
                "order": r.get("order"),
                "gflop": r["work"].flops / 1e9,
                "seconds": r["s"],
                "peak_mb": r["mb"],
                "gpu_mb": r["gpu"],
            }
            for r in rows
        ]
    )
    if device is not None and warm:
        table["seconds"] += run_start(table, device.run_start_s, slots)
    return table.reindex(columns=COLUMNS)


def _choice_row(config, job, shape, sequences, calibration, device, batch, warm, checkpoints) -> dict:
    """A choice job's row of :func:`estimate`: the work of each of its choices
    (``work.choice_work``) priced as a finetuning of that kind is, each training's fixed part
    counted, beside one start and one evaluation's fixed part for the job."""
    parts = [
        (choice_work(shape, one, lambda run: sequences(job["model"], run)), len(one["runs"]) * len(one["grid"]["lr"]))
        for one in plan.choice_job_spec(config, **job)["choices"]
    ]
    total = Work(
        path=parts[0][0].path,
        eval_flops=sum(w.eval_flops for w, _ in parts),
        train_flops=sum(w.train_flops for w, _ in parts),
        examples=sum(w.examples for w, _ in parts),
        longest=max(w.longest for w, _ in parts),
        steps=sum(w.steps for w, _ in parts),
    )
    gpu = math.nan
    if device is not None:
        seconds, peak, gpu = on_device(shape, total, device, batch, warm=warm, checkpoint=checkpoints.get(job["model"]))
    else:
        rates = calibration.paths[job["model"]]
        seconds = calibration.start_s + rates["zsl"].fixed_s + total.eval_flops / 1e9 * rates["zsl"].s_per_gflop
        seconds += sum(w.train_flops / 1e9 * rates[w.path].s_per_gflop + n * rates[w.path].fixed_s for w, n in parts)
        peak = max(
            predict(shape, total, rates["zsl"], calibration.start_s, batch)[1],
            *(rates[w.path].peak_mb for w, _ in parts),
        )
    return dict(
        job, rule="choose_finetuning", setting="", order=0, path=total.path, work=total, s=seconds, mb=peak, gpu=gpu
    )


# ------------------------------------------------------------------------------------------------
# From the files: the models' folders and the tasks' data


def sequences_from_files(config: dict, model_dirs: dict[str, str], task_files: dict[str, dict[str, str]]):
    """``sequences(model, spec)`` as the extraction will build them (each distinct run once)."""
    from types import SimpleNamespace

    from transformers import AutoConfig

    from icl_gd.activations import extract
    from icl_gd.models import loading

    tokenizers, context, seen = {}, {}, {}
    for model, folder in model_dirs.items():
        tokenizers[model] = loading.load_tokenizer(folder)
        context[model] = loading.context_length(SimpleNamespace(config=AutoConfig.from_pretrained(folder)))

    def sequences(model: str, spec: dict):
        fields = ("task", "seed", "setting", "k", "demo_labels", "order", "max_eval", "queries")
        key = (model, *(str(spec.get(k)) for k in fields))
        if key not in seen:
            files = task_files[spec["task"]]
            seen[key] = extract.sequences_of(spec, tokenizers[model], context[model], files["train"], files["eval"])
        return seen[key]

    return sequences
