"""What a run will cost, known before it starts: every model job's predicted wall time and peak
memory, from a count of its work and rates measured on the machine at hand.

The work: each job's FLOPs, counted as ``activations/work.py`` counts them (and as each extraction
job notes them in its benchmark record).

The rates (measured, ``calibrate``): for each model and path, the real extraction code on the
config's first task and seed, run in a forked copy of this process at two sizes of the evaluation
set (``max_eval``), from which a job's fixed time (loading the model, tokenizer and data, writing
the cache) and its time per FLOP follow, and the forked copy's peak resident set. The runs share the
machine as the run's jobs will: as many side by side as the run runs at once (``copies``), the
longest first, and a filler in a slot that no run can take yet, so that none is timed on an emptier
machine than the run's (and the calibration takes about its runs' time over ``copies``). A training
path is run at the larger size and its training time is what remains after ZSL's evaluation at that
size (of two methods of a kind, the ones with the fewest and the most demonstrations: the training's
fixed part apart from its time per FLOP). Where a path's run takes under 5 s (its fixed part much of
its time), ICL and a kind whose methods all have one number of demonstrations are also run on the
task with the longest prompts (with its ZSL), and each path's line fitted through all its points.
A job's start adds the warm worker's hand-over (local runs) or the imports of torch and
transformers (every SLURM job, a local run without the worker), measured once.

Memory: the calibration run's peak resident set of the job's path, plus the difference in
activations between the job and the calibration run (the batch's longest sequence, the ICL prefix's
keys and values), never less than the calibration run's.

On a GPU that is not at hand (``DEVICES``, ``on_device``): the same work at figures measured on
such a GPU (H100, H200) or scaled from them (A100), each with its source below.
"""

from __future__ import annotations

import math
import os
import signal
import statistics
import time
from dataclasses import dataclass, field

import pandas as pd

from icl_gd.activations.work import (
    DEMO_TOKENS,
    PRETRAIN_BATCH,
    TRAIN_KINDS,
    Shape,
    Work,
    choice_work,
    job_work,
    pretrain_length,
    pretrain_spec_work,
)
from icl_gd.common import warm as worker
from icl_gd.common.specs import is_icl_setting
from icl_gd.planning import plan

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

# ------------------------------------------------------------------------------------------------
# Rates


@dataclass
class PathRate:
    """A path's measured cost on one model: fixed seconds, seconds per GFLOP, peak MB, and the
    work of the calibration run the peak was measured on. A training method's: its training's
    alone (its evaluation is ZSL's)."""

    fixed_s: float
    s_per_gflop: float
    peak_mb: float
    work: Work


@dataclass
class Calibration:
    """Per model, per path; and a job's start (warm: the worker's hand-over; cold: the imports)."""

    paths: dict[str, dict[str, PathRate]] = field(default_factory=dict)
    start_s: float = 0.0
    seconds: float = 0.0  # what the calibration itself took


def activation_mb(shape: Shape, work: Work, batch_size: int) -> float:
    """The activations a job holds at its peak: a batch of its longest query through one block
    (the residual, the MLP's 4 d, q, k, v and the attention's output: ~10 d a token) and that
    block's attention scores over every key it sees, the ICL prefix's keys and values in every
    layer, and in training (one demonstration a step) every block's activations kept for the
    backward."""
    query = work.longest - work.prefix
    per_token = shape.d_model * 10 * shape.dtype_bytes
    batch = batch_size * query * (per_token + shape.n_heads * work.longest * shape.dtype_bytes)
    prefix = 2 * shape.n_layers * work.prefix * shape.d_model * shape.dtype_bytes
    train = work.longest * shape.n_layers * per_token * 2 if work.path in TRAIN_KINDS else 0
    return (batch + prefix + train) / 2**20


def predict(shape: Shape, work: Work, rate: PathRate, start_s: float, batch_size: int, train_rate=None) -> tuple:
    """(seconds, peak MB) of a job."""
    seconds = start_s + rate.fixed_s + work.eval_flops / 1e9 * rate.s_per_gflop
    if work.train_flops:
        seconds += work.train_flops / 1e9 * (train_rate if train_rate is not None else rate.s_per_gflop)
    grow = activation_mb(shape, work, batch_size) - activation_mb(shape, rate.work, batch_size)
    return seconds, rate.peak_mb + max(grow, 0.0)


