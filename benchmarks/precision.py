"""Numerical precision of a run: half-precision finetuning against float32, and float16 caches
against float32 ones.

    python benchmarks/precision.py --model resources/models/tiny/trained --data resources/datasets
    python benchmarks/precision.py --model DIR --data DIR --tasks sst2 sst5 --device cuda

Needs a model directory and prepared task splits (``resources/datasets/<task>/{train,eval}.parquet``,
e.g. from a finished run). For each task, its first protocol seed and ``--method`` (gd, at the
task's protocol learning rate), it extracts float32 caches of ZSL, ICL and the method with the model
in float32, and of ZSL and the method with the model in ``--half`` (bfloat16), then prints:

1. half-precision finetuning: the method's change of the attention outputs, h_FT - h_ZSL, computed
   in half precision against float32: cosine (mean over examples, then over layers; and the worst
   layer) and norm ratio (the measurement of issue 12);
2. cache precision: SimAOU, SimAOU_norm and SimAM_delta (layer means) from the float32 caches and
   from the same caches rounded to float16 (what ``cache_dtype: float16`` stores), against the
   half-width of their bootstrap interval.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from icl_gd import cache, config as cfg, extract, plan, scoring, validation  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
COMPARED = ("simaou", "simaou_norm", "simam_delta")


def run_config(task: str, method: str, dtype: str, max_eval: int, device: str) -> dict:
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    raw = {"models": {"m": {"source": "local", "path": "."}}, "tasks": {task: {}},
           "methods": {method: {"kind": method}}, "variants": {"trained": [method]},
           "max_eval": max_eval, "dtype": dtype, "cache_dtype": "float32", "device": device}
    return validation.validate(raw, schema)


def change_agreement(zsl32, ft32, zsl16, ft16) -> tuple[np.ndarray, float]:
    """Per layer, the mean over examples of cos(d16, d32) for d = h_FT - h_ZSL; and |d16| / |d32|."""
    d32 = ft32.attn_out.astype(np.float64) - zsl32.attn_out
    d16 = ft16.attn_out.astype(np.float64) - zsl16.attn_out
    cos = (d16 * d32).sum(-1) / (np.linalg.norm(d16, axis=-1) * np.linalg.norm(d32, axis=-1))
    return np.nanmean(cos, axis=0), float(np.linalg.norm(d16) / np.linalg.norm(d32))


def rounded(run: cache.RunCache) -> cache.RunCache:
    """The cache as ``cache_dtype: float16`` would have stored it."""
    def f16(a):
        return a.astype(np.float16).astype(np.float32)

    return dataclasses.replace(run, attn_out=f16(run.attn_out), attn_scores=f16(run.attn_scores),
                               context_scores=f16(run.context_scores))


def layer_means(zsl, icl, ft) -> dict[str, tuple[float, float, float]]:
    table = scoring.score_run(zsl, icl, ft)
    rows = table[table["layer"].isna() & table["metric"].isin(COMPARED)]
    return {r.metric: (r.value, r.ci_low, r.ci_high) for r in rows.itertuples()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a model directory (save_pretrained layout)")
    parser.add_argument("--data", default="resources/datasets", help="folder of <task>/{train,eval}.parquet")
    parser.add_argument("--tasks", nargs="+", default=list(cfg.TASK_PRESETS))
    parser.add_argument("--method", default="gd", choices=cfg.METHOD_KINDS)
    parser.add_argument("--half", default="bfloat16", choices=("bfloat16", "float16"))
    parser.add_argument("--max-eval", type=int, default=200)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    out = Path(tempfile.mkdtemp(prefix="precision-"))
    print(f"model {args.model}, {args.method}, {args.half} against float32, {args.max_eval} examples; caches in {out}")
    print(f"{'task':8s} {'lr':>8s} {'cos(dh16,dh32)':>15s} {'worst layer':>12s} {'norm ratio':>11s}   "
          + "   ".join(f"{m}: f32 / f16 - f32 / CI half-width" for m in COMPARED))
    for task in args.tasks:
        started = time.time()
        seed = cfg.task_seeds({"tasks": {task: {}}}, task)[0]
        files = dict(train_path=str(Path(args.data) / task / "train.parquet"),
                     eval_path=str(Path(args.data) / task / "eval.parquet"))
        caches = {}
        for dtype, settings in (("float32", ("zsl", "icl", args.method)), (args.half, ("zsl", args.method))):
            config = run_config(task, args.method, dtype, args.max_eval, args.device)
            for setting in settings:
                path = out / f"{task}-{dtype}-{setting}.parquet"
                extract.run(plan.run_spec(config, task, setting, seed), model_name="m", variant="trained",
                            model_dir=args.model, out_path=str(path), device=args.device, **files)
                caches[dtype, setting] = cache.read_cache(path)
        per_layer, ratio = change_agreement(caches["float32", "zsl"], caches["float32", args.method],
                                            caches[args.half, "zsl"], caches[args.half, args.method])
        exact = layer_means(caches["float32", "zsl"], caches["float32", "icl"], caches["float32", args.method])
        stored = layer_means(*(rounded(caches["float32", s]) for s in ("zsl", "icl", args.method)))
        cells = []
        for metric in COMPARED:
            value, low, high = exact[metric]
            cells.append(f"{value:+.4f} / {stored[metric][0] - value:+.1e} / {(high - low) / 2:.1e}")
        lr = cfg.learning_rate(config, task, args.method)
        print(f"{task:8s} {lr:8.2g} {np.nanmean(per_layer):15.4f} {np.nanmin(per_layer):12.4f} {ratio:11.3f}   "
              + "   ".join(cells) + f"   ({time.time() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
