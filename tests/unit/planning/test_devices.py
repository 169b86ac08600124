"""A job on a named GPU (icl_gd.planning.devices): the devices' figures, a job's seconds and memory
by them against the jobs they were measured on, a checkpoint's size, and a local run's start."""

from __future__ import annotations

import pytest

from icl_gd.activations import work
from icl_gd.planning import devices

SHAPE = work.Shape(n_layers=2, d_model=8, n_heads=2, vocab=10, block_params=100)


def test_a_named_device_by_its_figures():
    device = devices.Device(
        "X",
        {4: 1e12, 2: 4e12},
        efficiency={"zsl": 0.5, "gd": 0.25},
        step_s={"gd": 0.01},
        fixed_s={"zsl": 1.0, "gd": 3.0},
        load_gbps=1.0,
        run_start_s=9.0,
        cold_start_s=5.0,
        host_base_mb=100.0,
        cuda_host_mb=50.0,
    )
    job = work.Work(path="gd", eval_flops=1e12, train_flops=1e11, longest=4, steps=10)
    weights = (100 + 2 * 10 * 8) * 4  # the blocks' linears, an embedding and a head of 10 x 8
    seconds, host_mb, gpu_mb = devices.on_device(SHAPE, job, device, batch_size=16)
    # fixed, the checkpoint at 1 GB/s, 1.1 TFLOP at a quarter of 2 x 4 TFLOP/s halved for 32 bits, 10 steps
    assert seconds == pytest.approx(3.0 + weights / 1e9 + 1.1e12 / 0.5e12 + 0.1)
    assert devices.on_device(SHAPE, job, device, 16, warm=False)[0] == pytest.approx(seconds + 5.0)
    # a float32 checkpoint loaded as float32: its pages alone; CUDA's host memory where the load is smaller
    assert host_mb == pytest.approx(100.0 + max(weights / 2**20, 50.0))
    kv = 2 * 2 * 8 * 8 * 4  # the K/V weights' float32 master copy, and as much again for their gradients
    assert gpu_mb == pytest.approx((weights + 2 * kv) / 2**20 + devices.activation_mb(SHAPE, job, 16))
    # an unmeasured path: linearized takes GD's figures and 1.5 of its steps; 32 bits, at most the peak
    assert device.step_seconds("linearized") == pytest.approx(0.015) and device.fixed_seconds("linearized") == 3.0
    assert device.flops_per_s("zsl", 2) == 2e12 and device.flops_per_s("zsl", 4) == 1e12
    assert set(devices.DEVICES) == {"A100", "H100", "H200"}
    assert "measured" in devices.DEVICES["H100"].summary(2) and "SCALED" in devices.DEVICES["A100"].summary(2)


# The measurements the devices' figures come from (devices.py; docs/performance.md, "The estimate on a
# GPU"): configs/benchmark-1.3b.yaml's shape (a GPT-2 of the fairseq dense 1.3B's shape, vocabulary
# 2000), bfloat16, 2000 evaluation examples, four jobs at a time on one GPU.
BENCH = work.Shape(n_layers=24, d_model=2048, n_heads=32, vocab=2000, block_params=1207959552, dtype_bytes=2)
CHECKPOINT = (4642.1 * 2**20, 4)  # its folder: float32 safetensors
# The H200 run: per setting, its finished jobs (identified from Snakemake's log), their work
# (eval GFLOP, training GFLOP, steps, summed over the jobs) and their records' seconds, summed
H200_RUN = {
    "gd": (16, "gd", 1778494, 55596, 512, 174.4),
    "gd_switched": (12, "gd", 1156602, 36262, 384, 137.4),
    "icl": (13, "icl", 1284207, 0, 0, 98.1),
    "icl_switched": (12, "icl", 1173205, 0, 0, 90.9),
    "lcgd": (12, "lcgd", 1156602, 38927, 384, 133.2),
    "lcgd_clip": (3, "lcgd", 325350, 10646, 96, 35.4),
    "zsl": (8, "zsl", 1018172, 0, 0, 107.5),  # the first four waited for the warm worker's imports
}
# The H100's jobs, four at a time: (eval GFLOP, training GFLOP, steps, the two runs' mean seconds)
H100_JOBS = {
    ("sst2", "zsl"): (82657, 0, 0, 4.69),
    ("agnews", "zsl"): (213243, 0, 0, 6.37),
    ("sst2", "icl"): (82666, 0, 0, 8.24),
    ("agnews", "icl"): (234999, 0, 0, 11.76),
    ("sst2", "gd"): (82657, 2669, 32, 10.24),
    ("agnews", "gd"): (213243, 6630, 32, 13.77),
    ("sst2", "lcgd"): (82657, 2863, 32, 10.50),
    ("agnews", "lcgd"): (213243, 7131, 32, 12.15),
}
HOST_PEAK_MB = 7486  # the largest of the H200 run's records (the H100's jobs: 7,470-7,481 MB)