# ------------------------------------------------------------------------------------------------
# A GPU this machine cannot time: its vendor peak, and a job's cost on it as measured on such a GPU
#
# Where every figure comes from (docs/performance.md, "The estimate on a GPU"): configs/
# benchmark-1.3b.yaml's jobs (a random GPT-2 of the fairseq dense 1.3B's shape, bfloat16, 2000
# evaluation examples, k = 32, the evaluation batch extract's default on a GPU: 128), torch
# 2.11.0+cu130, transformers 5.24.0, each job forked from a preloaded process as the warm worker
# forks it, four at a time on one GPU (the default profile's gpu: 4), measured twice:
H200_RUN = "H200, 2026-11-27, GPT-2 of the 1.3B shape, bfloat16, batch 128, 4 jobs per GPU"
# - the workflow on one NVIDIA H200 (commit 1f624a9, stopped after 235 s): 76 finished jobs' records,
#   summed per setting, and when each job ended (Snakemake's log; the 13 linearized jobs failed);
H100_PROBE = "H100 SXM, 2026-11-27, GPT-2 of the 1.3B shape, bfloat16, batch 128, 4 jobs per GPU"
# - the same jobs on one NVIDIA H100 80GB HBM3 (3805ef0 with training.py's uncommitted edits of that
#   hour, committed since as 9422658: a finetuning step of fewer operations): ZSL, ICL, GD and LCGD
#   on SST-2 (short prompts) and AGNews (the longest), 8 alone, then 16 four at a time;
# - and benchmarks/extraction_speed.py --shape 1.3b --dtype bfloat16 --batch-size 64 (one process)
#   on both.
# A job's seconds: a fixed part, its weights' load, its FLOPs (work.py's count) at a rate per path,
# and a training kind's steps. The rates are what a job's FLOPs got in jobs that shared the GPU
# with three others: the sharing, the activations' capture and the cache's writing per example
# are in them, not the GPU's arithmetic alone (one job alone on the GPU, as a SLURM job runs, took
# 0.80-1.04 of its time among four, the same jobs on the H100; the first of them 1.76). Measured at
# 16 bits; a 32-bit run moves twice the bytes: its rates are assumed half the 16-bit ones, at most
# the 32-bit peak.

# Per path, the 16-bit FLOP/s of a job's FLOPs on the H100 (four at a time): the line through the
# SST-2 and AGNews jobs' seconds (after their load and steps) against their FLOPs: ZSL 4.7 and 6.4 s
# at 82.7 and 213.2 TFLOP; ICL 8.2 and 11.8 s at 82.6 and 234.7; a method's evaluation (GD's and
# LCGD's four jobs, one line, an intercept each), 10.2-13.8 s
H100_FLOPS = {"zsl": 77.8e12, "icl": 43.3e12, "gd": 52.1e12, "lcgd": 52.1e12}
# The H200 against the H100 in extraction_speed.py (same command, one process each): ZSL 1215
# against 829 examples/s, ICL 626 against 510. The two have one compute peak (989 TFLOP/s at 16 bits); the
# H200's memory is faster (4.8 against 3.35 TB/s; a device copy here 4.3 against 3.0): ZSL's 1.47
# is about that ratio (1.43), ICL's (its keys and values reread each batch) less. A method's
# evaluation is ZSL's forward: its ratio.
ZSL_H200_OVER_H100 = 1214.88 / 829.31
H200_OVER_H100 = {
    "zsl": ZSL_H200_OVER_H100,
    "icl": 625.73 / 509.51,
    "gd": ZSL_H200_OVER_H100,
    "lcgd": ZSL_H200_OVER_H100,
}
# An A100 (80 GB SXM) is not measured: its rates are the H100's times their memory's bandwidth
# (2.04 against 3.35 TB/s), as the measured rates follow the memory's speed, not the peak
A100_OVER_H100 = 2.039 / 3.352
# A finetuning step beyond its FLOPs (the host's kernel launches: the GPU was busy a third of a
# step, step_profile on the H200), extraction_speed.py's steps/s, one process alone: H100 32.2
# (GD) and 24.3 (LCGD), H200 20.3 and 19.6; the H200's with the step before 9422658 (more operations), so
# larger than today's. A linearized step (a forward, a tangent and a backward pass) was never
# measured (every linearized job failed on the H200; fixed in 3805ef0): 1.5 GD's, assumed.
H100_STEP_S = {"gd": 1 / 32.21, "lcgd": 1 / 24.34}
H200_STEP_S = {"gd": 1 / 20.25, "lcgd": 1 / 19.64}
# The rest of a job, the host's (the warm worker's hand-over, CUDA's context, tokenizing, the
# reference cache's read, the cache's write, the record), from the H200 run: each path's measured
# seconds less its load, FLOPs and steps as above, per job. The H100's jobs (no Snakemake around
# them) left 1.3, 4.0, 5.7 and 4.7 s. Linearized: GD's (not measured).
FIXED_S = {"zsl": 2.13, "icl": 3.36, "gd": 5.78, "lcgd": 5.92}
# The checkpoint read (page cache), cast to the run's dtype and moved to the GPU: the H100 jobs'
# 4,642 MB of float32 in 2.35 s on average four at a time (1.82 s alone)
LOAD_GBPS = 2.07
# A local run's first jobs wait for the warm worker's imports: the H200 run's first four ZSL jobs
# ended 21 s after they started, 15.7 s more than the model gives a ZSL job (the H100's preload,
# timed alone: 15.9 s)
RUN_START_S = 15.7
# A job without the worker (a SLURM job): Python importing torch and transformers, 7.35 s on the
# H100's host (6.27 s a second time); Snakemake's own start inside the job is not in it
COLD_START_S = 7.35
# Host memory, on the H100 (ru_maxrss; the H200's records: 7,477-7,486 MB): 470-481 MB before the
# model in a forked job, 793 MB in the preloaded process; the load's peak 7,470-7,481 MB (the
# float32 checkpoint's pages and the bfloat16 copy of them at once); once the model is on the GPU,
# 695-706 MB: CUDA's context and libraries hold 225 MB of host memory
HOST_BASE_MB = 793.0
CUDA_HOST_MB = 225.0


