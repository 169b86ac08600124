"""Every metric of one run (ZSL, ICL and one finetuning method, and ICL on permuted labels and on
novel label words where the premise reads it), per layer, with bootstrap intervals; and the run's
per-example values, for the aggregate's intervals and the comparisons."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.activations import cache
from icl_gd.common import frames
from icl_gd.metrics import scoring

stats = snakemake.params.statistics
examples = scoring.run_examples(
    cache.read_cache(snakemake.input.zsl),
    cache.read_cache(snakemake.input.icl),
    cache.read_cache(snakemake.input.ft),
    cache.read_cache(snakemake.input.base) if "base" in snakemake.input.keys() else None,
    permuted=cache.read_cache(snakemake.input.permuted) if "permuted" in snakemake.input.keys() else None,
    novel=cache.read_cache(snakemake.input.novel) if "novel" in snakemake.input.keys() else None,
    random_seed=snakemake.params.random_seed,
)
table = scoring.score_examples(examples, n_boot=stats["n_boot"], level=stats["ci_level"], ci_seed=stats["seed"])
scoring.write_examples(examples, snakemake.output.examples)
frames.atomic_write_frame(table, snakemake.output.scores, scoring.runs_provenance([examples]))
