"""The calibration (icl_gd.planning.timing): the rates fitted from timed runs, a job's predicted time
and memory at them, and the forked calibration runs."""

from __future__ import annotations

import os
import time

import pytest

from icl_gd.activations import work
from icl_gd.planning import timing

SHAPE = work.Shape(n_layers=2, d_model=8, n_heads=2, vocab=10, block_params=100)


def test_rates_from_two_runs_and_a_prediction():
    assert timing._line([(1.0, 3.0), (3.0, 7.0)]) == (1.0, 2.0)
    assert timing._line([(1.0, 3.0), (3.0, 2.5)]) == (3.0, 0.0)  # noise: all of it fixed
    assert timing._line([(1.0, 3.0), (2.0, 6.0), (3.0, 7.0)]) == pytest.approx((4 / 3, 2.0))  # least squares
    calibrated = work.Work(path="zsl", eval_flops=1e9, longest=4)
    rate = timing.PathRate(fixed_s=0.5, s_per_gflop=2.0, peak_mb=400.0, work=calibrated)
    job = work.Work(path="zsl", eval_flops=3e9, longest=4)
    seconds, peak = timing.predict(SHAPE, job, rate, start_s=0.1, batch_size=16)
    assert seconds == pytest.approx(0.1 + 0.5 + 6.0) and peak == 400.0
    longer = work.Work(path="zsl", eval_flops=3e9, longest=1004)
    # a batch of 1004-token queries through one block (10 d a token) and its scores (2 heads x 1004 keys)
    grow = 16 * (1004 * (8 * 10 * 4 + 2 * 1004 * 4) - 4 * (8 * 10 * 4 + 2 * 4 * 4)) / 2**20
    assert timing.predict(SHAPE, longer, rate, 0.0, 16)[1] == pytest.approx(400.0 + grow)


def test_a_failed_calibration_run_says_so():
    def fails():
        raise ValueError("boom")

    with pytest.raises(RuntimeError, match="calibration run failed"):
        timing.time_side_by_side({"a": (fails, None), "b": (lambda: None, None)}, slots=2)
    ((seconds, peak),) = timing.time_side_by_side({"a": (lambda: None, None)}, slots=2).values()
    assert 0 <= seconds < 5 and peak > 10


def test_calibration_runs_side_by_side_follow_their_references_and_keep_the_machine_busy(tmp_path):
    """Runs share the slots in the order given, each after the run it follows; a short run is
    timed thrice; the filler runs only while a timed run does and is gone at the end."""
    log = tmp_path / "log"

    def run(name, seconds, needs=None):
        def fn():
            if needs:
                assert (tmp_path / needs).exists(), f"{name} started before {needs}"
            time.sleep(seconds)
            with open(log, "a") as f:
                f.write(name + "\n")
            (tmp_path / name).touch()

        return fn

    def filler():
        (tmp_path / f"filler-{os.getpid()}").touch()
        time.sleep(60)

    runs = {
        "ref": (run("ref", 0.2), None),
        "long": (run("long", 1.5, needs="ref"), "ref"),
        "short": (run("short", 0.1, needs="ref"), "ref"),
    }
    start = time.perf_counter()
    timed = timing.time_side_by_side(runs, slots=2, filler=filler, short_s=1.0)
    assert time.perf_counter() - start < 10  # the filler was killed, not waited for
    assert timed["long"][0] == pytest.approx(1.5, abs=0.5) and timed["short"][0] < 0.5
    assert sorted(log.read_text().split()) == ["long"] + ["ref"] * 3 + ["short"] * 3
    fillers = list(tmp_path.glob("filler-*"))
    assert fillers  # "long" ran on after every other run had ended
    for path in fillers:
        with pytest.raises(ProcessLookupError):
            os.kill(int(path.name.split("-")[1]), 0)
    with pytest.raises(ValueError, match="follow runs that are not among them"):
        timing.time_side_by_side({"a": (lambda: None, "nowhere")})


def test_a_calibration_repeats_its_passes_until_its_time_and_keeps_each_runs_median():
    """A machine whose speed drifts: the passes go on until the calibration's minimum has gone by,
    each run's median seconds and its largest peak kept; a minimum already past takes one pass."""
    seconds = iter([3.0, 1.0, 2.0, 9.0, 5.0])
    peaks = iter([100, 300, 200, 100, 100])

    def one_pass():
        time.sleep(0.05)
        return {"run": (next(seconds), next(peaks))}

    start = time.perf_counter()
    timed, passes = timing.repeated(one_pass, until=start + 0.12)
    assert passes == 3 and time.perf_counter() - start >= 0.12
    assert timed == {"run": (2.0, 300)}
    assert timing.repeated(one_pass, until=0.0) == ({"run": (9.0, 100)}, 1)
