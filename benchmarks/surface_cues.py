"""How far surface cues go on each task's data: real text against its synthetic twin.

    python benchmarks/surface_cues.py                # every task that has a corpus, and its twin

A task that a bag of words solves says little about in-context learning; one that nothing can read
says little either. For each task with real text (``icl_gd.data.corpora``) and for its synthetic twin
(``icl_gd.data.twins``, at the default ``synthetic`` sizes), this prints the class balance of the
evaluation split, the accuracy of always answering its most frequent train class, and that of a
unigram multinomial naive Bayes (add-one smoothing, lower-cased words) trained on the whole train
split and scored on the whole evaluation split: a surface-cue baseline that needs no model. It
reads the archives where the README's set-up puts them, and needs no network.
"""

from __future__ import annotations

import argparse
import math
import re
from collections import Counter

from icl_gd.data import corpora, twins

# the tasks with a corpus, and which one (each task's label rule is its own name)
REAL = {"sst2": "vader_movie_reviews", "sst5": "vader_movie_reviews", "mr": "vader_movie_reviews", "agnews": "bbc_news"}
WORD = re.compile(r"[a-z0-9']+")
# the config's default twin sizes (workflow/schemas/config.schema.yaml), which the protocol config keeps
SYNTHETIC = {"n_train": 300, "n_eval": 200, "seed": 0}


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def naive_bayes(train: list[tuple[str, int]], test: list[tuple[str, int]]) -> float:
    """Accuracy of a unigram multinomial naive Bayes with add-one smoothing."""
    classes = sorted({y for _, y in train})
    prior = Counter(y for _, y in train)
    counts = {y: Counter() for y in classes}
    for text, y in train:
        counts[y].update(words(text))
    vocab = set().union(*counts.values())
    totals = {y: sum(counts[y].values()) + len(vocab) for y in classes}

    def score(tokens: list[str], y: int) -> float:
        return math.log(prior[y]) + sum(math.log((counts[y][w] + 1) / totals[y]) for w in tokens)

    right = 0
    for text, label in test:
        tokens = [w for w in words(text) if w in vocab]  # once per text, not once per class
        right += max(classes, key=lambda y: score(tokens, y)) == label
    return right / len(test)


def measure(train: list[tuple[str, int]], test: list[tuple[str, int]]) -> dict:
    majority = Counter(y for _, y in train).most_common(1)[0][0]
    balance = Counter(y for _, y in test)
    return {
        "n": (len(train), len(test)),
        "balance": [balance.get(i, 0) for i in range(max(balance) + 1)],
        "majority": sum(y == majority for _, y in test) / len(test),
        "nb": naive_bayes(train, test),
    }


def real_rows(task: str) -> dict:
    corpus = corpora.get(REAL[task])
    rule = corpora.rule_of(corpus, task)
    splits = corpora.labelled_splits(corpus, rule, corpora.read_sentences(corpus, corpora.archive_path(corpus)))
    return measure(*[[(text, y) for _, text, y in splits[s]] for s in ("train", "eval")])


def twin_rows(task: str, synthetic: dict) -> dict:
    splits = twins.make_synthetic_task(
        task, n_train=synthetic["n_train"], n_eval=synthetic["n_eval"], seed=synthetic["seed"]
    )
    out = []
    for split in ("train", "eval"):
        frame = splits[split]
        fields = [c for c in frame.columns if c not in ("label", "example_id")]  # CB's twin has two
        out.append([(" ".join(str(row[c]) for c in fields), int(row["label"])) for _, row in frame.iterrows()])
    return measure(*out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=[*REAL, "subj", "cb"])
    args = parser.parse_args()
    synthetic = SYNTHETIC
    print("| task | text | train / eval | eval per class | majority | unigram naive Bayes |")
    print("|---|---|---:|---|---:|---:|")
    for task in args.tasks:
        sources = ([("real", real_rows(task))] if task in REAL else []) + [("twin", twin_rows(task, synthetic))]
        for source, row in sources:
            print(
                f"| {task} | {source} | {row['n'][0]:,} / {row['n'][1]:,} | {', '.join(map(str, row['balance']))} | "
                f"{100 * row['majority']:.1f}% | {100 * row['nb']:.1f}% |"
            )


if __name__ == "__main__":
    main()
