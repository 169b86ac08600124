"""The built-in model's pretraining data: ICL episodes of the twins' train splits, in the protocol's
own format (<s> + demonstrations, each prompt + label word + </s>), drawn afresh at every step.

Which label word stands for which class is decided per episode (``mapping``): the task's own words
(``canonical``), those or their reverse (``flip``), any order of them (``permute``), or, in a share
of the episodes (``pool_share``), words drawn from a *training pool* of the tokenizer's other words
and any order of the task's own in the rest (``pool``; ``data.label_pools``). Under flip, permute
and pool only the episode's own demonstrations tell which word is which class, so the loss rewards
reading them (symbol tuning, Wei et al. 2023); a model pretrained so has no mapping in its weights
to fall back on. Under pool it also learns that any word can be a label: it follows words of the
held-out pool, which no episode uses, where a reader trained on the task's own words alone reads
them at chance (docs/results.md, "Label words it never saw").

An episode records, beside its tokens, the positions whose next token is a label word (what the
model predicts at a query), and among them the ones a model that reads its demonstrations can
answer (``told``): those whose class an earlier demonstration of the episode showed, and, where
asked (``zero_shot``), the episode's first, a zero-shot query (under a permuted mapping any of the
task's words is as likely). Left out is the first demonstration of a class after others: its word
is one the episode has not used yet, nothing it says. A loss on the zero-shot query from the start
kept the model at chance; from late in the pretraining, it leaves the model no mapping of its own
(docs/results.md, "A model that reads its demonstrations").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from icl_gd.config import resolve as cfg
from icl_gd.data import prompts

MAPPINGS = ("canonical", "flip", "permute", "pool")


def preset(task: str) -> cfg.TaskSpec:
    """A built-in task as the protocol defines it (template, label words), whatever the config says."""
    return cfg.task_spec({"tasks": {task: {}}}, task)


@dataclass
class Episode:
    ids: list[int]
    labels: list[int] = field(default_factory=list)  # positions whose next token is a label word
    told: list[int] = field(default_factory=list)  # of those, the ones an earlier demonstration's class tells


def label_words(
    label_ids: np.ndarray, mapping: str, rng: np.random.Generator, pool: np.ndarray = (), pool_share: float = 0.0
) -> np.ndarray:
    """The label word (token id) of each class in one episode; under ``pool``, words of ``pool`` in
    ``pool_share`` of the episodes."""
    if mapping == "pool":
        if rng.random() < pool_share:
            return rng.choice(pool, len(label_ids), replace=False)
        mapping = "permute"
    if mapping == "canonical":
        return label_ids
    if mapping == "flip":
        return label_ids[::-1] if rng.random() < 0.5 else label_ids
    if mapping == "permute":
        return label_ids[rng.permutation(len(label_ids))]
    raise ValueError(f"pretrain_label_mapping must be one of {', '.join(MAPPINGS)}, got {mapping!r}")


class Episodes:
    """Seeded episodes of the twins' train splits: ``batch`` draws one task and one number of
    demonstrations (between ``demos[0]`` and ``demos[1]``) per batch, so that a batch's episodes are
    about as long and little of it is padding. Every episode is cut to ``max_len`` tokens. ``pool``:
    the token ids the ``pool`` mapping draws from, in ``pool_share`` of its episodes."""

    def __init__(
        self,
        tokenizer,
        frames: dict[str, pd.DataFrame],
        *,
        seed: int,
        demos=(1, 16),
        max_len: int,
        pool=(),
        pool_share: float = 0.0,
    ):
        lo, hi = int(demos[0]), int(demos[1])
        if not 1 <= lo <= hi:
            raise ValueError(f"pretrain_demos must be [lowest, highest] with 1 <= lowest <= highest, got {list(demos)}")
        self.rng = np.random.default_rng(seed)
        self.pool, self.pool_share = np.asarray(pool, dtype=np.int64), float(pool_share)
        self.demos, self.max_len = (lo, hi), int(max_len)
        self.bos, self.eos = tokenizer.bos_token_id, tokenizer.eos_token_id
        self.encoded = {}
        for task, frame in sorted(frames.items()):
            label_ids = prompts.label_token_ids(tokenizer, preset(task))
            demos = prompts.demonstration_ids(tokenizer, preset(task), frame, label_ids)
            # each demonstration without its label word, which the episode's mapping puts back
            self.encoded[task] = ([demo[:-1] for demo in demos], frame["label"].to_numpy(), np.asarray(label_ids))
        self.tasks = sorted(self.encoded)

    def episode(self, task: str, n: int, mapping: str, zero_shot: bool = False) -> Episode:
        bodies, classes, label_ids = self.encoded[task]
        order = self.rng.permutation(len(bodies))[:n]
        if mapping == "pool" and len(self.pool) < len(label_ids):
            raise ValueError(
                f"pretrain_label_mapping pool: a pool of {len(self.pool)} words for {task}'s {len(label_ids)} labels"
            )
        words = label_words(label_ids, mapping, self.rng, self.pool, self.pool_share)  # draws nothing when canonical
        ids, labels, told, seen = [self.bos], [], [], set()
        for i in order:
            ids.extend(bodies[i])
            if len(ids) >= self.max_len:
                break
            labels.append(len(ids) - 1)
            if classes[i] in seen or (zero_shot and not seen):
                told.append(len(ids) - 1)
            seen.add(classes[i])
            ids.extend((int(words[classes[i]]), self.eos))
        return Episode(ids[: self.max_len], labels, told)

    def batch(self, size: int, mapping: str, zero_shot: bool = False) -> list[Episode]:
        task = self.tasks[self.rng.integers(len(self.tasks))]
        n = int(self.rng.integers(self.demos[0], self.demos[1] + 1))
        return [self.episode(task, n, mapping, zero_shot) for _ in range(size)]
