"""One run's order sensitivity per example, from its per-example values in every order (its own
first): icl_gd/metrics/orders.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.metrics import orders

orders.write_order_sensitivity(list(snakemake.input), snakemake.output[0])