@dataclass(frozen=True)
class Device:
    """A named GPU: its dense peak FLOP/s per bytes of a value (vendor figures, no sparsity) and a
    job's cost on it, from jobs measured on such a GPU (``source`` says which, and what is not).

    A job's seconds: ``fixed_s`` of its path, its checkpoint read at ``load_gbps``, its FLOPs at
    ``efficiency`` (a share of the 16-bit peak) of its path (a method's training FLOPs too), and
    ``step_s`` per finetuning step; a job without the warm worker adds ``cold_start_s``, and a
    local run's first jobs ``run_start_s`` between them (``run_start``). Its host memory: the
    largest of the load (``host_base_mb``, the checkpoint's bytes and, where the run casts them,
    its weights in the run's dtype) and the model on the GPU (``host_base_mb`` and CUDA's
    ``cuda_host_mb``)."""

    name: str
    peak: dict
    efficiency: dict  # path: share of the 16-bit peak
    step_s: dict  # training kind: seconds a step beyond its FLOPs
    fixed_s: dict = field(default_factory=lambda: dict(FIXED_S))
    load_gbps: float = LOAD_GBPS
    run_start_s: float = RUN_START_S
    cold_start_s: float = COLD_START_S
    host_base_mb: float = HOST_BASE_MB
    cuda_host_mb: float = CUDA_HOST_MB
    source: str = ""

    def flops_per_s(self, path: str, dtype_bytes: int) -> float:
        """The rate of a path's FLOPs: measured at 16 bits; 32-bit values, twice the bytes, half
        that (assumed), at most the 32-bit peak."""
        if path not in self.efficiency:  # the built-in model's pretraining (a CPU job): training's
            path = "gd"
        rate = self.efficiency[path] * self.peak[2]
        return rate if dtype_bytes <= 2 else min(rate * 2 / dtype_bytes, self.peak[dtype_bytes])

    def step_seconds(self, path: str) -> float:
        if path == "linearized" and path not in self.step_s:  # not measured: three passes to GD's two
            return 1.5 * self.step_s["gd"]
        return self.step_s.get(path, self.step_s["gd"])

    def fixed_seconds(self, path: str) -> float:
        return self.fixed_s.get(path, self.fixed_s["gd"] if path in TRAIN_KINDS else self.fixed_s["zsl"])

    def summary(self, dtype_bytes: int) -> str:
        per_path = {path: self.flops_per_s(path, dtype_bytes) for path in self.efficiency}
        rates = ", ".join(
            f"{path} {rate / 1e12:.1f} TFLOP/s ({rate / self.peak[dtype_bytes]:.1%})" for path, rate in per_path.items()
        )
        steps = ", ".join(f"{kind} {self.step_s[kind] * 1e3:.0f} ms" for kind in self.step_s)
        fixed = ", ".join(f"{path} {s:g} s" for path, s in self.fixed_s.items())
        return (
            f"{self.name} ({self.peak[dtype_bytes] / 1e12:g} TFLOP/s dense peak at {8 * dtype_bytes}-bit): {self.source}. "
            f"A job's FLOPs at {rates}"
            + ("" if dtype_bytes <= 2 else " (32-bit: ASSUMED half the 16-bit rates)")
            + f"; a step {steps} beyond its FLOPs (linearized 1.5 GD's: ASSUMED); {fixed} a job beside them; "
            f"the checkpoint at {self.load_gbps:g} GB/s; {self.cold_start_s:g} s of imports a job without the warm worker, "
            f"{self.run_start_s:g} s for a local run's first jobs; host memory {self.host_base_mb:,.0f} MB before the "
            f"model, CUDA's {self.cuda_host_mb:,.0f} MB beside it"
        )


