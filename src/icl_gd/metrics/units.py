"""The units the metric tables hold each score in, and the one percent rule.

A share of examples (an accuracy, a Jaccard index, the share of predictions an order changes) is
held as a fraction and shown in percent, x100, by every table, claim and figure
(:func:`display_scale`); Rec2FTP is held in percent already; similarities are cosines,
divergences nats. :data:`RANGES` says what each score can take. Imports nothing of the package.
"""

from __future__ import annotations

import numpy as np

# Scores held as fractions of examples: tables and figures show them in percent, claims read them
# in points (Rec2FTP is held in percent already).
FRACTION_METRICS = frozenset(
    {
        "acc_zsl",
        "acc_ft",
        "acc_icl",
        "jaccard_all",
        "jaccard_correct",
        "jaccard_incorrect",
        "order_changed_icl",
        "order_changed_ft",
        "order_change_gap",
    }
)


def in_percent(metric: str) -> bool:
    """Whether a score is shown in percent (a share of examples; on the f2t subset as its own)."""
    return metric.removesuffix("_f2t") in FRACTION_METRICS


def display_scale(metric: str) -> float:
    """The factor from a metric table's value to what tables, claims and figures show: 100 for a
    share of examples (percent, or points for a difference), 1 otherwise."""
    return 100.0 if in_percent(metric) else 1.0


# What each score can take, in the units the metric tables hold it: shares of examples as
# fractions (Rec2FTP in percent), similarities as cosines, divergences in nats. A bootstrap of a
# mean over examples stays within these by construction; the interval of a mean over seeds adds
# their spread as a Student t about their mean (icl_gd.metrics.inference), which nothing else keeps there
# (three seeds at 0%, 40% and 100% give replicates below 0), so its replicates are clipped to them
# (:func:`within_range`).
RANGES = {
    **dict.fromkeys(
        (
            "acc_zsl",
            "acc_icl",
            "acc_ft",
            "jaccard_all",
            "jaccard_correct",
            "jaccard_incorrect",
            "tv_icl_ft",
            "order_changed_icl",
            "order_changed_ft",
        ),
        (0.0, 1.0),
    ),
    "rec2ftp": (0.0, 100.0),
    "order_change_gap": (-1.0, 1.0),
    "kl_icl_ft": (0.0, np.inf),
    "kl_icl_zsl": (0.0, np.inf),
    **dict.fromkeys(
        ("simaou", "simaou_norm", "simaou_random", "simaou_random_gaussian", "simam_before", "simam_after", "alpha"),
        (-1.0, 1.0),
    ),
    "simam_delta": (-2.0, 2.0),
}


def metric_range(metric: str) -> tuple[float, float]:
    """(lowest, highest) value a score can take (:data:`RANGES`; a score on the f2t subset as its
    own); unbounded for a metric not listed."""
    return RANGES.get(metric.removesuffix("_f2t"), (-np.inf, np.inf))
