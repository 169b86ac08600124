"""The six reference tasks' presets: hub ids, splits, templates, label words, seeds and
learning rates, as the papers' code has them (docs/protocol.md, "Tasks and data"). A config's
task of one of these names starts from its preset (``config.resolve.task_spec``); the synthetic
twins and the built-in model read the templates and label words from here.

Imports nothing.
"""

from __future__ import annotations

# The reference protocol (docs/protocol.md, "Tasks and data"). Hub ids are the current
# canonical ones; the reference used the legacy ids of the same data.
TASK_PRESETS: dict[str, dict] = {
    "sst2": {
        "hub_id": "nyu-mll/glue",
        "hub_config": "sst2",
        "splits": {"train": "train", "eval": "validation"},
        "template": "Sentence: {sentence} Label:",
        "label_words": ["Negative", "Positive"],
        "seeds": [2, 3, 4],
        "lr": 5e-4,
    },
    "sst5": {
        "hub_id": "SetFit/sst5",
        "hub_config": None,
        "splits": {"train": "train", "eval": "validation"},
        "template": "Sentence: {text} Label:",
        "label_words": ["terrible", "bad", "neutral", "good", "great"],
        "seeds": [5, 6, 7],
        "lr": 1.6e-4,
    },
    "mr": {
        "hub_id": "cornell-movie-review-data/rotten_tomatoes",
        "hub_config": None,
        "splits": {"train": "train", "eval": "validation"},
        "template": "Review: {text} Sentiment:",
        "label_words": ["Negative", "Positive"],
        "seeds": [5, 6, 7],
        "lr": 3e-3,
    },
    "subj": {
        "hub_id": "SetFit/subj",
        "hub_config": None,
        "splits": {"train": "train", "eval": "test"},
        "template": "Input: {text} Type:",
        "label_words": ["objective", "subjective"],
        "seeds": [4, 5, 6],
        "lr": 3e-3,
    },
    "agnews": {
        "hub_id": "fancyzhx/ag_news",
        "hub_config": None,
        "splits": {"train": "train", "eval": "test"},
        "template": (
            "Classify the news articles into the categories of World, Sports, Business, and "
            "Technology. Article: {text} Answer:"
        ),
        "label_words": ["World", "Sports", "Business", "Technology"],
        "seeds": [3, 4, 5],
        "lr": 0.2,
    },
    "cb": {
        "hub_id": "aps/super_glue",
        "hub_config": "cb",
        "splits": {"train": "train", "eval": "validation"},
        "template": "{premise} Question: {hypothesis}. True, False, or Neither? Answer:",
        "label_words": ["True", "False", "Neither"],
        "seeds": [3, 4, 5],
        "lr": 0.08,
    },
}
