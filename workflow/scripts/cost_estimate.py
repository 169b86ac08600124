"""Print (and log) what the config's model jobs will take, and write the per-job table: each
model's paths timed on this machine (icl_gd/planning/timing.py), every job's work counted
(icl_gd/planning/cost.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).resolve().parents[1] / "src"))
from icl_gd.common import warm

warm.delegate(wait_s=warm.MODEL_JOB_WAIT_S)  # into the warm worker (icl_gd/common/warm.py), once it is ready
import logging
import os
import tempfile

from icl_gd.common.runtime import claim_gpu, log_to

terminal = os.fdopen(os.dup(1), "w")  # this rule exists to print: the job's stdout, before the log takes it
log_to(snakemake.log[0], benchmark=snakemake.log.get("benchmark"), outputs=snakemake.output)

from icl_gd.activations.work import DTYPE_BYTES, shape_of
from icl_gd.planning import build_cost, cost, devices
from icl_gd.planning.timing import calibrate

claim_gpu(snakemake.config["device"], jobs_per_gpu=snakemake.resources.jobs_per_gpu)
from icl_gd.common.frames import write_tsv

config = snakemake.config
say = logging.getLogger("cost_estimate").info
sequences = cost.sequences_from_files(config, snakemake.params.model_dirs, snakemake.params.task_files)
shapes = {model: shape_of(folder, config["dtype"]) for model, folder in snakemake.params.model_dirs.items()}
# the built-in models whose build copies their shipped weights: priced as a copy, their pretraining not timed
copied = build_cost.shipped_copies(config, snakemake.params.model_dirs, Path(snakemake.scriptdir).resolve().parents[1])
if config["cost_device"] == "here":
    with tempfile.TemporaryDirectory() as workdir:
        calibration = calibrate(
            config,
            shapes,
            sequences,
            snakemake.params.model_dirs,
            snakemake.params.task_files,
            workdir,
            warm=snakemake.params.warm,
            copies=snakemake.params.copies,
            min_seconds=config["cost_calibration_s"],
            copied=copied,
            log=say,
        )
    table = cost.estimate(config, shapes, sequences, calibration, copied=copied)
    where = f"timed on this machine (calibration: {calibration.seconds:.0f} s)"
else:
    device = devices.DEVICES[config["cost_device"]]
    table = cost.estimate(
        config,
        shapes,
        sequences,
        None,
        device,
        warm=snakemake.params.warm,
        slots=snakemake.params.gpu_jobs,
        checkpoints={model: devices.checkpoint_of(folder) for model, folder in snakemake.params.model_dirs.items()},
        copied=copied,
    )
    where = device.summary(DTYPE_BYTES[config["dtype"]])
write_tsv(table, snakemake.params.table)
text = cost.describe(table, where) + f"\nper job: {snakemake.params.table}"
say("\n%s", text)
print(text, file=terminal, flush=True)
