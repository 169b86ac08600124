"""One run in a further order of its demonstrations (config key orders): its per-example values,
scored as the run's own order is (score_run)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate()  # into the warm worker, where there is one (icl_gd/common/warm.py)
from icl_gd.common.runtime import log_to

log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
from icl_gd.activations import cache
from icl_gd.metrics import scoring

examples = scoring.run_examples(
    cache.read_cache(snakemake.input.zsl),
    cache.read_cache(snakemake.input.icl),
    cache.read_cache(snakemake.input.ft),
    random_seed=snakemake.params.random_seed,
)
scoring.write_examples(examples, snakemake.output.examples)
