"""Print (and log) what the config's activation caches will take on disk, from the models' shapes
and tokenizers and the tasks' data: before any extraction runs."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
import logging
import os

from icl_gd.common.runtime import log_to

terminal = os.fdopen(os.dup(1), "w")  # this rule exists to print: the job's stdout, before the log takes it
log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)

from icl_gd.planning import disk

config = snakemake.config
caches = disk.estimate_from_files(config, snakemake.params.model_dirs, snakemake.params.task_files)
text = disk.describe(caches, config["cache_dtype"], config["caches"])
logging.getLogger("disk_estimate").info("\n%s", text)
print(text, file=terminal, flush=True)
