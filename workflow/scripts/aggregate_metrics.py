"""Concatenate the per-run metrics and aggregate them over seeds (parquet and CSV), with the
bootstrap interval of each mean."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.metrics import scoring

stats = snakemake.params.statistics
scoring.write_aggregates(
    snakemake.input.runs,
    snakemake.output.runs,
    snakemake.output.summary,
    snakemake.output.csv,
    snakemake.input.examples,
    n_boot=stats["n_boot"],
    level=stats["ci_level"],
    ci_seed=stats["seed"],
)
