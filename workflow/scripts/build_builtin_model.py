"""Train the built-in model and its tokenizer on the synthetic twins (on a GPU where there is one)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate(wait_s=warm.MODEL_JOB_WAIT_S)  # into the warm worker (icl_gd/common/warm.py), once it is ready
from icl_gd.common.runtime import claim_gpu, log_to

log_to(snakemake.log[0], threads=snakemake.threads, benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
claim_gpu(snakemake.config["device"])
from icl_gd.models import builtin, shipped

spec = snakemake.params.spec
# found as the rule's parameter found it (the working directory, else the workflow's folder)
workflow_dir = Path(snakemake.scriptdir).resolve().parents[1]
made = builtin.make(
    dict(zip(snakemake.params.twins, snakemake.input.train)),
    snakemake.output[0],
    spec,
    device=snakemake.config["device"],
    name=snakemake.wildcards.model,
    shipped_folder=shipped.locate(spec["weights"], workflow_dir) if spec.get("weights") else None,
)
# for the job's benchmark record: the pretraining's work, counted as the cost estimate counts it
from icl_gd.activations import work
from icl_gd.common import benchmark

if made["trained"]:
    benchmark.note(gflop=round(work.pretrain_spec_work(work.shape_of(snakemake.output[0]), spec).flops / 1e9, 4))
