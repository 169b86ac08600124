"""What a built-in model's build costs (rule ``build_builtin_model``): a training, or a copy.

The build copies the weights shipped in the repository (config key ``weights``) where they were made
for the model's recipe (models/shipped.py), and otherwise pretrains. A pretraining, a job unlike
the extractions (no task, no seed, its own loop), is priced from its FLOPs (counted as
``work.pretrain_spec_work`` counts them and as the build job notes them in its benchmark record)
at the rate the calibration timed for its ``pretrain`` path (``timing``), or on a named device by
that device's figures for a training (``devices``). A copy is priced as one: a job's start and the
folder's bytes, no FLOPs; priced as a training, it took most of an estimate whose build took 0.1 s.
"""

from __future__ import annotations

import math
from pathlib import Path

from icl_gd.activations.work import Shape, Work, pretrain_spec_work
from icl_gd.models import shipped
from icl_gd.planning.devices import LOAD_GBPS, Device, on_device
from icl_gd.planning.timing import Calibration, predict


def shipped_copies(config: dict, model_dirs: dict[str, str], workflow_dir: str | Path) -> dict[str, float]:
    """{model: its shipped folder's bytes} for each built-in model whose build copies its shipped
    weights: the shipped folder's recipe checksum is the built model's (``recipe.json``). The
    built folder is the cost estimate's input, so its build has run for the config's recipe and
    holds that recipe's checksum: the two checksums compared, the twins' rows and the training
    code need not be read again. The shipped folder is found as the rule finds it (``shipped.locate``)."""
    copies = {}
    for model, built in model_dirs.items():
        spec = config["models"][model]
        if spec["source"] != "builtin" or not spec.get("weights"):
            continue
        folder = shipped.locate(spec["weights"], workflow_dir)
        if folder is not None and shipped.shipped_checksum(folder) == shipped.shipped_checksum(built):
            copies[model] = float(sum(f.stat().st_size for f in folder.iterdir() if f.is_file()))
    return copies


def build_row(
    model: str,
    spec: dict,
    shape: Shape,
    calibration: Calibration | None,
    device: Device | None,
    batch: int,
    warm: bool,
    checkpoint: tuple | None,
    copy_bytes: float | None = None,
) -> dict | None:
    """The estimate's row of a model's build: None where there is no pretraining to price (not a
    built-in model, or one without ``pretrain_steps``). ``copy_bytes``: the shipped folder's bytes
    where the build copies it (``shipped_copies``), then priced as a copy (path ``copy``). Seconds
    and peak MB from ``calibration`` (NaN where it timed no pretraining), or on ``device`` (then
    GPU MB too)."""
    if spec["source"] != "builtin" or not spec.get("pretrain_steps"):
        return None
    if copy_bytes is not None:
        return _copy_row(model, calibration, device, warm, copy_bytes)
    work = pretrain_spec_work(shape, spec)
    gpu = math.nan
    if device is not None:
        seconds, peak, gpu = on_device(shape, work, device, batch, warm=warm, checkpoint=checkpoint)
    elif rate := calibration.paths[model].get("pretrain"):
        seconds, peak = predict(shape, work, rate, calibration.start_s, batch)
    else:
        seconds, peak = math.nan, math.nan
    return dict(
        rule="build_builtin_model", model=model, setting="", path="pretrain", work=work, s=seconds, mb=peak, gpu=gpu
    )


def _copy_row(
    model: str, calibration: Calibration | None, device: Device | None, warm: bool, copy_bytes: float
) -> dict:
    """A copy of the shipped folder: the job's start and the folder's bytes read and written at
    the rate a checkpoint was read on the GPU hosts (ASSUMED anywhere: a tiny model's few MB take
    milliseconds). Its memory: a job's process, at most as much as the smallest job timed here
    (ZSL's, which also holds the model), or on a device its process before a model; nothing on a
    GPU."""
    if device is not None:
        seconds = (0.0 if warm else device.cold_start_s) + copy_bytes / (device.load_gbps * 1e9)
        peak, gpu = device.host_base_mb, 0.0
    else:
        seconds = calibration.start_s + copy_bytes / (LOAD_GBPS * 1e9)
        peak, gpu = calibration.paths[model]["zsl"].peak_mb, math.nan
    return dict(
        rule="build_builtin_model",
        model=model,
        setting="",
        path="copy",
        work=Work(path="copy"),
        s=seconds,
        mb=peak,
        gpu=gpu,
    )
