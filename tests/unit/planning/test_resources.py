"""Each model job's request (icl_gd.planning.resources): from the cost estimate with a safety
factor, grown by attempt, capped at the partition's limits; a plan whose jobs would exceed them
is refused with the numbers."""

from __future__ import annotations

import pytest

from icl_gd.planning import resources

HEADER = "rule\tmodel\tvariant\ttask\tseed\torder\tsetting\tpath\tgflop\tseconds\tpeak_mb\n"


def test_the_estimate_is_read_by_each_jobs_wildcards(tmp_path):
    path = tmp_path / "cost_estimate.tsv"
    path.write_text(
        HEADER
        + "extract_zsl\tm\ttrained\tsst2\t1.0\t0.0\tzsl\tzsl\t1\t10\t300\n"
        + "finetune_order\tm\ttrained\tsst2\t1.0\t1.0\tgd\tgd\t1\t100\t900\n"
        + "build_builtin_model\tm\t\t\t\t\t\tpretrain\t1\t30\t500\n"
    )
    estimate = resources.read_estimate(path)
    assert resources.lookup(estimate, {"model": "m", "variant": "trained", "task": "sst2", "seed": "1"}) == (10, 300)
    order = {"model": "m", "variant": "trained", "task": "sst2", "seed": "1", "order": "1", "setting": "gd"}
    assert resources.lookup(estimate, order) == (100, 900)
    assert resources.lookup(estimate, {**order, "order": "2"}) is None
    assert resources.lookup(estimate, {"model": "m"}) == (30, 500)
    assert resources.read_estimate(tmp_path / "none.tsv") == {}


def test_requests_grow_with_the_attempt_and_stop_at_the_limits():
    assert resources.request((600, 2000), (8000, 60), 1, {}) == {"mem_mb": 3000, "runtime": 25}
    assert resources.request((600, 2000), (8000, 60), 2, {}) == {"mem_mb": 6000, "runtime": 45}
    assert resources.request((1, 10), (8000, 60), 1, {}) == {"mem_mb": 1000, "runtime": 6}
    assert resources.request(None, (8000, 60), 3, {}) == {"mem_mb": 24000, "runtime": 180}
    capped = resources.request((600, 2000), (8000, 60), 3, {"mem_mb": 7000, "runtime": 60})
    assert capped == {"mem_mb": 7000, "runtime": 60}


def test_jobs_over_the_limits_are_named_with_their_numbers():
    estimate = {
        ("m", "trained", "sst2", "1", "0", "gd"): ("finetune_and_extract", 7200.0, 3000.0),
        ("m", "trained", "sst2", "1", "0", "zsl"): ("extract_zsl", 60.0, 300.0),
    }
    resources.check_limits(estimate, {})  # no limits: nothing to check
    resources.check_limits(estimate, {"mem_mb": 4500, "runtime": 245})  # exactly at them
    with pytest.raises(ValueError) as err:
        resources.check_limits(estimate, {"mem_mb": 4000, "runtime": 120})
    text = str(err.value)
    assert text.startswith("1 job(s) would exceed the partition's limits")
    assert "finetune_and_extract model=m/variant=trained/task=sst2/seed=1/setting=gd" in text
    assert "4,500 MB of memory (peak 3,000 MB x 1.5)" in text and "245 min (predicted 120.0 min x 2.0 + 5)" in text
