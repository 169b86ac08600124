"""Every method against the baseline method, paired by example over seeds (parquet and CSV)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.metrics import comparisons

stats = snakemake.params.statistics
comparisons.write_comparisons(
    snakemake.input.examples,
    snakemake.output.table,
    snakemake.output.csv,
    stats["baseline_method"],
    n_boot=stats["n_boot"],
    n_perm=stats["n_permutations"],
    level=stats["ci_level"],
    significance=stats["significance_level"],
    seed=stats["seed"],
)
