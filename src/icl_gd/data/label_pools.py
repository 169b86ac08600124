"""Label words a model never saw as labels (issue 81): a tokenizer's whole words split at random
into a *training pool*, which a reader's pretraining may draw its episodes' label words from, and a
*held-out pool*, disjoint from it, which ICL is read with to ask whether the model follows label
words it was never trained on as labels (Wei et al. 2023's semantically unrelated labels).

A word is a token that decodes to a space and three or more letters: a label word as the templates
place one, after a space. No protocol label word (``presets.TASK_PRESETS``, any case) is in either
pool: those are the words the protocol and its permutation read, and a reader is trained on them.

Imports nothing of the package but the presets: the split depends on the tokenizer, the share and
the seed alone, so the recipe that trains on the training pool and the run that reads the held-out
one find the same words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from icl_gd.data.presets import TASK_PRESETS

WORD = re.compile(r" [A-Za-z]{3,}")
HELD_OUT_SHARE = 0.25  # a quarter of the words held out (65 of the built-in tokenizer's 260)
SEED = 12345


@dataclass(frozen=True)
class LabelPools:
    """Token ids of the two pools, each sorted."""

    train: tuple[int, ...]
    held_out: tuple[int, ...]


def protocol_words() -> set[str]:
    """Every preset task's label words, lower-cased."""
    return {word.lower() for preset in TASK_PRESETS.values() for word in preset["label_words"]}


def words(tokenizer) -> list[int]:
    """The tokenizer's word tokens (:data:`WORD`) that are no protocol label word, by id."""
    protocol = protocol_words()
    found = []
    for token_id in range(len(tokenizer)):
        text = tokenizer.decode([token_id])
        if WORD.fullmatch(text) and text[1:].lower() not in protocol:
            found.append(token_id)
    return found


def label_pools(tokenizer, held_out_share: float = HELD_OUT_SHARE, seed: int = SEED) -> LabelPools:
    """The tokenizer's words split at random (``seed``) into a training pool and a held-out pool of
    ``held_out_share`` of them; an error where either would be empty."""
    found = words(tokenizer)
    n_held = int(len(found) * held_out_share)
    if n_held < 1 or n_held >= len(found):
        raise ValueError(
            f"label pools: {len(found)} words in this tokenizer's vocabulary (a space and 3+ letters, no protocol "
            f"label word); a held-out share of {held_out_share} leaves a pool empty: use a larger vocabulary"
        )
    order = np.random.default_rng(seed).permutation(len(found))
    held = sorted(found[i] for i in order[:n_held])
    train = sorted(found[i] for i in order[n_held:])
    return LabelPools(train=tuple(train), held_out=tuple(held))
