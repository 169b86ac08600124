"""Every task's statistics (one file each, from task_statistics) in one table, in config order."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
import pandas as pd

from icl_gd.common import frames, provenance

tables = [frames.read_frame(path) for path in snakemake.input]
records = [r for path in snakemake.input for r in (frames.read_provenance(path) or {}).get("caches", [])]
made_by = {"caches": provenance.distinct(records), "computed": provenance.software()}
frames.atomic_write_frame(pd.concat(tables, ignore_index=True), snakemake.output[0], made_by)
