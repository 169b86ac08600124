"""The protocol's selection from a task's normalised splits (``data.sources``): the evaluation set,
the demonstrations and their orders, label switching and the labels' consistent permutation.

Selection follows docs/protocol.md ("Tasks and data"): the evaluation set is the evaluation split
shuffled with seed 1, first ``max_eval`` rows; the demonstrations are the train split shuffled with
the run's seed, first k rows, then optionally permuted again. The shuffles use
``numpy.random.RandomState(seed).permutation``; the reference's exact RNG stream (and so its exact
examples) is not reproduced, only the recipe.

This module imports nothing else of the package.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def select_eval(df: pd.DataFrame, max_eval: int, seed: int = 1) -> pd.DataFrame:
    """The evaluation set: the evaluation split shuffled with ``seed`` (1 in the protocol), first ``max_eval`` rows.

    The shuffle is ``numpy.random.RandomState(seed).permutation``; it does not reproduce the
    reference's RNG stream, so the examples differ from the reference's, not the recipe.
    """
    if int(max_eval) < 1:
        raise ValueError(f"max_eval must be at least 1, got {max_eval}")
    order = np.random.RandomState(int(seed)).permutation(len(df))[: int(max_eval)]
    return df.iloc[order].reset_index(drop=True)


def permutation_seed(seed: int, permutation: int) -> int:
    """The seed of demonstration permutation p > 0 of a run: SeedSequence([seed, p]), first 32-bit word.

    Derived from both numbers, so each (run seed, permutation) pair has its own fixed reordering.
    """
    return int(np.random.SeedSequence([int(seed), int(permutation)]).generate_state(1)[0])


# A fixed entropy word for the further orders of a run's demonstrations (config key ``orders``), so
# that they draw from a stream of their own, not the protocol's permutations'.
_ORDER_STREAM = 4096


def demo_order(n_used: int, n_all: int, seed: int, order: int) -> list[int]:
    """Positions of a run's demonstrations in further order ``order`` (> 0; 0 is the run's own):
    the ``n_used`` that ICL sees (true k) shuffled among themselves, the rest among themselves, so
    that each order holds the same demonstrations in ICL and in finetuning (``ft_demos``), in
    another order. Seeded by (run seed, order); order 0 is the identity."""
    n_used, n_all, order = int(n_used), int(n_all), int(order)
    if order < 0 or not 0 <= n_used <= n_all:
        raise ValueError(f"demo_order: order must be >= 0 and 0 <= n_used <= n_all, got {order}, {n_used}, {n_all}")
    if order == 0:
        return list(range(n_all))
    rng = np.random.RandomState(np.random.SeedSequence([int(seed), _ORDER_STREAM, order]).generate_state(1)[0])
    return [int(i) for i in rng.permutation(n_used)] + [n_used + int(i) for i in rng.permutation(n_all - n_used)]


def select_demos(train: pd.DataFrame, seed: int, k: int, permutation: int) -> pd.DataFrame:
    """The demonstrations: the train split shuffled with the run's seed, first k rows, no class balancing.

    Permutation 0 keeps that order; permutation p > 0 reorders the same k rows with
    ``RandomState(permutation_seed(seed, p)).permutation(k)``, so runs differ in order, not content.
    As in ``select_eval``, the reference's exact RNG stream is not reproduced.
    """
    k, permutation = int(k), int(permutation)
    if k < 0:
        raise ValueError(f"k (number of demonstrations) must be at least 0, got {k}")
    if k > len(train):
        raise ValueError(f"k = {k} demonstrations requested, but the train split has only {len(train)} rows")
    if permutation < 0:
        raise ValueError(f"permutation must be 0 (shuffled order as is) or a positive index, got {permutation}")
    order = np.random.RandomState(int(seed)).permutation(len(train))[:k]
    if permutation > 0:
        order = order[np.random.RandomState(permutation_seed(seed, permutation)).permutation(k)]
    return train.iloc[order].reset_index(drop=True)


def select_dev(train: pd.DataFrame, seeds, k: int, n: int, seed: int = 1) -> pd.DataFrame:
    """A development set from the train split: the rows no run of ``seeds`` takes as a demonstration
    (each seed's first ``k`` of its shuffle, whatever its permutation: a permutation reorders the same
    rows), shuffled with ``seed``, first ``n``. Never the evaluation examples, which come from the
    evaluation split; what a setting is chosen on (``metrics.setting_choice``)."""
    used = set()
    for run_seed in seeds:
        used.update(np.random.RandomState(int(run_seed)).permutation(len(train))[: int(k)].tolist())
    free = np.array(sorted(set(range(len(train))) - used), dtype=np.int64)
    if int(n) > len(free):
        raise ValueError(
            f"a development set of {n} rows asked for, but the train split has {len(free)} that no run of seeds "
            f"{list(seeds)} takes as a demonstration (k = {k}); ask for fewer"
        )
    order = free[np.random.RandomState(int(seed)).permutation(len(free))[: int(n)]]
    return train.iloc[order].reset_index(drop=True)


# A fixed second entropy word, so that label switching draws from its own stream of the run seed.
_SWITCH_STREAM = 1729


def switch_labels(demos: pd.DataFrame, n_labels: int, seed: int) -> pd.DataFrame:
    """Label switching (paper 002): every demonstration gets a wrong label.

    Each label y becomes (y + s) mod n_labels with s drawn uniformly from 1..n_labels-1 by
    ``numpy.random.default_rng([seed, 1729])``: uniform over the wrong classes (the flip, for two
    classes), and the same for ICL and for finetuning of one run seed.
    """
    if n_labels < 2:
        raise ValueError(f"label switching needs at least two classes, got {n_labels}")
    shift = np.random.default_rng([int(seed), _SWITCH_STREAM]).integers(1, n_labels, size=len(demos))
    switched = demos.copy()
    switched["label"] = (demos["label"].to_numpy() + shift) % n_labels
    return switched


def permuted_gold(labels, n_labels: int) -> np.ndarray:
    """The class each of ``labels`` stands for under the demonstrations' consistent permutation
    (:func:`permute_labels`): (y + 1) mod n_labels. Of an evaluation example's gold class, the
    *permuted gold*: the class whose label word the permuted demonstrations give examples of the
    gold class, so the word a model that reads its demonstrations' labels answers with.

    A derangement for every n_labels >= 2 (no class keeps its word: the swap of two classes, a
    cycle of three or more), so that answering with the original gold word is wrong on every
    example, and following the demonstrations is told apart from what any context does to the
    model."""
    if n_labels < 2:
        raise ValueError(f"permuting the labels needs at least two classes, got {n_labels}")
    return (np.asarray(labels, dtype=np.int64) + 1) % int(n_labels)


def permute_labels(demos: pd.DataFrame, n_labels: int) -> pd.DataFrame:
    """The demonstrations with their labels permuted consistently: every class y becomes
    :func:`permuted_gold` (y + 1 mod n_labels), the same permutation on every demonstration of the
    context (for two classes the swap, for three the cycle 0 -> 1 -> 2 -> 0).

    Unlike :func:`switch_labels` (a random wrong label per demonstration, which leaves no mapping
    to learn), the context then teaches one mapping from inputs to label words. A model that reads
    its demonstrations' labels answers with the permuted word, and so is accurate against the
    permuted gold; a model that a context shifts but that does not read the labels (a prior on the
    task's words, a format) keeps answering the original gold, which the permutation makes wrong on
    every example. Accuracy against the permuted gold above the majority class is therefore
    evidence that the model learns from the demonstrations, which ICL above zero-shot is not."""
    permuted = demos.copy()
    permuted["label"] = permuted_gold(demos["label"].to_numpy(), n_labels)
    return permuted
