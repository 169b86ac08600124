"""Render one of the papers' figures (PNG and PDF) from the metrics or the training logs."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.report import outputs

inputs = dict(snakemake.input.items())
outputs.write_figures(
    inputs.get("runs"),
    inputs.get("summary"),
    snakemake.output,
    train_logs=inputs.get("train_logs", []),
    sizes_path=inputs.get("sizes"),
    claims_path=inputs.get("claims"),
    premise_path=inputs.get("premise"),
    orders_path=inputs.get("orders"),
    **snakemake.params.figure,
)
