"""Normalise one task's train and eval splits (synthetic twin, hub dataset, local files or a
package's corpus)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
import pandas as pd

from icl_gd.common import frames
from icl_gd.common.specs import TaskSpec
from icl_gd.data import sources

spec = TaskSpec.from_params(snakemake.params.task)  # resolved from the config by the rule
if spec.source == "synthetic":
    splits = {
        s: sources.normalise_split(pd.read_parquet(snakemake.input[f"twin_{s}"]), spec, s) for s in ("train", "eval")
    }
else:
    archive = snakemake.input.get("archive")  # source package: the corpus's archive (rule fetch_package)
    splits = sources.load_task_splits(spec, cache_dir=str(Path("resources/hf_datasets")), archive=archive)
for split, frame in splits.items():
    print(f"{split}: {len(frame)} rows, per class {frame['label'].value_counts().sort_index().to_dict()}")
    frames.atomic_write_frame(frame, snakemake.output[split])
