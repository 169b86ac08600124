"""Every metric of one run (ZSL, ICL and one finetuning method), per layer."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))
from icl_gd.runtime import log_to

log_to(snakemake.log[0])
from icl_gd import cache, scoring

table = scoring.score_run(
    cache.read_cache(snakemake.input.zsl),
    cache.read_cache(snakemake.input.icl),
    cache.read_cache(snakemake.input.ft),
    random_seed=snakemake.params.random_seed,
)
cache.atomic_write_frame(table, snakemake.output[0])
