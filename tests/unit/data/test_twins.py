"""Tests of icl_gd.data.twins: the synthetic twins are seeded, shaped like the real tasks, and learnable."""

import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from icl_gd.config.resolve import TASK_PRESETS, template_fields
from icl_gd.data.twins import make_synthetic_task

TASKS = sorted(TASK_PRESETS)


@pytest.fixture(scope="module")
def synthetic():
    return {task: make_synthetic_task(task, n_train=600, n_eval=300, seed=3) for task in TASKS}


def test_synthetic_is_deterministic(synthetic):
    for task in TASKS:
        again = make_synthetic_task(task, n_train=600, n_eval=300, seed=3)
        for split in ("train", "eval"):
            pd.testing.assert_frame_equal(synthetic[task][split], again[split])
        other = make_synthetic_task(task, n_train=600, n_eval=300, seed=4)
        field = template_fields(TASK_PRESETS[task]["template"])[0]
        assert not synthetic[task]["train"][field].equals(other["train"][field])


def test_synthetic_eval_does_not_depend_on_n_train():
    small = make_synthetic_task("sst2", n_train=10, n_eval=50, seed=2)
    large = make_synthetic_task("sst2", n_train=500, n_eval=50, seed=2)
    pd.testing.assert_frame_equal(small["eval"], large["eval"])
    assert not small["eval"]["sentence"].equals(large["train"]["sentence"].iloc[:50].reset_index(drop=True))


@pytest.mark.parametrize("task", TASKS)
def test_synthetic_columns_and_dtypes(synthetic, task):
    fields = template_fields(TASK_PRESETS[task]["template"])
    n_labels = len(TASK_PRESETS[task]["label_words"])
    for split, n in (("train", 600), ("eval", 300)):
        df = synthetic[task][split]
        assert list(df.columns) == [*fields, "label", "example_id"]
        assert df["label"].dtype == np.int64 and df["example_id"].dtype == np.int64
        assert df["example_id"].tolist() == list(range(n))
        assert set(df["label"]) == set(range(n_labels))
        for name in fields:
            assert pd.api.types.is_string_dtype(df[name])
            texts = df[name].tolist()
            assert all(isinstance(t, str) and t.strip() == t and t.isascii() for t in texts)
            assert all("{" not in t and "}" not in t for t in texts), "an unfilled slot"
            n_words = np.array([len(t.split()) for t in texts])
            assert n_words.min() >= 4 and n_words.max() <= 30, (name, n_words.min(), n_words.max())
        # The prompt template formats without error.
        row = df.iloc[0]
        TASK_PRESETS[task]["template"].format(**{name: row[name] for name in fields})


@pytest.mark.parametrize("task", TASKS)
def test_synthetic_labels_are_balanced(synthetic, task):
    counts = synthetic[task]["train"]["label"].value_counts()
    assert counts.max() - counts.min() <= 1


def test_synthetic_has_some_newlines(synthetic):
    for task in TASKS:
        field = template_fields(TASK_PRESETS[task]["template"])[0]
        texts = pd.concat([synthetic[task]["train"][field], synthetic[task]["eval"][field]])
        rate = texts.str.contains("\n", regex=False).mean()
        assert 0.005 < rate < 0.08, (task, rate)
        assert not texts.str.startswith("\n").any() and not texts.str.endswith("\n").any()


def _words(df: pd.DataFrame, fields: list[str]) -> list[list[str]]:
    joined = df[fields].apply(" ".join, axis=1)
    return [re.findall(r"[a-z0-9']+", text.lower()) for text in joined]


def _bag_of_words_accuracy(train: pd.DataFrame, test: pd.DataFrame, fields: list[str], n_labels: int) -> float:
    """Multinomial naive Bayes with add-one smoothing: the most trivial learner there is."""
    counts = [Counter() for _ in range(n_labels)]
    for words, label in zip(_words(train, fields), train["label"]):
        counts[label].update(words)
    vocab = set().union(*counts)
    totals = [sum(c.values()) + len(vocab) for c in counts]
    priors = np.log(np.bincount(train["label"], minlength=n_labels) / len(train))
    correct = 0
    for words, label in zip(_words(test, fields), test["label"]):
        scores = [
            priors[c] + sum(np.log((counts[c][w] + 1) / totals[c]) for w in words if w in vocab)
            for c in range(n_labels)
        ]
        correct += int(np.argmax(scores) == label)
    return correct / len(test)


@pytest.mark.parametrize("task", TASKS)
def test_synthetic_is_learnable(synthetic, task):
    fields = template_fields(TASK_PRESETS[task]["template"])
    n_labels = len(TASK_PRESETS[task]["label_words"])
    accuracy = _bag_of_words_accuracy(synthetic[task]["train"], synthetic[task]["eval"], fields, n_labels)
    assert accuracy > 1 / n_labels + 0.25, (task, accuracy)


def test_synthetic_unknown_task_names_the_known_ones():
    with pytest.raises(ValueError, match="sst2") as info:
        make_synthetic_task("imdb", 10, 10, 1)
    assert "imdb" in str(info.value) and "agnews" in str(info.value)
    with pytest.raises(ValueError, match="n_eval"):
        make_synthetic_task("sst2", 10, 0, 1)
