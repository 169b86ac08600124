"""Tests of icl_gd.planning.disk: a cache's bytes from its shapes, against the files the writer makes."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from icl_gd.activations import cache  # noqa: E402
from icl_gd.planning import disk

META = {
    "model": "m",
    "variant": "trained",
    "task": "cb",
    "seed": 3,
    "record_position": "label_word",
    "template": "{premise} Question: {hypothesis}. True, False, or Neither? Answer:",
    "demo_ids": list(range(32)),
    "prompt_rules": {"rule": "x" * 2000},
    # what else a real cache's identity holds, of about its size
    "queries": {"split": "evaluation"},
    "data": {"source": "hub", "hub_id": "super_glue", "train_sha256": "a" * 64, "eval_sha256": "b" * 64},
    "tokenizer": {"class": "GPT2TokenizerFast", "vocab_size": 50272, "line_end_ids": [2], "model_dir": "x" * 40},
    "provenance": {"python": "3.11.2", "torch": "2.13.0", "transformers": "5.24.0", "commit": "c" * 40},
}  # a real run's metadata, roughly


@pytest.mark.parametrize("layout", cache.LAYOUTS)
@pytest.mark.parametrize("n, layers, width, heads, keys, context", [(200, 4, 256, 8, 40, 300), (30, 2, 32, 2, 12, 1)])
def test_cache_bytes_are_what_the_writer_writes(tmp_path, layout, n, layers, width, heads, keys, context):
    rng = np.random.default_rng(0)
    query_len = rng.integers(1, keys + 1, size=n)
    shape = disk.Shape(layers, width, heads)
    reference = None
    for setting, n_context in (("zsl", 1), ("icl", context), ("gd", 1)):
        records = dict(
            example_id=np.arange(n),
            gold=np.zeros(n),
            label_logprobs=np.zeros((n, 3), np.float32),
            query_len=query_len,
            attn_out=rng.normal(size=(n, layers, width)).astype(np.float32),
            attn_scores=rng.normal(size=(n, layers, heads, keys)).astype(np.float32),
            context_scores=rng.normal(size=(n, layers, n_context)).astype(np.float32),
        )
        path = tmp_path / f"{setting}.arrow"
        meta = {**META, "setting": setting}
        if setting != "gd":  # ZSL and ICL record their content-free queries
            meta["content_free"] = {"texts": ["N/A", "", "[MASK]"], "label_logprobs": (-rng.random((3, 3))).tolist()}
        cache.write_cache(path, meta, layout=layout, reference=reference, **records)
        reference = reference or cache.read_cache(path)
        estimate = disk.cache_bytes(
            layout,
            shape,
            reference=setting == "zsl",
            n_examples=n,
            query_keys=int(query_len.sum()),
            n_context=n_context,
            n_labels=3,
            content_free=setting != "gd",
        )
        actual = path.stat().st_size
        assert abs(estimate - actual) <= max(0.01 * actual, 2048), (setting, estimate, actual)


def test_the_estimate_adds_up_every_planned_cache_by_run_group():
    config = {
        "models": {"m": {}},
        "variants": {"trained": ["gd"]},
        "methods": {"gd": {"kind": "gd"}},
        "tasks": {"sst2": {}},
        "n_seeds": 2,
        "k": 4,
        "max_eval": 10,
        "cache_dtype": "compact",
        "record_position": "label_word",
        "dtype": "float32",
        "min_true_k": 1,
        "ft_demos": "all",
        "statistics": {"baseline_method": "gd"},
        "report": {"reproduction": False},  # no claims: no premise, no ICL on permuted labels
    }
    seen = []

    def sequences(model, spec):
        seen.append(spec["setting"])
        return disk.Sequences(
            n_examples=10, query_keys=100, n_context=50 if spec["setting"] == "icl" else 1, n_labels=2
        )

    caches = disk.estimate(config, {"m": disk.Shape(2, 16, 2)}, sequences)
    assert sorted(seen) == ["gd", "gd", "icl", "icl", "zsl"]  # two seeds, one ZSL (it does not depend on the seed)
    assert caches.query("setting == 'zsl'")["seed"].tolist() == [2]  # the task's first seed
    assert list(caches.columns) == ["model", "variant", "task", "seed", "setting", "bytes"]
    by_setting = caches.groupby("setting")["bytes"].first()
    assert by_setting["zsl"] > by_setting["gd"] and by_setting["icl"] > by_setting["gd"]  # float32 ZSL; ICL's context
    text = disk.describe(caches, "compact", "keep")
    assert "5 activation caches (compact layout), 1 run group (" in text and "caches: temporary" in text
    total = pd.Series(caches["bytes"]).sum()
    assert f"caches: keep       {disk._size(total):>9}" in text
