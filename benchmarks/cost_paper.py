"""What a config's model jobs cost on a GPU we cannot measure here (A100, H100, H200), on paper.

    python benchmarks/cost_paper.py configs/paper.yaml --device A100
    python benchmarks/cost_paper.py configs/sweep-pythia.yaml --device H100 --gpus 16

The rule ``cost_estimate`` times each path on the machine it runs on: use it wherever the jobs'
GPU can be had (``snakemake --workflow-profile profiles/slurm cost_estimate`` runs it on a compute
node). This script needs no GPU, model or data, and every number it uses that was not measured
is an assumption, printed with the result:

- the work: every job's FLOPs as ``icl_gd.activations.work`` counts them, from the model's shape
  (``SHAPES``: the public configs of the fairseq dense 1.3B and the Pythia suite) and each task's
  prompt length from paper 001 Table 3 (characters / 4 plus the template's words, as
  ``benchmarks/disk_from_shape.py``); a demonstration is a query plus its label word;
- the rate and the rest: ``icl_gd.planning.devices.on_device`` with the device's figures (``devices.DEVICES``:
  the H100's and H200's measured on such a GPU, the A100's the H100's scaled by the memories'
  bandwidths; each printed with its source), every job started as a SLURM job starts (torch's
  imports, no warm worker), its checkpoint taken as float32 (the largest a load reads: the
  checkpoint's pages and the cast copy at once). Options override the scalar ones:
  ``--load-gbps``, ``--cold-start`` (seconds of imports a job), ``--host-base`` (MB of host memory
  before the model). GPU memory: the weights, in finetuning a float32 master copy of the K/V
  weights and their gradients, and the activations as ``devices.activation_mb`` counts them.

``snakemake cost_estimate --configfile <config> --config cost_device=A100`` makes the same estimate
from the config's real token counts, where its models and data are at hand.

With ``--gpus`` N the jobs run as the SLURM profile groups them (up to 4 extractions of one model
variant one after another in one SLURM job) on N GPUs, longest group first: the wall time is the
busiest GPU's.
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
from pathlib import Path
from types import SimpleNamespace

import yaml

from icl_gd.activations import work
from icl_gd.config import resolve as cfg
from icl_gd.config import validation
from icl_gd.planning import devices, plan
from icl_gd.report.outputs import PUBLISHED
from icl_gd.report.published import read_published

REPO = Path(__file__).resolve().parents[1]
# (layers, width, heads, vocabulary, MLP width) from each model's published config
SHAPES = {
    "fairseq-1.3b": (24, 2048, 32, 50261, 8192),
    "pythia-70m": (6, 512, 8, 50304, 2048),
    "pythia-160m": (12, 768, 12, 50304, 3072),
    "pythia-410m": (24, 1024, 16, 50304, 4096),
    "pythia-1b": (16, 2048, 8, 50304, 8192),
    "pythia-1.4b": (24, 2048, 16, 50304, 8192),
}
CONTEXT = 2048  # every model of SHAPES
GROUP = 4  # profiles/slurm: group-components of a model variant's extractions
ASSUMPTIONS = [  # (option, devices.Device field, unit)
    ("--load-gbps", "load_gbps", "GB/s: the checkpoint read, cast and moved to the GPU"),
    ("--cold-start", "cold_start_s", "seconds: a job's imports"),
    ("--host-base", "host_base_mb", "MB of host memory before the model"),
]


def shape(name: str, dtype_bytes: int) -> work.Shape:
    layers, width, heads, vocab, mlp = SHAPES[name]
    return work.Shape(
        layers,
        width,
        heads,
        vocab,
        block_params=layers * (4 * width * width + 2 * width * mlp),
        dtype_bytes=dtype_bytes,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--device", choices=sorted(devices.DEVICES), default="A100")
    parser.add_argument("--gpus", type=int, default=1)
    # each option overrides one of the device's scalar figures (icl_gd.planning.devices.Device's defaults, measured)
    for option, field, unit in ASSUMPTIONS:
        default = getattr(devices.Device, field)
        parser.add_argument(option, dest=field, type=float, help=f"{unit} (default {default:g})")
    parser.add_argument("--chars-per-token", type=float, default=4.0)
    args = parser.parse_args()

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    config = validation.validate(yaml.safe_load(Path(args.config).read_text()), schema)
    dtype_bytes = work.DTYPE_BYTES[config["dtype"]]
    given = {field: getattr(args, field) for _, field, _ in ASSUMPTIONS if getattr(args, field) is not None}
    device = dataclasses.replace(devices.DEVICES[args.device], **given)
    batch = config["batch_size"] or 128
    published = read_published(PUBLISHED)
    chars = {r.task: float(r.value) for r in published[published.metric == "avg_tokens"].itertuples()}
    n_evals = {r.task: int(r.value) for r in published[published.metric == "n_eval"].itertuples()}

    def sequences(model: str, spec: dict):
        task = spec["task"]
        template = cfg.task_spec(config, task).template
        mean = round(chars[task] / args.chars_per_token + len(template.split()))
        n = min(spec["max_eval"], n_evals[task])
        seq = SimpleNamespace(queries=[SimpleNamespace(ids=[0] * mean)] * n, context=[0], demo_ids=[], true_k=0)
        if spec["setting"] != "zsl":
            context = CONTEXT
            seq.true_k = min(spec["k"], (context - 1 - 4 * mean) // (mean + 1))
            seq.demo_ids = [[0] * (mean + 1)] * spec["k"]
            if cfg.is_icl_setting(spec["setting"]):
                seq.context = [0] * (1 + seq.true_k * (mean + 1))
        return seq

    jobs = []  # (group, seconds, gpu MB, host MB, rule, setting)
    for e in [*plan.extractions(config), *plan.order_extractions(config)]:
        spec = plan.run_spec(config, e["task"], e["setting"], e["seed"], e.get("order", 0), model=e["model"])
        s = shape(e["model"], dtype_bytes)
        job = work.job_work(s, spec, sequences(e["model"], spec))
        seconds, host_mb, gpu_mb = devices.on_device(s, job, device, batch, warm=False)
        rule = "zsl" if e["setting"] == "zsl" else "icl" if job.path == "icl" else job.path
        jobs.append(((e["model"], e["variant"]), seconds, gpu_mb, host_mb, rule, job.flops))

    print(f"{args.config} on {device.summary(dtype_bytes)}")
    by: dict[str, list] = {}
    for _, seconds, gpu_mb, host_mb, path, flops in jobs:
        by.setdefault(path, []).append((seconds, gpu_mb, host_mb, flops))
    for path, rows in by.items():
        print(
            f"  {path:12s} {len(rows):5d} jobs  {sum(r[0] for r in rows) / 3600:7.2f} GPU-h  "
            f"{sum(r[3] for r in rows) / 1e15:9.1f} PFLOP  GPU peak {max(r[1] for r in rows) / 1024:5.1f} GB  "
            f"host peak {max(r[2] for r in rows) / 1024:5.1f} GB"
        )
    total = sum(j[1] for j in jobs)
    print(f"  total: {len(jobs)} jobs, {total / 3600:.2f} GPU-hours")
    # SLURM jobs: each model variant's extractions in groups of GROUP, in plan order
    chains: dict = {}
    for key, seconds, *_ in jobs:
        chains.setdefault(key, []).append(seconds)
    groups = sorted((sum(c[i : i + GROUP]) for c in chains.values() for i in range(0, len(c), GROUP)), reverse=True)
    gpus = [0.0] * args.gpus
    for seconds in groups:  # longest first, onto the least busy GPU
        heapq.heapreplace(gpus, gpus[0] + seconds)
    print(
        f"  on {args.gpus} GPU{'s' * (args.gpus > 1)}: {len(groups)} SLURM jobs (groups of up to {GROUP}), "
        f"wall {max(gpus) / 3600:.2f} h, the longest SLURM job {groups[0] / 60:.0f} min"
    )


if __name__ == "__main__":
    main()
