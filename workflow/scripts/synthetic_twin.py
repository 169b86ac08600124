"""Generate the synthetic twin of one built-in task (train and eval splits)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.common import frames
from icl_gd.data import twins

params = snakemake.params.synthetic
splits = twins.make_synthetic_task(
    snakemake.wildcards.twin, n_train=params["n_train"], n_eval=params["n_eval"], seed=params["seed"]
)
for split, frame in splits.items():
    frames.atomic_write_frame(frame, snakemake.output[split])