PRETRAIN_STEPS = (5, 25)  # the built-in model's pretraining is timed at these many steps


def _share(flops: dict, peak: float) -> dict:
    return {path: rate / peak for path, rate in flops.items()}


_PEAK = {"A100": {4: 19.5e12, 2: 312e12}, "H100": {4: 67e12, 2: 989e12}, "H200": {4: 67e12, 2: 989e12}}
DEVICES = {
    "H100": Device(
        "H100",  # SXM
        _PEAK["H100"],
        _share(H100_FLOPS, _PEAK["H100"][2]),
        H100_STEP_S,
        source=f"measured ({H100_PROBE}; the fixed parts: {H200_RUN})",
    ),
    "H200": Device(
        "H200",
        _PEAK["H200"],
        _share({path: rate * H200_OVER_H100[path] for path, rate in H100_FLOPS.items()}, _PEAK["H200"][2]),
        H200_STEP_S,
        source=f"measured ({H200_RUN}; the rates per FLOP: the H100's times extraction_speed.py's H200/H100 ratio)",
    ),
    "A100": Device(
        "A100",  # SXM, 80 GB
        _PEAK["A100"],
        _share({path: rate * A100_OVER_H100 for path, rate in H100_FLOPS.items()}, _PEAK["A100"][2]),
        H100_STEP_S,
        source=(
            "SCALED, not measured: the H100's rates times the memories' bandwidths (2.04 against 3.35 TB/s), "
            f"its steps, fixed parts and starts as the H100's ({H100_PROBE})"
        ),
    ),
}


def weight_bytes(shape: Shape) -> float:
    """The blocks' linears and an untied embedding and head (a tied model's is counted twice)."""
    return (shape.block_params + 2 * shape.vocab * shape.d_model) * shape.dtype_bytes


def checkpoint_of(folder: str) -> tuple[float, int | None]:
    """(bytes, bytes of a stored value or None) of a model folder's checkpoint: its weight files'
    sizes and the dtype its config names (``dtype``, or ``torch_dtype`` before transformers 5)."""
    import json

    names = [n for n in os.listdir(folder) if n.endswith((".safetensors", ".bin", ".pt", ".pth"))]
    size = float(sum(os.path.getsize(os.path.join(folder, n)) for n in names))
    stored = None
    config = os.path.join(folder, "config.json")
    if os.path.exists(config):
        with open(config) as f:
            values = json.load(f)
        stored = {"float32": 4, "bfloat16": 2, "float16": 2}.get(values.get("dtype") or values.get("torch_dtype"))
    return size, stored


def on_device(
    shape: Shape, work: Work, device: Device, batch_size: int, *, warm: bool = True, checkpoint: tuple | None = None
) -> tuple[float, float, float]:
    """(seconds, host MB, GPU MB) of a job on a named device (``Device``). ``warm``: the job is
    forked by the warm worker (else it imports torch and transformers itself). ``checkpoint``:
    (bytes, bytes of a stored value or None) of the model's folder (``checkpoint_of``); None (or no
    weight file found): its weights in float32, the largest a load reads."""
    weights = weight_bytes(shape)
    stored, stored_bytes = checkpoint if checkpoint and checkpoint[0] else (weights / shape.dtype_bytes * 4, 4)
    seconds = (
        device.fixed_seconds(work.path)
        + (0.0 if warm else device.cold_start_s)
        + stored / (device.load_gbps * 1e9)
        + work.flops / device.flops_per_s(work.path, shape.dtype_bytes)
        + work.steps * device.step_seconds(work.path)
    )
    # the load holds the checkpoint's pages and, where the run casts them to its dtype, the cast copy
    cast = weights if stored_bytes != shape.dtype_bytes else 0.0
    host = device.host_base_mb + max((stored + cast) / 2**20, device.cuda_host_mb)
    kv = 2 * shape.n_layers * shape.d_model * shape.d_model * 4  # the K/V weights' float32 master copy
    gpu = (weights + (2 * kv if work.train_flops else 0)) / 2**20 + activation_mb(shape, work, batch_size)
    return seconds, host, gpu


