"""The per-example predictions of a run of the premise alone, on a seed the claims do not read:
ZSL, ICL and ICL on permuted labels and on novel label words (icl_gd/metrics/scoring.py, icl_examples)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.activations import cache
from icl_gd.metrics import scoring

examples = scoring.icl_examples(
    cache.read_cache(snakemake.input.zsl),
    cache.read_cache(snakemake.input.icl),
    cache.read_cache(snakemake.input.permuted),
    method=snakemake.wildcards.method,
    novel=cache.read_cache(snakemake.input.novel),
)
scoring.write_examples(examples, snakemake.output.examples)
