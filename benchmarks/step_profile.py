"""Where a finetuning step's time goes: aten operations, kernel launches and host synchronisations
per GD, LCGD and linearized step, under torch.profiler.

    python benchmarks/step_profile.py                                   # 24 layers, width 64, CPU
    python benchmarks/step_profile.py --before 1f624a9                  # the same counts of an older training.py beside
    python benchmarks/step_profile.py --shape 1.3b --dtype bfloat16 --device cuda --kinds gd,lcgd,linearized --steps 5

A randomly initialised GPT-2 (or XGLM) of the chosen shape (``extraction_speed.py``'s ``build``), one sequence of ``--tokens``
random ids per step (the length of one of the protocol's demonstrations), ``training.finetune``
at learning rate 0 (every step sees the same weights). The per-step figures are the difference of
two profiled ``finetune`` calls of ``--steps`` and 2 x ``--steps`` steps, divided by ``--steps``:
what a call does once (its float32 masters, the sequences' copy to the device, the logs' copy
back) is left out. The counts follow the model's depth and its parameter list, not its width, so
a 24-layer model of width 64 on the CPU counts the operations of the 1.3B shape's step.

Per kind it prints: wall ms per step (outside the profiler), and under it the aten operations
(every ``aten::`` event, nested ones included), the host synchronisations (``aten::item`` /
``_local_scalar_dense``: a value read back to the host; on CUDA also ``cuda*Synchronize``), and on
CUDA the copies the host takes part in (``cudaMemcpy*``), the kernels launched and the GPU's busy
time (the sum of the kernels' own device time) against the wall time. (Until 2026-11-27 the syncs
counted the copies too: the H200 figures in docs/performance.md of that day are of that count.)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from extraction_speed import SHAPES, build  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from icl_gd.activations import training  # noqa: E402
from icl_gd.models.loading import DTYPES, pick_device  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC")
HOST_SYNCS = ("aten::_local_scalar_dense",)  # a value read back to the host (.item(), bool(), ...)
CUDA_SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
CUDA_COPIES = ("cudaMemcpy",)  # cudaMemcpy, cudaMemcpyAsync, ...: either way, a copy the host takes part in


def module_at(rev: str):
    """``icl_gd.activations.training`` as it was at the git revision ``rev``, or as the file ``rev``
    holds (a copy without git: a GPU machine's), imported as a module of its own."""
    if Path(rev).is_file():
        path, name = Path(rev), "training_before"
    else:
        source = subprocess.run(
            ["git", "show", f"{rev}:src/icl_gd/activations/training.py"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        path, name = Path(tempfile.mkdtemp()) / f"training_{rev}.py", f"training_{rev}"
        path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def counts(events, cuda: bool) -> dict[str, float]:
    found = {"aten": 0, "syncs": 0, "copies": 0, "launches": 0, "busy_us": 0.0}
    for event in events:
        name = event.name
        if name.startswith("aten::"):
            found["aten"] += 1
        if name in HOST_SYNCS or (cuda and name in CUDA_SYNCS):
            found["syncs"] += 1
        if cuda and name.startswith(CUDA_COPIES):
            found["copies"] += 1
        if name in LAUNCHES:
            found["launches"] += 1
        if cuda and event.device_type == torch.autograd.DeviceType.CUDA:
            found["busy_us"] += event.self_device_time_total
    return found


def per_step(module, model, sequences, kind: str, steps: int, device: torch.device) -> dict[str, float]:
    """Per-step counts: the difference of ``steps`` and ``2 * steps`` steps, over ``steps``."""
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    result = []
    for n in (steps, 2 * steps):
        with profile(activities=activities) as prof:
            module.finetune(model, sequences[:n], lr=0.0, kind=kind)
            if cuda:
                torch.cuda.synchronize(device)
        result.append(counts(prof.events(), cuda))
    return {key: (result[1][key] - result[0][key]) / steps for key in result[0]}


def wall_ms(module, model, sequences, kind: str, device: torch.device) -> float:
    module.finetune(model, sequences[:2], lr=0.0, kind=kind)  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    module.finetune(model, sequences, lr=0.0, kind=kind)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) / len(sequences) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny24")
    parser.add_argument("--arch", choices=("gpt2", "xglm"), default="gpt2", help="gpt2: what the benchmark grid runs")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--kinds", default="gd,lcgd,linearized")
    parser.add_argument("--steps", type=int, default=5, help="steps per profiled call (two calls: n and 2n)")
    parser.add_argument("--tokens", type=int, default=45, help="tokens per demonstration")
    parser.add_argument(
        "--before", metavar="REV", help="also count training.py as it was at this git revision (or in this file)"
    )
    args = parser.parse_args()

    device, dtype = pick_device(args.device), DTYPES[args.dtype]
    model = build(args.shape, args.arch, dtype, device)
    generator = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    sequences = torch.randint(0, vocab, (2 * args.steps, args.tokens), generator=generator).tolist()
    versions = [("before", module_at(args.before))] if args.before else []
    versions.append(("now", training))
    layers, width, heads, _ = SHAPES[args.shape]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"{args.arch}, {layers} layers, width {width}, {args.dtype}, {name}; one {args.tokens}-token demonstration a step",
        flush=True,
    )
    for kind in args.kinds.split(","):
        for label, module in versions:
            try:
                ms = wall_ms(module, model, sequences, kind, device)
                c = per_step(module, model, sequences, kind, args.steps, device)
            except Exception as error:  # a kind that fails is reported, the others still run
                print(f"{kind:<11} {label:<7} {type(error).__name__}: {error}", flush=True)
                continue
            line = (
                f"{kind:<11} {label:<7} wall {ms:7.1f} ms/step; aten ops {c['aten']:6.0f}; host syncs {c['syncs']:5.1f}"
            )
            if device.type == "cuda":
                busy = c["busy_us"] / 1e3
                line += (
                    f"; host copies {c['copies']:5.1f}; kernel launches {c['launches']:5.0f}; "
                    f"GPU busy {busy:.1f} ms/step ({busy / ms:.0%})"
                )
            print(line + " per step", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