def run_start(table: pd.DataFrame, seconds: float, slots: int) -> pd.Series:
    """Each job's share of a local run's start: as many jobs as run at once (``slots``) wait
    ``seconds`` for the warm worker's imports, out of those that can start first (every model's
    ZSL jobs of its variant ``trained``, else of its first variant; the others follow ZSL or a new
    variant), whichever Snakemake picks: each of them gets an equal share."""
    share = pd.Series(0.0, index=table.index)
    zsl = table[table["rule"] == "extract_zsl"]
    for _, jobs in zsl.groupby("model", sort=False):
        variants = list(dict.fromkeys(jobs["variant"]))
        first = jobs[jobs["variant"] == ("trained" if "trained" in variants else variants[0])]
        share[first.index] = seconds * min(slots, len(first)) / len(first)
    return share


# ------------------------------------------------------------------------------------------------
# Measuring


def _fork(fn) -> int:
    """``fn`` in a forked copy of this process (which starts from this process's memory, as a
    warm-worker job does); its pid. The copy exits 1 where ``fn`` raised, its traceback printed."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fn()
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


SHORT_S = 5.0  # a run shorter than this is timed thrice; its training apart on a second task


def time_side_by_side(runs: dict, slots: int = 1, filler=None, short_s: float = SHORT_S) -> dict:
    """Each of ``runs`` ({key: (function, the key of a run it must follow, or None)}) in a forked
    copy of this process, ``slots`` copies at a time, as a local run's jobs share the machine:
    {key: (seconds, the copy's peak resident set in MB)}. Runs start in the order given, each once
    the run it follows has finished; a run shorter than ``short_s`` is run thrice and its median
    kept (a run of a second moves by tens of percent with whatever else the machine does). While
    a run is still timed and no other can start, ``filler`` runs in the free slots (killed when it
    is no longer needed), so that no run is timed on a machine emptier than the run's."""
    pending, done = list(runs), set()
    times: dict = {key: [] for key in runs}
    running: dict[int, tuple] = {}  # pid: (key, or None for a filler; its start)

    def ready():
        return next((key for key in pending if runs[key][1] is None or runs[key][1] in done), None)

    def stop(pid):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        del running[pid]

    try:
        while pending or any(key is not None for key, _ in running.values()):
            while (key := ready()) is not None:
                if len(running) >= slots:
                    fillers = [pid for pid, (k, _) in running.items() if k is None]
                    if not fillers:
                        break
                    stop(fillers[0])
                pending.remove(key)
                running[_fork(runs[key][0])] = (key, time.perf_counter())
            timed = any(key is not None for key, _ in running.values())
            while filler is not None and timed and len(running) < slots:
                running[_fork(filler)] = (None, time.perf_counter())
            if not running:
                raise ValueError(f"calibration runs follow runs that are not among them: {pending}")
            pid, status, usage = os.wait4(-1, 0)
            if pid not in running:  # not one of ours
                continue
            key, start = running.pop(pid)
            if key is None:
                continue
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"a calibration run failed ({key}; its traceback is above)")
            times[key].append((time.perf_counter() - start, usage.ru_maxrss / 1024))
            done.add(key)  # its cache is there for the runs that follow it
            if len(times[key]) == 1 and times[key][0][0] < short_s:
                pending[:0] = [key, key]
    finally:
        for pid in list(running):
            stop(pid)
    return {key: (sorted(s for s, _ in t)[len(t) // 2], max(p for _, p in t)) for key, t in times.items()}


def repeated(one_pass, until: float) -> tuple[dict, int]:
    """``one_pass()`` ({key: (seconds, peak MB)}) called again until ``time.perf_counter()`` has
    passed ``until`` (at least once): each key's median seconds and largest peak, and how many
    passes it took."""
    samples: dict = {}
    passes = 0
    while passes == 0 or time.perf_counter() < until:
        for key, value in one_pass().items():
            samples.setdefault(key, []).append(value)
        passes += 1
    return {key: (statistics.median(s for s, _ in t), max(p for _, p in t)) for key, t in samples.items()}, passes


def sizes(n_eval: int) -> tuple[int, int]:
    """The two evaluation sizes a path is calibrated at: a quarter and all of at most 64."""
    large = max(2, min(64, n_eval))
    return max(1, large // 4), large


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
) -> pd.DataFrame:
    """Every model job the config plans (the built-in model's pretraining, each extraction and
    finetuning, the further orders), one row each, with its work and its predicted seconds and
    peak MB: from ``calibration`` (this machine's rates), or on a named ``device`` by the figures
    measured on it (then also ``gpu_mb``). ``sequences(model, spec)``: a run's ``RunSequences``.
    On a device: ``warm``, the jobs are forked by the warm worker (a local run; else each imports
    torch itself, and the run has no start to wait for); ``slots``, model jobs at once;
    ``checkpoints``, each model's (bytes, stored value's bytes) (``checkpoint_of``)."""
    rows = []
    checkpoints = checkpoints or {}
    # the activations' batch where unset: extract's default on a GPU (a named device) or a CPU (a
    # difference from the calibration run, which ran at the jobs' own batch size, is all it changes)
    batch = int(config.get("batch_size") or (128 if device is not None else 16))
    for model, spec in config["models"].items():
        if spec["source"] == "builtin" and spec.get("pretrain_steps"):
            work = pretrain_spec_work(shapes[model], spec)
            gpu = math.nan
            if device is not None:
                seconds, peak, gpu = on_device(
                    shapes[model], work, device, batch, warm=warm, checkpoint=checkpoints.get(model)
                )
            elif rate := calibration.paths[model].get("pretrain"):
                seconds, peak = predict(shapes[model], work, rate, calibration.start_s, batch)
            else:
                seconds, peak = math.nan, math.nan
            row = dict(rule="build_builtin_model", model=model, setting="", path="pretrain", work=work)
            rows.append(dict(row, s=seconds, mb=peak, gpu=gpu))
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


def start_seconds(warm: bool) -> float:
    """A job's start before its script's first line: a bare Python (the warm worker's client,
    whose job is forked with everything imported), or Python importing torch and transformers."""
    import subprocess
    import sys

    code = "import sys" if warm else "import torch, transformers; from transformers import AutoModelForCausalLM"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return time.perf_counter() - start


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(fixed seconds, seconds per GFLOP): the least-squares line through (GFLOP, seconds) points
    (through two, the line through both); a non-positive slope (noise on a job too small to time)
    puts the whole time in the fixed part."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / spread if spread else 0.0
    if slope <= 0:
        return max(ys), 0.0
    return max(my - mx * slope, 0.0), slope


def calibrate(
    config: dict,
    shapes: dict[str, Shape],
    sequences,
    model_dirs: dict[str, str],
    task_files: dict[str, dict[str, str]],
    workdir: str,
    *,
    warm: bool = True,
    threads: int = 1,
    copies: int = 1,
    min_seconds: float = 0.0,
    log=print,
) -> Calibration:
    """Each model's paths timed on this machine (see the module's docstring): the config's first
    task and seed, in forked copies of this process, the caches written under ``workdir``.
    ``copies``: how many jobs the run will run at once here (the calibration runs as many side by
    side: two jobs on two cores each take longer than one alone). ``min_seconds``: the runs are
    timed again, pass after pass, until this long has gone by, and each run's median kept."""
    import torch

    from icl_gd.activations import extract
    from icl_gd.config import resolve as cfg
    from icl_gd.data import splits

    began = time.perf_counter()
    if not os.environ.get(worker.CHILD_ENV):  # as the warm worker would have: its forks find them loaded
        worker.preload(list(worker.DEFAULT_PRELOAD))
    task = next(iter(config["tasks"]))
    methods = [m for methods in config["variants"].values() for m in methods]
    # each kind's methods (those that run on the task, where any does) with the fewest and the most
    # demonstrations, where these differ; else its first
    by_kind: dict[str, list[str]] = {}
    for method in sorted(dict.fromkeys(methods), key=lambda m: cfg.setting_k(config, m)):
        by_kind.setdefault(cfg.method_spec(config, method)["kind"], []).append(method)
    by_kind = {kind: [m for m in ms if cfg.method_runs_on(config, m, task)] or ms for kind, ms in by_kind.items()}
    by_kind = {
        kind: [ms[0], ms[-1]] if cfg.setting_k(config, ms[0]) != cfg.setting_k(config, ms[-1]) else [ms[0]]
        for kind, ms in by_kind.items()
    }
    icl = cfg.icl_setting(config, methods[0]) if methods else "icl"
    n_eval = len(splits.select_eval(pd.read_parquet(task_files[task]["eval"]), config["max_eval"]))
    small, large = sizes(n_eval)

    # every model's runs, planned first and timed together: (model, setting, examples) -> its work
    runs, works, filler = {}, {}, None

    def path(key):
        return os.path.join(workdir, "{}-{}-{}-{}.arrow".format(*key))

    # ICL, and a training kind whose methods all have one number of demonstrations, also on a
    # second task, that with the longest prompts: its points lie farther apart than two sizes of one
    # task's evaluation set, which tells a fixed part from a time per FLOP (ZSL's too, with its run)
    second: dict[tuple, tuple] = {}  # (model, setting): the key of its run there
    others = [t for t in config["tasks"] if t != task]

    for model, folder in model_dirs.items():

        def job(setting, n, out, reference=None, model=model, folder=folder, task=task):
            spec = {**plan.run_spec(config, task, setting, cfg.task_seeds(config, task)[0], model=model), "max_eval": n}
            if spec.get("lr", 0.0) is None:  # a method that chooses its rate: timed at its grid's first
                spec["lr"] = cfg.choice_grid(config, setting)["lr"][0]

            def run():  # copies side by side may write the same files: each atomically, all alike
                torch.set_num_threads(threads)
                extract.run(
                    spec,
                    model_name=model,
                    variant="trained",
                    model_dir=folder,
                    train_path=task_files[task]["train"],
                    eval_path=task_files[task]["eval"],
                    out_path=out,
                    train_log_path=out.replace(".arrow", ".parquet"),
                    reference_path=reference,
                    device=config["device"],
                    batch_size=config["batch_size"],
                )

            return run, job_work(shapes[model], spec, sequences(model, spec))

        def add(setting, n, after=None, model=model, job=job, task=task):
            key = (model, task, setting, n)
            run, works[key] = job(setting, n, path(key), path(after) if after else None, task=task)
            runs[key] = (run, after)
            return key

        zsl = [add("zsl", n) for n in (large, small)]  # first: the others read their caches
        if filler is None:  # the first model's smaller ZSL run, into a file of its own
            filler = job("zsl", small, os.path.join(workdir, f"{model}-filler.arrow"))[0]
        for method in [m for chosen in by_kind.values() for m in chosen]:
            add(method, large, zsl[0])
        if cfg.is_icl_setting(icl):
            for n in (large, small):
                add(icl, n, zsl[0] if n == large else zsl[1])
        single = [chosen[0] for chosen in by_kind.values() if len(chosen) == 1]
        for setting in single + ([icl] if cfg.is_icl_setting(icl) else []):
            there = [t for t in others if setting == icl or cfg.method_runs_on(config, setting, t)]
            if there:
                longest = max(there, key=lambda t: job(setting, large, "", task=t)[1].flops)
                reference = (model, longest, "zsl", large)
                if reference not in runs:
                    add("zsl", large, task=longest)
                second[model, setting] = add(setting, large, reference, task=longest)
    # The longest first among those that may start (a short run at the end keeps the tail short).
    # The second task's runs only where the first task's run is short (under 5 s): there the fixed
    # part is much of a job's time, while a longer run is mostly its FLOPs (docs/performance.md).
    extra = set(second.values()) | {runs[key][1] for key in second.values()}
    first = [key for key in runs if runs[key][1] is None and key not in extra]
    order = first + sorted(
        (key for key in runs if key not in first and key not in extra), key=lambda key: -works[key].flops
    )
    pretraining = {
        model: _pretraining_runs(model_dirs[model], shapes[model], spec)
        for model, spec in config["models"].items()
        if model in model_dirs and spec["source"] == "builtin" and spec.get("pretrain_steps")
    }

    # Passes of every run until ``min_seconds`` have gone by, each run's median kept: a host's speed
    # drifts in phases of 10-20 s (measured: docs/performance.md), and a calibration of a few
    # seconds would take one phase for the machine's rate. The pretraining, one job, runs alone.
    def one_pass():
        timed = time_side_by_side({key: runs[key] for key in order}, copies, filler=filler)
        if not wanted and second:  # the first pass: which paths' runs are short
            wanted.extend(
                key for (model, setting), key in second.items() if timed[model, task, setting, large][0] < SHORT_S
            )
            wanted[:0] = dict.fromkeys(runs[key][1] for key in wanted)  # their references first
            second.clear()
        if wanted:
            timed.update(time_side_by_side({key: runs[key] for key in wanted}, copies, filler=filler))
        for model, jobs in pretraining.items():
            timed.update({(model, steps): t for steps, t in time_side_by_side(jobs).items()})
        return timed

    wanted: list = []
    timed, passes = repeated(one_pass, until=began + min_seconds)
    log(f"calibration: {passes} passes of every run in {time.perf_counter() - began:.0f} s")
    for key in order + wanted:
        seconds, peak = timed[key]
        log(
            f"calibration {key[0]} {key[1]} {key[2]} ({key[3]} examples): {seconds:.2f} s, {peak:,.0f} MB, {works[key].flops / 1e9:,.2f} GFLOP"
        )

    calibration = Calibration(start_s=start_seconds(warm))
    for model, folder in model_dirs.items():
        rates: dict[str, PathRate] = {}

        def fit(setting):
            keys = [(model, task, setting, n) for n in (small, large)]
            keys += [key for key in wanted if key[0] == model and key[2] == setting]
            points = [(works[key].flops / 1e9, timed[key][0]) for key in keys]
            # memory: the largest run's peak, and a job's growth counted from that run's work
            largest = max(keys, key=lambda key: timed[key][1])
            return PathRate(*_line(points), timed[largest][1], works[largest])

        rates["zsl"] = fit("zsl")
        if cfg.is_icl_setting(icl):
            rates["icl"] = fit(icl)
        for kind, chosen in by_kind.items():
            # the training's time: what is left of the run after ZSL's evaluation of its examples;
            # with two numbers of demonstrations, its fixed part (master weights, the first step's
            # allocations) apart from its time per GFLOP. On the larger evaluation set: what a
            # method's evaluation costs beyond ZSL's (a linearized model's, three passes) counts as
            # training here, and so is counted for that many examples, close to the jobs' own
            points, peaks = [], []
            keys = [(model, task, method, large) for method in chosen]
            keys += [key for key in wanted if key[0] == model and key[2] in chosen]
            for key in keys:
                work, (seconds, peak) = works[key], timed[key]
                evaluation = rates["zsl"].fixed_s + work.eval_flops / 1e9 * rates["zsl"].s_per_gflop
                points.append((work.train_flops / 1e9, max(seconds - evaluation, 0.0)))
                peaks.append((peak, work))
            if len(points) >= 2:
                fixed, slope = _line(points)
            else:
                fixed, slope = 0.0, points[0][1] / points[0][0] if points[0][0] else 0.0
            peak, work = max(peaks, key=lambda p: p[0])
            rates[kind] = PathRate(fixed, slope, peak, work)
        if model in pretraining:
            rates["pretrain"] = _pretraining_rate(shapes[model], config["models"][model], timed, model, log)
        for path, rate in rates.items():
            log(
                f"rate {model} {path}: {rate.fixed_s:.3f} s a job + {rate.s_per_gflop:.4f} s/GFLOP, peak {rate.peak_mb:,.0f} MB"
            )
        calibration.paths[model] = rates
    calibration.seconds = time.perf_counter() - began
    return calibration


def _pretraining_runs(folder: str, shape: Shape, spec: dict) -> dict:
    """The built-in model's pretraining, a few steps of its own loop at its length: {steps: run}."""
    import torch

    from icl_gd.models import loading, pretraining
    from icl_gd.models.episodes import Episode

    length, batch = pretrain_length(spec), spec.get("pretrain_batch", PRETRAIN_BATCH)
    loss = spec.get("pretrain_loss", "tokens")

    def job(steps):
        def run():
            torch.set_num_threads(2)  # the rule's threads
            model = loading.load_model(folder, device="cpu")
            gen = torch.Generator().manual_seed(0)
            ids = torch.randint(4, shape.vocab, (batch, length), generator=gen).tolist()
            # a label word about every demonstration's length, as in an episode
            told = list(range(0, length - 1, DEMO_TOKENS))
            episodes = [Episode(seq, told, told) for seq in ids]
            pretraining.pretrain(model, lambda step: episodes, steps=steps, lr=1e-3, seed=0, loss=loss)

        return run, None

    return {steps: job(steps) for steps in PRETRAIN_STEPS}


def _pretraining_rate(shape: Shape, spec: dict, timed: dict, model: str, log) -> PathRate:
    points = []
    for steps in PRETRAIN_STEPS:
        seconds, rss = timed[model, steps]
        points.append((pretrain_spec_work(shape, spec, steps).flops / 1e9, seconds))
        log(f"calibration pretraining ({steps} steps): {seconds:.2f} s, {rss:,.0f} MB")
    fixed, slope = _line(points)
    peak = max(timed[model, steps][1] for steps in PRETRAIN_STEPS)
    return PathRate(fixed, slope, peak, pretrain_spec_work(shape, spec, PRETRAIN_STEPS[-1]))
