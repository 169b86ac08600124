"""A claim's readings as docs/claims.md states them: the claimed side first, the quantifier counting
equivalent tasks as it counts holding ones, and every interval end that decides a status settled
against the bootstrap's own noise (issue 62, item 3)."""

from __future__ import annotations

import numpy as np
import pytest

from icl_gd.metrics import claim_definitions
from icl_gd.metrics.claim_definitions import deciding_ends, read_quantifier, status
from icl_gd.metrics.claim_testing import ends_unsettled


def test_an_interval_is_read_on_its_claimed_side_first():
    m = 0.01
    assert status(0.002, 0.008, +1, "superiority", m) == "holds"  # within the margin, yet on the claimed side
    assert status(-0.008, -0.002, +1, "superiority", m) == "breaks"
    assert status(-0.005, 0.005, +1, "superiority", m) == "negligible"  # straddles 0 within the margin
    assert status(-0.005, 0.02, +1, "superiority", m) == "open"
    assert status(0.002, 0.008, -1, "superiority", m) == "breaks"  # a claim that a < b
    assert status(-0.005, 0.005, +1, "non_inferiority", m) == "equivalent"
    assert status(-0.005, 0.03, +1, "non_inferiority", m) == "holds"
    assert status(-0.03, -0.02, +1, "non_inferiority", m) == "breaks"
    assert status(-0.03, 0.005, +1, "non_inferiority", m) == "open"


def test_the_quantifier_counts_equivalent_tasks_as_it_counts_holding_ones():
    # non-inferiority on "most" of three tasks: two equivalent and one that holds beyond the margin
    assert read_quantifier("most", [["equivalent"], ["equivalent"], ["holds"]], [], "non_inferiority") == "equivalent"
    # one equivalent of three: supported (all hold), not equivalent (not most)
    assert read_quantifier("most", [["equivalent"], ["holds"], ["holds"]], [], "non_inferiority") == "supported"
    assert read_quantifier("every", [["equivalent"], ["equivalent"], ["holds"]], [], "non_inferiority") == "supported"
    assert read_quantifier("every", [["equivalent"]] * 3, [], "non_inferiority") == "equivalent"


def test_every_end_that_decides_a_status_is_named():
    assert deciding_ends("superiority", 0.01) == ((0, 0.0), (1, 0.0), (0, -0.01), (1, 0.01))
    assert deciding_ends("superiority", 0.0) == ((0, 0.0), (1, 0.0))  # no margin: 0 alone
    assert deciding_ends("non_inferiority", 0.01) == ((0, -0.01), (1, -0.01), (1, 0.01))


def _replicates_with_upper_end_at(value: float, level: float, n: int = 4000) -> np.ndarray:
    """Replicates whose percentile interval at ``level`` has its upper end exactly at ``value``."""
    reps = np.linspace(-1.0, 1.0, n)
    high = np.quantile(reps, 1 - (1 - level) / 2)
    return reps * value / high


@pytest.mark.parametrize("direction", [+1, -1])
def test_an_upper_end_at_the_margin_is_unsettled_and_one_far_from_every_value_is_not(direction):
    claim = next(c for c in claim_definitions.CLAIMS if c.test == "superiority" and c.direction == direction)
    m, level = claim.margin, 0.95
    oriented_at_margin = _replicates_with_upper_end_at(m, level)  # the claimed side's upper end at +margin
    oriented_far = oriented_at_margin + 2.0 * m + 1.0  # every end far from 0 and +-margin
    # the end that decides "negligible" was never checked before (only 0 was)
    assert ends_unsettled(direction * oriented_at_margin, level, claim)
    assert not ends_unsettled(direction * oriented_far, level, claim)


def test_a_non_inferiority_claims_equivalence_end_is_settled_too():
    claim = next(c for c in claim_definitions.CLAIMS if c.test == "non_inferiority")
    m, level = claim.margin, 0.95
    near_plus_margin = _replicates_with_upper_end_at(0.001, level) + (m - 0.001)  # upper end at +m, lower far
    assert ends_unsettled(claim.direction * near_plus_margin, level, claim)
    assert not ends_unsettled(claim.direction * (near_plus_margin - 0.5 * m), level, claim)  # inside, ends clear
