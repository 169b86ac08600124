"""Contextual calibration (Zhao et al. 2021, "Calibrate Before Use"): the bias a context gives each
label word, read from queries that carry no content (``data.prompts.CONTENT_FREE``) in the same
context, and divided out of every example's label-word probabilities before the argmax.

It reads no evaluation example, unlike taking each word's mean log-probability over the evaluation
set off (the "centred" diagnostic of docs/tasks.md). Pure array functions (numpy only).
"""

from __future__ import annotations

import numpy as np


def label_probabilities(label_logprobs: np.ndarray) -> np.ndarray:
    """The label words' probabilities renormalised over the label words: ``(..., n_labels)``."""
    logp = np.asarray(label_logprobs, np.float64)
    logp = logp - logp.max(axis=-1, keepdims=True)
    p = np.exp(logp)
    return p / p.sum(axis=-1, keepdims=True)


def content_free_mean(content_free_logprobs: np.ndarray) -> np.ndarray:
    """The mean over the content-free queries of their label-word probabilities, each renormalised
    over the label words (Zhao et al.'s p_cf): ``(n_queries, n_labels)`` -> ``(n_labels,)``."""
    free = np.asarray(content_free_logprobs, np.float64)
    if free.ndim != 2 or len(free) == 0:
        raise ValueError(f"content-free log-probabilities must be (n_queries, n_labels), got shape {free.shape}")
    return label_probabilities(free).mean(axis=0)


def calibrated_predictions(label_logprobs: np.ndarray, content_free_logprobs: np.ndarray) -> np.ndarray:
    """The argmax over label words of p / p_cf: each example's label-word probabilities divided by
    the content-free mean of its context (:func:`content_free_mean`). ``(n, n_labels)`` -> ``(n,)``."""
    bias = content_free_mean(content_free_logprobs)
    return np.argmax(np.log(label_probabilities(label_logprobs)) - np.log(bias), axis=-1)
