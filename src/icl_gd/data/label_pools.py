"""Label words a model never saw as labels (issue 81): a tokenizer's whole words split at random
into a *training pool*, which a reader's pretraining may draw its episodes' label words from, and a
*held-out pool*, disjoint from it, which ICL is read with to ask whether the model follows label
words it was never trained on as labels (Wei et al. 2023's semantically unrelated labels).

A word is three or more letters that, after a space, are one token of the tokenizer: a label word as
the templates place one (``prompts.label_token_ids``), whatever the tokenizer's own marking of the
space (GPT-2's, SentencePiece's). No protocol label word (``presets.TASK_PRESETS``, any case) is in
either pool: those are the words the protocol and its permutation read, and a reader is trained on
them.

Imports nothing of the package but the presets: the split depends on the tokenizer, the share and
the seed alone, so the recipe that trains on the training pool and the run that reads the held-out
one find the same words.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import numpy as np

from icl_gd.data.presets import TASK_PRESETS

WORD = re.compile(r"[A-Za-z]{3,}")
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
    """The tokenizer's word tokens that are no protocol label word, by id: each a :data:`WORD` that
    a space and the word encode to, alone."""
    protocol = protocol_words()
    candidates = []
    for token_id in range(len(tokenizer)):
        text = tokenizer.decode([token_id]).strip()
        if WORD.fullmatch(text) and text.lower() not in protocol:
            candidates.append((token_id, text))
    if not candidates:
        return []
    # "the" and " the" decode alike; only the token a space and the word encode to is a label word
    encoded = tokenizer([" " + text for _, text in candidates], add_special_tokens=False)["input_ids"]
    return [token_id for (token_id, _), ids in zip(candidates, encoded) if ids == [token_id]]


def key(seed: int, task: str) -> list[int]:
    """The draw of a task's words at a seed: another task draws other words at the same seed."""
    return [int(seed), zlib.crc32(task.encode())]


def draw(pool: tuple[int, ...], n: int, key) -> list[int]:
    """``n`` distinct words of ``pool`` (a task's label words, class i the i-th), drawn by ``key``
    (a seed, or a sequence of them): the same words for the same key on every machine."""
    if n > len(pool):
        raise ValueError(f"label pools: {n} label words asked of a pool of {len(pool)}: use a larger vocabulary")
    return [int(i) for i in np.random.default_rng(key).choice(np.asarray(pool), n, replace=False)]


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
