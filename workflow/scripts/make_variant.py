"""Materialise a model variant (untrained, trained embeddings, layer norms only)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate(wait_s=warm.MODEL_JOB_WAIT_S)  # into the warm worker (icl_gd/common/warm.py), once it is ready
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], threads=snakemake.threads, benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.models import loading

loading.make_variant(snakemake.input.trained, snakemake.wildcards.variant, snakemake.params.seed, snakemake.output[0])
