"""The order sensitivity of ICL and each method over tasks and seeds, with intervals (parquet, CSV)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.metrics import orders

stats = snakemake.params.statistics
orders.write_order_table(
    list(snakemake.input),
    snakemake.output.table,
    snakemake.output.csv,
    n_boot=stats["n_boot"],
    level=stats["ci_level"],
    ci_seed=stats["seed"],
)
