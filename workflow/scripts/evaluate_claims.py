"""Test the papers' claims on every model of the run, paired by example, and their premise (parquet and CSV)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.metrics import claim_testing

stats = snakemake.params.statistics
claim_testing.write_claim_tests(
    snakemake.input.examples,
    snakemake.output.table,
    snakemake.output.csv,
    snakemake.params.roles,
    # the premise once, with the protocol's roles (rule evaluate_claims); rule evaluate_claims_chosen reads
    # the claims alone, with the chosen ones
    premise_paths=(snakemake.output.premise, snakemake.output.premise_csv)
    if "premise" in snakemake.output.keys()
    else None,
    methods_paths=(
        (snakemake.output.premise_methods, snakemake.output.premise_methods_csv)
        if "premise_methods" in snakemake.output.keys()
        else None
    ),
    labels=snakemake.params.labels,
    order_paths=snakemake.input.get("orders", []),
    premise_example_paths=snakemake.input.get("premise", []),
    n_boot=stats["n_boot"],
    level=stats["ci_level"],
    seed=stats["seed"],
    max_replicates=stats["max_replicates"],
)
