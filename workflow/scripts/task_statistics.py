"""One task's split sizes, examples evaluated and prompt lengths in the model's tokens."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.activations import cache
from icl_gd.common import frames, provenance
from icl_gd.metrics import statistics

files = {key: snakemake.input[key] for key in ("train", "eval", "zsl", "icl")}
made_by = {
    "caches": provenance.distinct(cache.read_cache(files[s]).meta.get(provenance.KEY) for s in ("zsl", "icl")),
    "computed": provenance.software(),
}
frames.atomic_write_frame(statistics.data_statistics({snakemake.wildcards.task: files}), snakemake.output[0], made_by)
