"""The cost estimate's arithmetic (icl_gd.cost): the rates fitted from timed runs, a job's predicted
time and memory, and the forked calibration runs."""

from __future__ import annotations

import pytest

from icl_gd import cost
from icl_gd.activations import work

SHAPE = work.Shape(n_layers=2, d_model=8, n_heads=2, vocab=10, block_params=100)


def test_rates_from_two_runs_and_a_prediction():
    assert cost._two_point([(1.0, 3.0), (3.0, 7.0)]) == (1.0, 2.0)
    assert cost._two_point([(1.0, 3.0), (3.0, 2.5)]) == (3.0, 0.0)  # noise: all of it fixed
    calibrated = work.Work(path="zsl", eval_flops=1e9, longest=4)
    rate = cost.PathRate(fixed_s=0.5, s_per_gflop=2.0, peak_mb=400.0, work=calibrated)
    job = work.Work(path="zsl", eval_flops=3e9, longest=4)
    seconds, peak = cost.predict(SHAPE, job, rate, start_s=0.1, batch_size=16)
    assert seconds == pytest.approx(0.1 + 0.5 + 6.0) and peak == 400.0
    longer = work.Work(path="zsl", eval_flops=3e9, longest=1004)
    # a batch of 1004-token queries through one block (10 d a token) and its scores (2 heads x 1004 keys)
    grow = 16 * (1004 * (8 * 10 * 4 + 2 * 1004 * 4) - 4 * (8 * 10 * 4 + 2 * 4 * 4)) / 2**20
    assert cost.predict(SHAPE, longer, rate, 0.0, 16)[1] == pytest.approx(400.0 + grow)


def test_a_failed_calibration_run_says_so():
    def fails():
        raise ValueError("boom")

    with pytest.raises(RuntimeError, match="calibration run failed"):
        cost._in_fork(fails, copies=2)
    seconds, peak = cost._in_fork(lambda: None, copies=2)
    assert 0 <= seconds < 5 and peak > 10
