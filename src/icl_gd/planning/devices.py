"""A job on hardware: the activations it holds at its peak (on any machine), and its cost on a GPU
this machine cannot time (``DEVICES``, ``on_device``), from figures measured on such a GPU (H100,
H200) or scaled from them (A100), each with its source beside it.

Apart from the calibration (``timing``): a named device's estimate times nothing here, so its
figures and their sources are read in one place, and ``benchmarks/cost_paper.py`` prices a paper's
model with them alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pandas as pd

from icl_gd.activations.work import TRAIN_KINDS, Shape, Work


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