@pytest.mark.parametrize("name", ["H100", "H200"])
def test_the_gpu_figures_give_the_measured_jobs_seconds(name):
    """Each setting's jobs of the H200 run within 25% of their records (the H100's figures too: the
    jobs' time is mostly the host's), the H100's own jobs each within 25% of theirs; the figures
    assumed before (40% and 10% of the peak, 20 s a job) were 1.6-2.9 times the records."""
    device = devices.DEVICES[name]
    for setting, (n, path, eval_gflop, train_gflop, steps, measured) in H200_RUN.items():
        # the model is linear in a job's work: n jobs of the mean work
        mean = work.Work(path=path, eval_flops=eval_gflop * 1e9 / n, train_flops=train_gflop * 1e9 / n, steps=steps / n)
        seconds = n * devices.on_device(BENCH, mean, device, 128, checkpoint=CHECKPOINT)[0]
        if setting == "zsl":
            seconds += 4 * device.run_start_s
        assert 0.75 < seconds / measured < 1.25, (setting, seconds, measured)
    if name == "H100":
        for (task, path), (eval_gflop, train_gflop, steps, measured) in H100_JOBS.items():
            job = work.Work(path=path, eval_flops=eval_gflop * 1e9, train_flops=train_gflop * 1e9, steps=steps)
            seconds = devices.on_device(BENCH, job, device, 128, checkpoint=CHECKPOINT)[0]
            assert 0.75 < seconds / measured < 1.25, (task, path, seconds, measured)


@pytest.mark.parametrize("name", ["A100", "H100", "H200"])
def test_a_gpu_jobs_memory_request_clears_its_measured_host_peak(name):
    """The load of a float32 checkpoint as bfloat16 holds the checkpoint's pages and the cast copy
    at once (7.5 GB at the 1.3B shape, measured: CUDA's own host memory, 225 MB, comes after it):
    the predicted peak is at least the measured one, and the SLURM request (x 1.5) 1.25 times it."""
    from icl_gd.planning import resources

    job = work.Work(path="icl", eval_flops=1e14, examples=2000, longest=1433, prefix=1366)
    _, host_mb, _ = devices.on_device(BENCH, job, devices.DEVICES[name], 128, checkpoint=CHECKPOINT)
    assert HOST_PEAK_MB <= host_mb < 1.1 * HOST_PEAK_MB
    assert resources.request((60.0, host_mb), (8000, 60), 1, {})["mem_mb"] >= 1.25 * HOST_PEAK_MB
    # without the folder (or its weight files): its weights taken as a float32 checkpoint, the largest
    assert devices.on_device(BENCH, job, devices.DEVICES[name], 128)[1] == pytest.approx(host_mb, rel=0.01)
    assert devices.on_device(BENCH, job, devices.DEVICES[name], 128, checkpoint=(0.0, None))[1] == pytest.approx(
        host_mb, rel=0.01
    )
    # a checkpoint stored in the run's dtype is not cast: its pages alone
    same = devices.on_device(BENCH, job, devices.DEVICES[name], 128, checkpoint=(2321 * 2**20, 2))[1]
    assert same == pytest.approx(devices.DEVICES[name].host_base_mb + 2321)
    # a tiny model: CUDA's host memory is the larger
    tiny = devices.on_device(SHAPE, job, devices.DEVICES[name], 128)[1]
    assert tiny == pytest.approx(devices.DEVICES[name].host_base_mb + devices.DEVICES[name].cuda_host_mb)


def test_a_checkpoints_bytes_and_stored_dtype(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "extra.bin").write_bytes(b"x" * 24)
    (tmp_path / "tokenizer.json").write_bytes(b"x" * 500)
    (tmp_path / "config.json").write_text('{"dtype": "bfloat16"}')
    assert devices.checkpoint_of(str(tmp_path)) == (1024.0, 2)
    (tmp_path / "config.json").write_text('{"torch_dtype": "float32"}')  # transformers 4's name
    assert devices.checkpoint_of(str(tmp_path)) == (1024.0, 4)
    (tmp_path / "config.json").write_text("{}")
    assert devices.checkpoint_of(str(tmp_path)) == (1024.0, None)


def test_a_local_runs_start_falls_on_the_jobs_that_can_start_first():
    """As many jobs as run at once wait for the warm worker's imports, among the ZSL jobs of each
    model's trained variant (all the others follow them or a new variant): an equal share each."""
    import pandas as pd

    rows = [dict(rule="extract_zsl", model="m", variant=v, setting="zsl") for v in ["trained"] * 6 + ["untrained"] * 6]
    rows += [dict(rule="extract_base", model="m", variant="trained", setting="icl")]
    rows += [dict(rule="extract_zsl", model="n", variant="untrained", setting="zsl")] * 2  # no trained variant
    share = devices.run_start(pd.DataFrame(rows), 15.0, slots=4)
    assert list(share) == [10.0] * 6 + [0.0] * 7 + [15.0] * 2
    assert share.sum() == pytest.approx(15.0 * 4 + 15.0 * 2)
