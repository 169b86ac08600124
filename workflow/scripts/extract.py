"""Extract one (model, variant, task, seed, setting) cache; training methods finetune first."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate(wait_s=warm.MODEL_JOB_WAIT_S)  # into the warm worker (icl_gd/common/warm.py), once it is ready
from icl_gd.common.runtime import claim_gpu, log_to

log_to(snakemake.log[0], threads=snakemake.threads, benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
# The imports (torch, transformers: the bulk of a job's start-up before its model loads) come
# before the wait for a GPU slot, so a job that waits starts computing as soon as one frees. They
# must not touch CUDA (tests/unit/common/test_runtime.py checks): CUDA fixes the devices it sees when it
# starts, even for torch.cuda.is_available(), and claim_gpu has yet to choose them.
from icl_gd.activations import extract

claim_gpu(snakemake.config["device"], jobs_per_gpu=snakemake.resources.jobs_per_gpu)

w = snakemake.wildcards
extract.run(
    snakemake.params.run,
    model_name=w.model,
    variant=w.variant,
    model_dir=snakemake.input.model,
    train_path=snakemake.input.train,
    eval_path=snakemake.input.eval,
    out_path=snakemake.output.cache,
    train_log_path=snakemake.output.get("train_log"),
    reference_path=snakemake.input.get("reference"),
    device=snakemake.config["device"],
    batch_size=snakemake.config["batch_size"],
)
