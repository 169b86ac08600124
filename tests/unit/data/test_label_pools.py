"""Label words a model never saw as labels (issue 81): the two pools of a tokenizer's words."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest  # noqa: E402

from icl_gd.data import label_pools  # noqa: E402


def test_the_held_out_words_are_no_training_label_and_no_protocol_word(tokenizer):
    """Disjoint pools of whole words (a space and three or more letters), neither holding a word
    that any preset task uses as a label (Positive, Negative, ... in any case), the same on every
    call; a quarter held out."""
    pools = label_pools.label_pools(tokenizer)
    train, held = set(pools.train), set(pools.held_out)
    assert train and held and not train & held
    assert len(held) == int(len(train | held) * label_pools.HELD_OUT_SHARE)
    protocol = label_pools.protocol_words()
    assert {"positive", "negative", "sports", "neither"} <= protocol
    decoded = {tokenizer.decode([i]) for i in train | held}
    assert all(label_pools.WORD.fullmatch(w.strip()) and w.strip().lower() not in protocol for w in decoded)
    # each is what a space and the word encode to, alone: a label word as the templates place one
    assert all(tokenizer.encode(" " + tokenizer.decode([i]).strip(), add_special_tokens=False) == [i] for i in held)
    # the test corpus's own label words are tokens of this tokenizer, and in neither pool
    label_ids = {tokenizer.encode(" Positive", add_special_tokens=False)[0]}
    assert len(tokenizer.encode(" Positive", add_special_tokens=False)) == 1 and not label_ids & (train | held)
    # words of the corpus that are not label words are there
    assert " movie" in decoded
    assert label_pools.label_pools(tokenizer) == pools
    assert label_pools.label_pools(tokenizer, seed=1) != pools


def test_a_vocabulary_too_small_for_two_pools_says_so(tokenizer):
    with pytest.raises(ValueError, match="leaves a pool empty: use a larger vocabulary"):
        label_pools.label_pools(tokenizer, held_out_share=0.0)
