"""Token sequences for ZSL, ICL and FT, exactly as docs/protocol.md ("The three settings") lays them out.

- ZSL:  <s> + query prompt [+ first label word, when recording at the label word]
- ICL:  <s> + demos (prompt + label word + </s> each) + query prompt [+ first label word]
- FT:   one sequence per demonstration, <s> + prompt + label word (no </s>)

A newline inside a text becomes the model's </s> between the lines (reference behaviour).
Special-token ids always come from the tokenizer.
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


def encode_text(tokenizer, text: str) -> list[int]:
    """Tokens of ``text``, with each newline replaced by the tokenizer's EOS token."""
    ids: list[int] = []
    for i, line in enumerate(text.split("\n")):
        if i:
            ids.append(tokenizer.eos_token_id)
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


def prompt_ids(tokenizer, spec: TaskSpec, row) -> list[int]:
    return encode_text(tokenizer, format_prompt(spec, row))


def demonstration_ids(tokenizer, spec: TaskSpec, demos: pd.DataFrame, label_ids: list[int]) -> list[list[int]]:
    """Each demonstration as prompt + label word (the shared core of ICL and FT sequences)."""
    return [prompt_ids(tokenizer, spec, row) + [label_ids[int(row["label"])]] for _, row in demos.iterrows()]


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
    tokenizer, spec: TaskSpec, rows: pd.DataFrame, label_ids: list[int], record_position: str
) -> list[Query]:
    queries = []
    for _, row in rows.iterrows():
        ids = prompt_ids(tokenizer, spec, row)
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


def icl_context(tokenizer, demos: list[list[int]]) -> list[int]:
    """<s> + each demonstration followed by </s>."""
    context = [tokenizer.bos_token_id]
    for demo in demos:
        context.extend(demo + [tokenizer.eos_token_id])
    return context


def ft_sequences(tokenizer, demos: list[list[int]]) -> list[list[int]]:
    return [[tokenizer.bos_token_id] + demo for demo in demos]
