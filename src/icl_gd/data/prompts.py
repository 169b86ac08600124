"""Token sequences for ZSL, ICL and FT, exactly as docs/protocol.md ("The three settings") lays them out.

- ZSL:  <s> + query prompt [+ first label word, when recording at the label word]
- ICL:  <s> + demos (prompt + label word + </s> each) + query prompt [+ first label word]
- FT:   one sequence per demonstration, <s> + prompt + label word (no </s>)

A newline inside a text becomes the model's </s> between the lines (reference behaviour). That
</s> is the line end (config key ``demo_separator``): the reference's fairseq data put </s> at
every line break, so ``eos`` keeps the tokenizer's EOS there, as the reference does, and
``newline`` writes the tokenizer's own newline instead, for models whose EOS means the end of a
document or a chat turn (:func:`line_end_ids`). Special-token ids always come from the tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from icl_gd.common.specs import TaskSpec


class PromptError(ValueError):
    """A prompt that cannot be built; the message names the task, word or row and the fix."""


@dataclass(frozen=True)
class Query:
    example_id: int
    gold: int
    ids: list[int]  # the query's own tokens: prompt [+ first label word]
    answer_offset: int  # index in ``ids`` of the token whose next-token logits give the prediction
    record_offset: int  # index in ``ids`` of the token whose activations are recorded


# what ends a line of a text and each demonstration (config key demo_separator)
SEPARATORS = ("eos", "newline")


def line_end_ids(tokenizer, separator: str = "eos") -> list[int]:
    """The tokens of the line end: the tokenizer's EOS (``eos``, the reference), or its newline as
    it follows a word (``newline``; a sentencepiece tokenizer would put a word-start piece before
    a newline encoded alone)."""
    if separator == "eos":
        return [tokenizer.eos_token_id]
    if separator != "newline":
        raise PromptError(f"demo_separator must be one of {SEPARATORS}, got {separator!r}")
    word = tokenizer.encode("a", add_special_tokens=False)
    line = tokenizer.encode("a\n", add_special_tokens=False)
    tail = line[len(word) :]
    if line[: len(word)] != word or not tail or "\n" not in tokenizer.decode(tail):
        raise PromptError(
            f"demo_separator newline: this tokenizer ({type(tokenizer).__name__}) has no newline token "
            f"('a\\n' encodes as {tokenizer.convert_ids_to_tokens(line)}); use demo_separator: eos"
        )
    return tail


def encode_text(tokenizer, text: str, line_end: list[int] | None = None) -> list[int]:
    """Tokens of ``text``, with each newline replaced by ``line_end`` (default: the tokenizer's EOS)."""
    line_end = [tokenizer.eos_token_id] if line_end is None else line_end
    ids: list[int] = []
    for i, line in enumerate(text.split("\n")):
        if i:
            ids.extend(line_end)
        ids.extend(tokenizer.encode(line, add_special_tokens=False))
    return ids


def label_token_ids(tokenizer, spec: TaskSpec) -> list[int]:
    """One token per label word (with its leading space), or an error naming the word."""
    ids = []
    for word in spec.label_words:
        tokens = tokenizer.encode(" " + word, add_special_tokens=False)
        if len(tokens) != 1:
            pieces = tokenizer.convert_ids_to_tokens(tokens)
            raise PromptError(
                f"task {spec.name!r}: label word {word!r} is {len(tokens)} tokens for this tokenizer "
                f"({pieces}); every label word must be a single token: choose another word in "
                f"tasks.{spec.name}.label_words"
            )
        ids.append(tokens[0])
    if len(set(ids)) != len(ids):
        raise PromptError(f"task {spec.name!r}: two label words map to the same token: {spec.label_words}")
    return ids


def format_prompt(spec: TaskSpec, row) -> str:
    try:
        return spec.template.format(**{f: row[f] for f in spec.text_fields})
    except KeyError as err:
        raise PromptError(
            f"task {spec.name!r}: the template needs field {err.args[0]!r}, which example "
            f"{row.get('example_id', '?')} does not have"
        ) from None


def prompt_ids(tokenizer, spec: TaskSpec, row, line_end: list[int] | None = None) -> list[int]:
    return encode_text(tokenizer, format_prompt(spec, row), line_end)


def demonstration_ids(
    tokenizer, spec: TaskSpec, demos: pd.DataFrame, label_ids: list[int], line_end: list[int] | None = None
) -> list[list[int]]:
    """Each demonstration as prompt + label word (the shared core of ICL and FT sequences)."""
    return [prompt_ids(tokenizer, spec, row, line_end) + [label_ids[int(row["label"])]] for _, row in demos.iterrows()]


def true_k(demo_lengths: list[int], longest_query: int, max_len: int) -> int:
    """How many demonstrations fit: add them in order while <s> + context + next + longest query
    stays below the context length, stop at the first that does not fit (docs/protocol.md)."""
    used, k = 1, 0
    for length in demo_lengths:
        if used + length + longest_query >= max_len:
            break
        used += length
        k += 1
    return k


def build_queries(
    tokenizer,
    spec: TaskSpec,
    rows: pd.DataFrame,
    label_ids: list[int],
    record_position: str,
    line_end: list[int] | None = None,
) -> list[Query]:
    queries = []
    for _, row in rows.iterrows():
        ids = prompt_ids(tokenizer, spec, row, line_end)
        answer = len(ids) - 1
        if record_position == "label_word":  # reference quirk: record one token after the answer
            ids = ids + [label_ids[0]]
            record = answer + 1
        elif record_position == "answer":
            record = answer
        else:
            raise PromptError(f"record_position must be 'label_word' or 'answer', got {record_position!r}")
        queries.append(Query(int(row["example_id"]), int(row["label"]), ids, answer, record))
    return queries


# Zhao et al. (2021), "Calibrate Before Use": queries that carry no content, whose label-word
# probabilities in a context measure the bias the context gives each word
CONTENT_FREE = ("N/A", "", "[MASK]")


def content_free_queries(
    tokenizer, spec: TaskSpec, label_ids: list[int], record_position: str, line_end: list[int] | None = None
) -> list[Query]:
    """One query per content-free text, with every text field of the template filled with it; their
    example ids are -1, -2, -3 and their gold 0 (they have none)."""
    rows = pd.DataFrame(
        [
            {**dict.fromkeys(spec.text_fields, text), "example_id": -1 - i, "label": 0}
            for i, text in enumerate(CONTENT_FREE)
        ]
    )
    return build_queries(tokenizer, spec, rows, label_ids, record_position, line_end)


def icl_context(tokenizer, demos: list[list[int]], line_end: list[int] | None = None) -> list[int]:
    """<s> + each demonstration followed by </s> (or ``line_end``)."""
    line_end = [tokenizer.eos_token_id] if line_end is None else line_end
    context = [tokenizer.bos_token_id]
    for demo in demos:
        context.extend(demo + line_end)
    return context


def ft_sequences(tokenizer, demos: list[list[int]]) -> list[list[int]]:
    return [[tokenizer.bos_token_id] + demo for demo in demos]
