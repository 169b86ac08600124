"""benchmarks/agnews_collapse.py's pure parts: demonstrations inside a sliding window, balanced
demonstrations drawn from the run's shuffled split, the centred accuracy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from icl_gd.data import splits
from tests import benchmark_scripts

REPO = Path(__file__).resolve().parents[2]


def _module():
    return benchmark_scripts.load("agnews_collapse")


def test_demonstrations_inside_the_window():
    collapse = _module()
    # the answer token and 9 query tokens before it leave 512 - 10 = 502 tokens for demonstrations + EOS
    assert collapse.demos_in_window([55] * 32, 9, 512) == 8  # 8 * 56 = 448, 9 * 56 = 504
    assert collapse.demos_in_window([55] * 32, 9, None) == 32
    assert collapse.demos_in_window([600, 10], 9, 512) == 1  # counted from the last one back


def test_balanced_demonstrations_follow_the_runs_shuffle():
    collapse = _module()
    train = pd.DataFrame({"example_id": range(40), "label": [0] * 25 + [1] * 10 + [2] * 5})
    demos = collapse.balanced_demos(train, seed=3, permutation=0, per_class=4, n_labels=3)
    assert demos["label"].value_counts().to_dict() == {0: 4, 1: 4, 2: 4}
    shuffled = splits.select_demos(train, 3, len(train), 0)
    expected = shuffled.groupby("label", sort=False).head(4)["example_id"].tolist()
    assert demos["example_id"].tolist() == expected
    permuted = collapse.balanced_demos(train, seed=3, permutation=1, per_class=4, n_labels=3)
    assert sorted(permuted["example_id"]) == sorted(expected) and permuted["example_id"].tolist() != expected
    with pytest.raises(ValueError, match="fewer than 6"):
        collapse.balanced_demos(train, seed=3, permutation=0, per_class=6, n_labels=3)


def test_centred_accuracy_removes_one_words_offset():
    collapse = _module()
    gold = np.array([0, 1, 2, 0, 1, 2])
    logprobs = np.full((6, 3), -3.0)
    logprobs[np.arange(6), gold] = -2.0
    logprobs[:, 1] += 2.5  # every example now answers class 1
    assert (np.argmax(logprobs, 1) == gold).mean() == pytest.approx(1 / 3)
    assert collapse.centred_accuracy(logprobs, gold) == 1.0
