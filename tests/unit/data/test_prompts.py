"""Tests of icl_gd.data.prompts: exact token sequences of ZSL, ICL and FT, and the demonstration budget."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from icl_gd.config.resolve import TaskSpec  # noqa: E402
from icl_gd.data import prompts  # noqa: E402
from icl_gd.data.prompts import PromptError  # noqa: E402

TEMPLATE = "Sentence: {sentence} Label:"


def spec(label_words=("Negative", "Positive"), name="sst2", template=TEMPLATE) -> TaskSpec:
    return TaskSpec(name=name, source="local", template=template, label_words=tuple(label_words), seeds=(2,), lr=1e-3)


def enc(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


DEMOS = pd.DataFrame(
    {"example_id": [10, 11], "sentence": ["the movie was dull", "the plot is clever"], "label": [0, 1]}
)
QUERY = pd.DataFrame({"example_id": [7], "sentence": ["the film felt slow"], "label": [1]})


@pytest.fixture(scope="module")
def pieces(tokenizer):
    """The expected pieces, each encoded on its own."""
    neg, pos = enc(tokenizer, " Negative"), enc(tokenizer, " Positive")
    assert len(neg) == len(pos) == 1
    return {
        "bos": tokenizer.bos_token_id,
        "eos": tokenizer.eos_token_id,
        "labels": [neg[0], pos[0]],
        "demo1": enc(tokenizer, "Sentence: the movie was dull Label:"),
        "demo2": enc(tokenizer, "Sentence: the plot is clever Label:"),
        "query": enc(tokenizer, "Sentence: the film felt slow Label:"),
    }


def test_encode_text_turns_newlines_into_eos(tokenizer):
    ids = prompts.encode_text(tokenizer, "the movie\nwas dull\n\ngood")
    eos = tokenizer.eos_token_id
    expected = enc(tokenizer, "the movie") + [eos] + enc(tokenizer, "was dull") + [eos, eos] + enc(tokenizer, "good")
    assert ids == expected
    assert ids.count(eos) == 3
    assert enc(tokenizer, "\n")[0] != eos  # the tokenizer alone would have used a byte token


def test_label_token_ids_are_the_single_tokens_of_the_words(tokenizer, pieces):
    assert prompts.label_token_ids(tokenizer, spec()) == pieces["labels"]
    five = ("terrible", "bad", "neutral", "good", "great")
    assert prompts.label_token_ids(tokenizer, spec(five, name="sst5")) == [enc(tokenizer, " " + w)[0] for w in five]


def test_label_word_of_several_tokens_is_refused(tokenizer):
    with pytest.raises(PromptError) as err:
        prompts.label_token_ids(tokenizer, spec(("Negative", "Zebrafishy"), name="mytask"))
    message = str(err.value)
    assert "'mytask'" in message and "'Zebrafishy'" in message and "tasks.mytask.label_words" in message


def test_label_words_sharing_a_token_are_refused(tokenizer):
    with pytest.raises(PromptError, match="same token"):
        prompts.label_token_ids(tokenizer, spec(("Negative", "Negative")))


def test_zsl_sequence(tokenizer, pieces):
    (query,) = prompts.build_queries(tokenizer, spec(), QUERY, pieces["labels"], "answer")
    zsl = [tokenizer.bos_token_id] + query.ids  # the ZSL context is <s> alone
    assert zsl == [pieces["bos"]] + pieces["query"]


def test_icl_sequence_for_two_demonstrations(tokenizer, pieces):
    s = spec()
    demo_ids = prompts.demonstration_ids(tokenizer, s, DEMOS, pieces["labels"])
    assert demo_ids == [pieces["demo1"] + [pieces["labels"][0]], pieces["demo2"] + [pieces["labels"][1]]]
    (query,) = prompts.build_queries(tokenizer, s, QUERY, pieces["labels"], "label_word")
    sequence = prompts.icl_context(tokenizer, demo_ids) + query.ids
    expected = (
        [pieces["bos"]]
        + pieces["demo1"]
        + [pieces["labels"][0], pieces["eos"]]
        + pieces["demo2"]
        + [pieces["labels"][1], pieces["eos"]]
        + pieces["query"]
        + [pieces["labels"][0]]  # the first class's label word (reference quirk)
    )
    assert sequence == expected
    assert sequence.count(pieces["bos"]) == 1  # no second <s> before the query


def test_ft_sequences_have_no_eos(tokenizer, pieces):
    demo_ids = prompts.demonstration_ids(tokenizer, spec(), DEMOS, pieces["labels"])
    assert prompts.ft_sequences(tokenizer, demo_ids) == [
        [pieces["bos"]] + pieces["demo1"] + [pieces["labels"][0]],
        [pieces["bos"]] + pieces["demo2"] + [pieces["labels"][1]],
    ]


def test_build_queries_record_position(tokenizer, pieces):
    rows = pd.DataFrame({"example_id": [7, 8], "sentence": ["the film felt slow", "a\nb"], "label": [1, 0]})
    at_label, at_answer = (
        prompts.build_queries(tokenizer, spec(), rows, pieces["labels"], where) for where in ("label_word", "answer")
    )
    n = len(pieces["query"])
    q = at_label[0]
    assert (q.example_id, q.gold) == (7, 1)
    assert q.ids == pieces["query"] + [pieces["labels"][0]]
    assert q.answer_offset == n - 1 and q.record_offset == n  # one past the answer, on the label word
    assert q.ids[q.record_offset] == pieces["labels"][0]
    q = at_answer[0]
    assert q.ids == pieces["query"] and q.answer_offset == q.record_offset == n - 1
    # a newline in the text becomes </s> inside the query
    assert at_answer[1].ids == enc(tokenizer, "Sentence: a") + [pieces["eos"]] + enc(tokenizer, "b Label:")
    with pytest.raises(PromptError, match="record_position"):
        prompts.build_queries(tokenizer, spec(), rows, pieces["labels"], "last")


def test_missing_template_field_names_the_field(tokenizer, pieces):
    rows = pd.DataFrame({"example_id": [3], "text": ["x"], "label": [0]})
    with pytest.raises(PromptError, match="field 'sentence'.*example 3"):
        prompts.build_queries(tokenizer, spec(), rows, pieces["labels"], "answer")


@pytest.mark.parametrize(
    "lengths, longest, max_len, expected",
    [
        ([10, 10, 10, 1], 5, 32, 2),  # 1+10+10+5 = 26 < 32; +10 would be 36; stop, although the 1 would fit
        ([10], 5, 16, 0),  # 1+10+5 = 16 is not < 16
        ([10], 5, 17, 1),  # 16 < 17
        ([3, 3, 3], 2, 100, 3),
        ([], 5, 100, 0),
        ([50, 1, 1], 5, 40, 0),  # the first does not fit: nothing does
    ],
)
def test_true_k(lengths, longest, max_len, expected):
    assert prompts.true_k(lengths, longest, max_len) == expected


# --- the separator (demo_separator): the tokenizer's EOS, or its newline, in each tokenizer family


def _fast(tok, **special):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, **special)


def llama_style():
    """Sentencepiece with a word-start piece before a text and byte fallback (Llama 2, Mistral):
    a newline alone encodes as ['▁', '<0x0A>'], after a word as '<0x0A>'."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "▁": 4, "a": 5, "▁a": 6}
    tok = Tokenizer(models.BPE(vocab, [("▁", "a")], unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace()])
    return _fast(tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def gemma_style():
    """Sentencepiece without a word-start piece, spaces normalised to '▁', '\\n' a token (Gemma)."""
    from tokenizers import Tokenizer, decoders, models, normalizers

    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "\n": 4, "a": 5, "▁": 6, "▁a": 7}
    tok = Tokenizer(models.BPE(vocab, [("▁", "a")], unk_token="<unk>"))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Replace("▁", " ")
    return _fast(tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>")


def without_newline():
    """A word-level tokenizer that splits on whitespace: a newline leaves no token."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return _fast(tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def test_the_line_end_of_each_tokenizer_family(tokenizer):
    byte_level = enc(tokenizer, "\n")  # GPT-2, SmolLM2: the newline's byte token ('Ċ')
    assert len(byte_level) == 1 and byte_level[0] != tokenizer.eos_token_id
    assert prompts.line_end_ids(tokenizer, "newline") == byte_level
    assert prompts.line_end_ids(tokenizer, "eos") == prompts.line_end_ids(tokenizer) == [tokenizer.eos_token_id]
    llama = llama_style()
    assert enc(llama, "\n") == [4, 3]  # alone: a word-start piece before the newline's byte
    assert prompts.line_end_ids(llama, "newline") == [3] and prompts.line_end_ids(llama, "eos") == [2]
    gemma = gemma_style()
    assert prompts.line_end_ids(gemma, "newline") == [4] and prompts.line_end_ids(gemma, "eos") == [1]


def test_a_tokenizer_without_a_newline_and_an_unknown_separator_are_refused(tokenizer):
    with pytest.raises(PromptError, match="has no newline token.*use demo_separator: eos"):
        prompts.line_end_ids(without_newline(), "newline")
    assert prompts.line_end_ids(without_newline(), "eos") == [2]
    with pytest.raises(PromptError, match=r"demo_separator must be one of \('eos', 'newline'\), got 'tab'"):
        prompts.line_end_ids(tokenizer, "tab")


def test_the_newline_separator_ends_each_demonstration_and_each_line(tokenizer, pieces):
    newline = prompts.line_end_ids(tokenizer, "newline")
    s = spec()
    demo_ids = prompts.demonstration_ids(tokenizer, s, DEMOS, pieces["labels"], newline)
    assert demo_ids == prompts.demonstration_ids(tokenizer, s, DEMOS, pieces["labels"])  # no newline in them
    context = prompts.icl_context(tokenizer, demo_ids, newline)
    assert context == [pieces["bos"]] + demo_ids[0] + newline + demo_ids[1] + newline
    assert pieces["eos"] not in context
    rows = pd.DataFrame({"example_id": [8], "sentence": ["a\nb"], "label": [0]})
    (query,) = prompts.build_queries(tokenizer, s, rows, pieces["labels"], "answer", newline)
    assert query.ids == enc(tokenizer, "Sentence: a") + newline + enc(tokenizer, "b Label:")
    (reference,) = prompts.build_queries(tokenizer, s, rows, pieces["labels"], "answer")
    assert reference.ids == enc(tokenizer, "Sentence: a") + [pieces["eos"]] + enc(tokenizer, "b Label:")


def test_content_free_queries_fill_every_field_with_each_text(tokenizer, pieces):
    two_fields = spec(("True", "False", "Neither"), name="cb", template="{premise} Question: {hypothesis}? Answer:")
    label_ids = prompts.label_token_ids(tokenizer, two_fields)
    queries = prompts.content_free_queries(tokenizer, two_fields, label_ids, "label_word")
    assert [q.example_id for q in queries] == [-1, -2, -3] and {q.gold for q in queries} == {0}
    texts = [f"{t} Question: {t}? Answer:" for t in prompts.CONTENT_FREE]
    assert [q.ids for q in queries] == [enc(tokenizer, t) + [label_ids[0]] for t in texts]
    assert [q.answer_offset for q in queries] == [len(enc(tokenizer, t)) - 1 for t in texts]
