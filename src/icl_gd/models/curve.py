"""How the built-in model learns to read its demonstrations: during pretraining, its zero-shot
accuracy, its ICL accuracy and its label following on held-out twin examples, against the step.

The held-out examples are rows of the train splits that the pretraining never draws
(``pretrain_curve.examples`` per task, the last rows of each split, or drawn at random where
``pretrain_curve.held_out`` says so); the demonstrations are drawn from
the rows it does train on, as the protocol draws them (``splits.select_demos``). The three readings
are the premise's (``metrics/premise.py``): ZSL, ICL with the gold labels, and ICL with the labels
permuted consistently (``splits.permute_labels``) scored against the permuted gold. ICL above ZSL
alone can be a shift that any context causes; following a permutation of the labels cannot. Given a
held-out pool of words (``novel``, ``data.label_pools``), also ``icl_novel``: the demonstrations
labelled with words of that pool, the query read among them, over :data:`NOVEL_DRAWS` draws of words
and demonstrations (the words of draw d are those setting icl_novel reads at seed d).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from icl_gd.data import label_pools, prompts, splits
from icl_gd.models import loading
from icl_gd.models.episodes import preset

READINGS = ("zsl", "icl", "icl_permuted")
NOVEL = "icl_novel"
NOVEL_DRAWS = 3


def split_held_out(frames: dict[str, pd.DataFrame], n: int, drawn: bool = False, seed: int = 0) -> tuple[dict, dict]:
    """(training rows, held-out rows) of each task: the last ``n`` rows held out (``drawn``: ``n``
    rows drawn with ``seed``, for splits in order, as the real corpora's are), and no training
    row whose text is a held-out row's of any task (tasks on one corpus, as SST-2, SST-5 and MR
    are on real sentences, share their sentences: one held out of SST-2 would be trained on as MR's)."""
    if n <= 0:
        return frames, {}
    for task, frame in frames.items():
        if len(frame) <= 2 * n:
            raise ValueError(
                f"pretrain_curve.examples: {n} held-out rows of {task}'s {len(frame)} train rows leave too few to "
                "train on; hold out fewer, or make the twins larger (synthetic.n_train)"
            )
    picked = {
        t: np.random.RandomState(seed).permutation(len(f))[:n] if drawn else np.arange(len(f) - n, len(f))
        for t, f in frames.items()
    }
    held_out = {t: f.iloc[np.sort(picked[t])] for t, f in frames.items()}
    seen = set().union(*(_texts(f) for f in held_out.values()))
    train = {t: f.iloc[np.setdiff1d(np.arange(len(f)), picked[t])] for t, f in frames.items()}
    return {t: f[~_texts(f).isin(seen)] for t, f in train.items()}, held_out


def _texts(frame: pd.DataFrame) -> pd.Series:
    """Each row's text: its columns but the label and the id, joined."""
    fields = [c for c in frame.columns if c not in ("label", "example_id")]
    return frame[fields].astype(str).agg("\n".join, axis=1)


@torch.no_grad()
def reading(
    model,
    tokenizer,
    train: dict[str, pd.DataFrame],
    held_out: dict[str, pd.DataFrame],
    *,
    k: int,
    seed: int = 0,
    novel: tuple[int, ...] | None = None,
):
    """Per task, the accuracy (%) of each of :data:`READINGS` on the held-out rows, at k
    demonstrations (as many as fit the model's context), and of :data:`NOVEL` where ``novel`` (a
    held-out pool of words) is given."""
    was_training = model.training
    model.eval()
    context_length = loading.context_length(model)
    rows = {}
    for task, queries_frame in held_out.items():
        spec = preset(task)
        label_ids = prompts.label_token_ids(tokenizer, spec)
        queries = [prompts.prompt_ids(tokenizer, spec, row) for _, row in queries_frame.iterrows()]
        gold = queries_frame["label"].to_numpy()
        demos = splits.select_demos(train[task], seed, k, 0)
        longest = max(len(q) for q in queries)

        def icl_context(shown: pd.DataFrame, words: list[int]) -> list[int]:
            demo_ids = prompts.demonstration_ids(tokenizer, spec, shown, words)
            fit = prompts.true_k([len(d) + 1 for d in demo_ids], longest, context_length)
            return prompts.icl_context(tokenizer, demo_ids[:fit])

        row = {"task": task}
        for name in READINGS:
            if name == "zsl":
                context, expected = [tokenizer.bos_token_id], gold
            else:
                shown = splits.permute_labels(demos, spec.n_labels) if name == "icl_permuted" else demos
                context = icl_context(shown, label_ids)
                expected = splits.permuted_gold(gold, spec.n_labels) if name == "icl_permuted" else gold
            predicted = _predict(model, context, queries, label_ids)
            row[name] = 100.0 * float(np.mean(predicted == expected))
        if novel is not None:
            accuracies = []
            for draw in range(NOVEL_DRAWS):
                words = label_pools.draw(novel, spec.n_labels, label_pools.key(draw, task))
                context = icl_context(splits.select_demos(train[task], draw, k, 0), words)
                accuracies.append(np.mean(_predict(model, context, queries, words) == gold))
            row[NOVEL] = 100.0 * float(np.mean(accuracies))
        rows[task] = row
    model.train(was_training)
    return rows


def _predict(model, context: list[int], queries: list[list[int]], label_ids: list[int], batch: int = 32):
    """The label word with the largest logit after context + query, for each query. Right-padded:
    under causal attention no real token sees the padding."""
    device = next(model.parameters()).device
    head = model.get_output_embeddings()
    predicted = []
    for start in range(0, len(queries), batch):
        chunk = [context + q for q in queries[start : start + batch]]
        ids = torch.full((len(chunk), max(map(len, chunk))), model.config.pad_token_id)
        for i, seq in enumerate(chunk):
            ids[i, : len(seq)] = torch.tensor(seq)
        hidden = model.base_model(input_ids=ids.to(device)).last_hidden_state
        last = hidden[torch.arange(len(chunk)), torch.tensor([len(s) - 1 for s in chunk])]
        predicted.append(head(last)[:, label_ids].argmax(-1).cpu().numpy())
    return np.concatenate(predicted)
