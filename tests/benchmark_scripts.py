"""A benchmark script (``benchmarks/<name>.py``, not a package module) loaded as a module, for its tests,
and the hand-made caches those that read the workflow's caches are tested on."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_predictions(path: Path, gold: np.ndarray, pred: np.ndarray, meta: dict) -> None:
    """A cache whose predictions are ``pred`` (each example's label words: the predicted one at -0.1,
    the others at -5) with ``meta`` as its identity, and no activations to speak of."""
    from icl_gd.activations import cache

    n, n_labels = len(gold), int(gold.max()) + 1
    logprobs = np.full((n, n_labels), -5.0, np.float32)
    logprobs[np.arange(n), pred] = -0.1
    path.parent.mkdir(parents=True, exist_ok=True)
    cache.write_cache(
        path,
        meta,
        example_id=np.arange(n),
        gold=gold,
        label_logprobs=logprobs,
        query_len=np.ones(n, np.int32),
        attn_out=np.zeros((n, 1, 2), np.float32),
        attn_scores=np.zeros((n, 1, 1, 1), np.float32),
        context_scores=np.zeros((n, 1, 1), np.float32),
        layout="float32",
    )
