"""Choose the learning rate and epochs of each choosing method of each variant of a model, on a
task's development rows: every grid point finetuned on each seed's demonstrations and scored there
(icl_gd/activations/choice.py), the rule of icl_gd/metrics/setting_choice.py applied per variant
and method."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate(wait_s=warm.MODEL_JOB_WAIT_S)  # into the warm worker (icl_gd/common/warm.py), once it is ready
from icl_gd.common.runtime import claim_gpu, log_to

log_to(snakemake.log[0], threads=snakemake.threads, benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)
import logging

from icl_gd.activations import choice
from icl_gd.common import frames, provenance
from icl_gd.metrics import setting_choice

claim_gpu(snakemake.config["device"], jobs_per_gpu=snakemake.resources.jobs_per_gpu)

w, spec = snakemake.wildcards, snakemake.params.choice
grid = choice.run_job(
    spec,
    model_dirs={variant: snakemake.input[f"model_{variant}"] for variant in {c["variant"] for c in spec["choices"]}},
    train_path=snakemake.input.train,
    eval_path=snakemake.input.eval,
    device=snakemake.config["device"],
    batch_size=snakemake.config["batch_size"],
)
device = grid.attrs["device"]
table = setting_choice.mark_finetuning_choices(grid.assign(model=w.model, task=w.task))
for (variant, method), found in table.groupby(["variant", "method"], sort=False):
    chosen = setting_choice.chosen_of(found)
    logging.getLogger("choose_finetuning").info(
        "%s/%s/%s %s: lr %g, %d epoch(s), development accuracy %.3f over %d seed(s)",
        w.model,
        variant,
        w.task,
        method,
        chosen["lr"],
        chosen["epochs"],
        found.loc[found["chosen"], "mean_accuracy"].iloc[0],
        found["seed"].nunique(),
    )
made_by = {
    "caches": [provenance.collect(device, spec["choices"][0]["runs"][0]["dtype"])],
    "computed": provenance.software(),
}
frames.atomic_write_frame(table, snakemake.output.table, made_by)
