"""Each model's size from its own folder: parameters, layers, width (the sizes figure's x axis)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate(wait_s=warm.MODEL_JOB_WAIT_S)  # into the warm worker (icl_gd/common/warm.py), once it is ready
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
import pandas as pd

from icl_gd.common import frames
from icl_gd.models import loading

rows = [loading.model_statistics(name, path) for name, path in snakemake.input.items()]
frames.atomic_write_frame(pd.DataFrame(rows), snakemake.output[0])
