"""Metric speed on caches of the paper's size: one run's scores, the aggregate and the comparison.

    python benchmarks/metrics.py                    # 2000 examples, 24 layers, 32 heads (1.3B shape)
    python benchmarks/metrics.py --examples 200     # quicker
    python benchmarks/metrics.py --layout float32   # every setting's values in float32

Writes random caches of the chosen shape and layout (ZSL, ICL, GD, LCGD of one seed; ICL with a
1400-key context; each example's query 30-60 keys, so its score rows are not all one length) to a
temporary folder, then times what the metric rules do, one step at a time: ``score_run`` of LCGD
(the heaviest run: it also reads GD's cache, for alpha), the aggregate with its bootstrap
intervals, and the paired comparison. Prints the caches' size and seconds per step; the target
(issue 32) is ``score_run`` within 4 s on 2 cores. The caches are in the page cache after being
written, as a job's inputs usually are; reading one from a cold disk adds its size at the disk's
speed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from icl_gd.activations import cache
from icl_gd.common import frames
from icl_gd.metrics import comparisons, scoring


def write_caches(
    folder: Path, n: int, layers: int, heads: int, width: int, query: int, context: int, layout: str = "compact"
) -> dict:
    rng = np.random.default_rng(0)
    query_len = rng.integers(query // 2, query + 1, size=n).astype(np.int32)
    pad = np.arange(query)[None, :] >= query_len[:, None]
    zsl_out = rng.standard_normal((n, layers, width), dtype=np.float32)
    zsl_scores = rng.standard_normal((n, layers, heads, query), dtype=np.float32)
    gold = rng.integers(0, 2, size=n)
    paths, reference = {}, None
    for setting in ("zsl", "icl", "gd", "lcgd"):
        # the other settings move the ZSL activations by a tenth of their size, as finetuning at
        # the protocol's rates does to a real model's (benchmarks/precision.py: 10-50%)
        step = 0.0 if setting == "zsl" else 0.1
        scores = zsl_scores + step * rng.standard_normal((n, layers, heads, query), dtype=np.float32)
        scores[np.broadcast_to(pad[:, None, None, :], scores.shape)] = np.nan
        n_context = context if setting == "icl" else 1
        paths[setting] = folder / f"{setting}{cache.SUFFIX}"
        cache.write_cache(
            paths[setting],
            {"model": "bench", "variant": "trained", "task": "sst2", "seed": 2, "setting": setting},
            example_id=np.arange(n),
            gold=gold,
            label_logprobs=np.log(rng.dirichlet([1.0, 1.0], size=n)).astype(np.float32) - 1.0,
            query_len=query_len,
            attn_out=zsl_out + step * rng.standard_normal((n, layers, width), dtype=np.float32),
            attn_scores=scores,
            context_scores=rng.standard_normal((n, layers, n_context), dtype=np.float32),
            layout=layout,
            reference=reference,
        )
        if setting == "zsl":
            reference = cache.read_cache(paths["zsl"])
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--query-keys", type=int, default=60)
    parser.add_argument("--context-keys", type=int, default=1400)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--layout", default="compact", choices=cache.LAYOUTS)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        paths = write_caches(
            folder, args.examples, args.layers, args.heads, args.width, args.query_keys, args.context_keys, args.layout
        )
        sizes = {s: p.stat().st_size / 2**20 for s, p in paths.items()}
        print(
            f"shape: {args.examples} examples x {args.layers} layers x {args.heads} heads x "
            f"{args.query_keys // 2}-{args.query_keys} query keys, width {args.width}; {args.layout} caches; "
            f"{os.cpu_count()} CPUs"
        )
        print("cache sizes: " + ", ".join(f"{s} {mib:.0f} MiB" for s, mib in sizes.items()))
        print(
            f"write 4 caches ({sum(sizes.values()):.0f} MiB):          {time.perf_counter() - t:6.1f} s (set-up, not timed below)"
        )

        steps = {}
        t = time.perf_counter()
        caches = {s: cache.read_cache(p) for s, p in paths.items()}
        steps["read 4 caches"] = time.perf_counter() - t

        t = time.perf_counter()
        examples = scoring.run_examples(caches["zsl"], caches["icl"], caches["lcgd"], caches["gd"], random_seed=0)
        steps["per-example metrics (incl. alpha)"] = time.perf_counter() - t

        t = time.perf_counter()
        table = scoring.score_examples(examples, n_boot=args.n_boot)
        steps[f"scores + {args.n_boot}-resample intervals"] = time.perf_counter() - t

        t = time.perf_counter()
        scoring.write_examples(examples, folder / "examples.parquet")
        frames.atomic_write_frame(table, folder / "scores.parquet")
        steps["write the run's files"] = time.perf_counter() - t
        run_total = sum(steps.values())

        gd = scoring.run_examples(caches["zsl"], caches["icl"], caches["gd"], random_seed=0)
        scoring.write_examples(gd, folder / "gd_examples.parquet")
        t = time.perf_counter()
        scoring.write_aggregates(
            [str(folder / "scores.parquet")],
            folder / "runs.parquet",
            folder / "summary.parquet",
            folder / "summary.csv",
            [str(folder / "examples.parquet")],
            n_boot=args.n_boot,
        )
        steps["aggregate (one run)"] = time.perf_counter() - t
        t = time.perf_counter()
        comparisons.write_comparisons(
            [str(folder / "examples.parquet"), str(folder / "gd_examples.parquet")],
            folder / "c.parquet",
            folder / "c.csv",
            "gd",
            n_boot=args.n_boot,
        )
        steps["paired comparison (lcgd vs gd)"] = time.perf_counter() - t

        for name, seconds in steps.items():
            print(f"{name + ':':40s} {seconds:6.2f} s")
        print(f"{'score_run total (one run):':40s} {run_total:6.2f} s   target <= 4 s (issue 32)")


if __name__ == "__main__":
    main()
