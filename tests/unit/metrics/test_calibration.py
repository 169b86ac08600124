"""Contextual calibration (icl_gd.metrics.calibration) on hand-made log-probabilities."""

import numpy as np
import pytest

from icl_gd.metrics import calibration


def test_a_constant_bias_is_removed():
    """Every example's log-probabilities carry the same offset per word, as a context that favours
    one word gives; the content-free queries see the offset alone, and calibration recovers the
    unbiased argmax where the raw one answers the favoured word everywhere."""
    rng = np.random.default_rng(0)
    clean = rng.normal(size=(50, 3))
    bias = np.array([4.0, 0.0, -1.0])
    raw = clean + bias - 7.0  # unnormalised, as the cache's log-probabilities over the whole vocabulary
    assert (raw.argmax(1) == 0).mean() > 0.9
    free = np.tile(bias, (3, 1)) - 2.0
    assert np.array_equal(calibration.calibrated_predictions(raw, free), clean.argmax(1))


def test_the_content_free_mean_averages_three_queries_probabilities():
    """p_cf is the mean of the three queries' renormalised probabilities, not of their logits."""
    free = np.log([[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.1, 0.1, 0.8]]) - 3.0  # each scaled by e^-3
    np.testing.assert_allclose(calibration.content_free_mean(free), [0.3, 0.3, 0.4])
    # the word the content-free queries favour (0.4) loses a near lead: 0.42/0.4 < 0.33/0.3
    example = np.log([[0.33, 0.25, 0.42]])
    assert example.argmax() == 2 and calibration.calibrated_predictions(example, free)[0] == 0


def test_no_bias_changes_nothing_and_a_bad_shape_is_refused():
    rng = np.random.default_rng(1)
    raw = rng.normal(size=(20, 4))
    uniform = np.zeros((3, 4))
    assert np.array_equal(calibration.calibrated_predictions(raw, uniform), raw.argmax(1))
    with pytest.raises(ValueError, match=r"\(n_queries, n_labels\), got shape \(4,\)"):
        calibration.content_free_mean(np.zeros(4))
