"""What a built-in model's build costs (rule ``build_builtin_model``): its pretraining, a job unlike
the extractions (no task, no seed, its own loop), priced from its FLOPs (counted as
``work.pretrain_spec_work`` counts them and as the build job notes them in its benchmark record) at
the rate the calibration timed for its ``pretrain`` path (``timing``), or on a named device by that
device's figures for a training (``devices``).
"""

from __future__ import annotations

import math

from icl_gd.activations.work import Shape, pretrain_spec_work
from icl_gd.planning.devices import Device, on_device
from icl_gd.planning.timing import Calibration, predict


def build_row(
    model: str,
    spec: dict,
    shape: Shape,
    calibration: Calibration | None,
    device: Device | None,
    batch: int,
    warm: bool,
    checkpoint: tuple | None,
) -> dict | None:
    """The estimate's row of a model's build: None where there is no pretraining to price (not a
    built-in model, or one without ``pretrain_steps``). Seconds and peak MB from ``calibration``
    (NaN where it timed no pretraining), or on ``device`` (then GPU MB too)."""
    if spec["source"] != "builtin" or not spec.get("pretrain_steps"):
        return None
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
