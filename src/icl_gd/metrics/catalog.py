"""Every run-level score, one row each: what it is, what it can take, how it is shown, the smallest
difference of interest, where it appears, whether the papers print it and whether it reads a
finetuned model. Every list of metrics the package uses is read from here (:func:`names`,
:func:`shown_in`, ...), at the time it is used, so that adding a metric is one row here plus its
formula (``metrics/formulas.py``, or a ratio of per-example sums in ``metrics/scoring.py``), and a
test can add one to a catalog of its own (:func:`extended`) and see it reach a table.

Kinds, and what follows from each:

- ``share``: a share of examples (an accuracy, a Jaccard index, the share of predictions an
  order changes), held as a fraction in [0, 1] and shown in percent (x100; a difference in points);
- ``percent``: held in percent already (Rec2FTP);
- ``cosine``: a cosine similarity in [-1, 1] (SimAOU, SimAM, alpha), or a difference of two (SimAM_delta);
- ``divergence``: a divergence between two label distributions in nats (KL), or TV in [0, 1].

Margins (the smallest effect of interest, in the units the metric tables hold a score): shares 1
point, a difference the papers would not print as one (they discuss 5 to 20 points) and one
example in a hundred; cosines 0.01, the difference paper 001's Table 1 calls a tie; KL 0.01 nats,
the same hundredth. Computed as (``computed``): ``ratio`` of per-example sums, ``mean`` of one value
per example, or ``similarity`` per example and layer (its layer mean is the run's score).

The lists a row can be in (``shown_in``; a table as ``outputs.build_table`` names it, a figure as
``outputs.write_figures`` does), so that showing a metric in one more place is one line here:

- tables: ``accuracy`` (paper 003 Table 1, and beyond), ``accuracy_best`` (its rows compared for
  the best value: the settings' accuracies), ``variants`` (paper 001 Table 1), ``methods`` (paper
  001 Table 2, a row per method) and ``methods_baselines`` (its rows of their own above it, from
  the first method's runs: they depend on ZSL and ICL alone), ``paper002``, ``layer_causal``
  (paper 003 Tables 2 and 3, its four rows in its order: the random SimAOU, SimAOU_norm per method,
  SimAM before finetuning, SimAM after it per method), ``intervals``, ``comparisons``, ``k_sweep``,
  ``orders`` (the order metrics: ``metrics.orders`` computes them, the orders table shows them),
  ``premise`` (the similarity beside the premise);
- figures, their name and ``_figure``: ``per_layer_figure``, ``accuracy_figure``, ``alpha_figure``,
  ``lr_sweep_figure``, ``k_sweep_figure``, ``sizes_figure``, ``models_figure``,
  ``output_distributions_figure`` (ZSL's divergence from ICL, then FT's), ``orders_figure``
  (ICL's, then FT's), ``reproduction_figure``;
- what the metrics stage computes: ``compared`` (the paired comparison of two methods),
  ``orders_spread`` (the similarities whose spread over the orders is reported), ``f2t`` (the
  similarities also scored on the F-to-T examples) and ``with_baseline`` (the similarities a run
  has only against a baseline method).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

KINDS = ("share", "percent", "cosine", "divergence")


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # one of KINDS
    computed: str  # ratio | mean | similarity
    label: str  # plain text: tables, claims, logs
    low: float = -np.inf  # the values it can take, in the units the metric tables hold it
    high: float = np.inf
    margin: float = 0.01  # smallest effect of interest, in the same units
    figure_label: str | None = None  # mathtext, for figure panels and legends (default: its name)
    axis_label: str | None = None  # a figure axis that shows it alone
    shown_in: tuple[str, ...] = ()  # the lists that hold it (the module's docstring), in their row order (rank)
    published: bool = False  # the papers print it: docs/published.csv may name it
    rank: dict = field(default_factory=dict)  # list -> position, where a list orders rows its own way
    named: dict = field(default_factory=dict)  # table -> the row's name there, where a table names it its own way
    random_baseline: str | None = None  # the random update's similarity a figure draws beside it
    color: str | None = None  # a figure's colour for it, where it stands for a setting (paper 001's)
    finetuned: bool = False  # it reads a finetuned model: a claim on it compares ICL (or ZSL) with finetuning

    @property
    def scale(self) -> float:
        """The factor from a metric table's value to what tables, claims and figures show."""
        return 100.0 if self.kind == "share" else 1.0


def _share(name, label, computed="ratio", **kw) -> Metric:
    return Metric(name, "share", computed, label, 0.0, 1.0, 0.01, **kw)


def _cosine(name, label, **kw) -> Metric:
    return Metric(name, "cosine", "similarity", label, -1.0, 1.0, 0.01, **kw)


CATALOG: tuple[Metric, ...] = (
    _share("acc_zsl", "ZSL Accuracy (%)", figure_label="ZSL", axis_label="ZSL accuracy (%)", color="0.65",
           shown_in=("accuracy", "accuracy_best", "k_sweep",
                     "accuracy_figure", "k_sweep_figure", "sizes_figure", "reproduction_figure"),
           published=True),
    _share("acc_icl", "ICL Accuracy (%)", figure_label="ICL", axis_label="ICL accuracy (%)", color="tab:blue",
           shown_in=("accuracy", "accuracy_best", "paper002", "intervals", "k_sweep",
                     "accuracy_figure", "k_sweep_figure", "sizes_figure", "reproduction_figure"),
           published=True, rank={"accuracy": 2, "intervals": 1, "accuracy_figure": 2}),
    _share("acc_ft", "FT Accuracy (%)", figure_label="FT", axis_label="FT accuracy (%)", color="tab:orange",
           shown_in=("accuracy", "accuracy_best", "paper002", "intervals", "comparisons", "k_sweep",
                     "accuracy_figure", "lr_sweep_figure", "k_sweep_figure", "sizes_figure", "models_figure",
                     "reproduction_figure", "compared"),
           published=True, finetuned=True,
           rank={"accuracy": 1, "intervals": 0, "accuracy_figure": 1, "lr_sweep_figure": 3, "models_figure": 3}),
    Metric("rec2ftp", "percent", "ratio", "Rec2FTP (%)", 0.0, 100.0, 1.0, shown_in=("accuracy", "intervals"),
           published=True, finetuned=True, rank={"accuracy": 7}),
    _share("jaccard_all", "Jaccard Index (%)", figure_label="Jaccard index",
           shown_in=("accuracy", "reproduction_figure"), published=True, finetuned=True),
    _share("jaccard_correct", "Jaccard - Correct (%)", figure_label="Jaccard index (correct changes)",
           shown_in=("accuracy", "reproduction_figure"), published=True, finetuned=True),
    _share("jaccard_incorrect", "Jaccard - Incorrect (%)", figure_label="Jaccard index (incorrect changes)",
           shown_in=("accuracy", "reproduction_figure"), published=True, finetuned=True),
    # ICL on consistently permuted labels, against the permuted gold (setting icl_permuted): the
    # claims' premise, that the model follows its demonstrations' labels; beyond the papers
    _share("acc_icl_permuted", "ICL, permuted labels, accuracy (%)", figure_label="ICL, permuted labels",
           axis_label="ICL accuracy on permuted labels (%)", shown_in=("accuracy",), rank={"accuracy": 3}),
    # ICL with label words the model never saw as labels (setting icl_novel, data.label_pools), against
    # the gold: whether it follows any words as labels, not only its training's (Wei et al. 2023)
    _share("acc_icl_novel", "ICL, novel label words, accuracy (%)", figure_label="ICL, novel label words",
           axis_label="ICL accuracy on novel label words (%)", shown_in=("accuracy",), rank={"accuracy": 3.5}),
    # ZSL's and ICL's accuracy after contextual calibration (Zhao et al. 2021; metrics.calibration):
    # each label word's probability divided by its mean over content-free queries in the same context
    _share("acc_zsl_calibrated", "ZSL Accuracy, calibrated (%)", figure_label="ZSL, calibrated",
           axis_label="ZSL accuracy, calibrated (%)", shown_in=("accuracy",), rank={"accuracy": 0.5}),
    _share("acc_icl_calibrated", "ICL Accuracy, calibrated (%)", figure_label="ICL, calibrated",
           axis_label="ICL accuracy, calibrated (%)", shown_in=("accuracy",), rank={"accuracy": 2.5}),
    Metric("kl_icl_ft", "divergence", "mean", "KL(ICL || FT)", 0.0, np.inf, 0.01, r"KL(ICL$\,\|\,$FT)",
           shown_in=("methods", "intervals", "output_distributions_figure"),
           rank={"methods": 6, "intervals": 10, "output_distributions_figure": 2}, finetuned=True),
    Metric("kl_icl_zsl", "divergence", "mean", "KL(ICL || ZSL)", 0.0, np.inf, 0.01, r"KL(ICL$\,\|\,$ZSL)",
           shown_in=("methods_baselines", "intervals", "output_distributions_figure"),
           rank={"methods_baselines": 3, "intervals": 11}),
    Metric("tv_icl_ft", "divergence", "mean", "TV(ICL, FT)", 0.0, 1.0, 0.01, "TV(ICL, FT)",
           shown_in=("methods", "intervals"), rank={"methods": 7, "intervals": 12}, finetuned=True),
    _share("order_changed_icl", "ICL predictions changed across orders (%)", "mean",
           figure_label="ICL: predictions changed across orders", shown_in=("orders", "orders_figure"),
           named={"orders": "ICL: predictions changed across orders (%)"}),
    _share("order_changed_ft", "FT predictions changed across orders (%)", "mean",
           figure_label="FT: predictions changed across orders", shown_in=("orders", "orders_figure"),
           named={"orders": "FT: predictions changed across orders (%)"}, finetuned=True),
    Metric("order_change_gap", "share", "mean", "ICL minus FT predictions changed across orders (%)", -1.0, 1.0, 0.01,
           shown_in=("orders",), named={"orders": "ICL minus FT (points)"}, finetuned=True),
    # Each SimAOU's random baseline: the reference's uniform r is what the papers print next to
    # SimAOU_norm; a centred Gaussian r is isotropic, so its cosine with any fixed update has the same
    # law whether or not h was normalised: the null of the unnormalised SimAOU as well
    _cosine("simaou", "SimAOU", figure_label="SimAOU", random_baseline="simaou_random_gaussian",
            shown_in=("variants", "methods", "intervals", "comparisons",
                      "per_layer_figure", "reproduction_figure", "compared", "f2t"),
            published=True, finetuned=True),
    _cosine("simaou_norm", "SimAOU_norm", figure_label=r"SimAOU$_\mathrm{norm}$", random_baseline="simaou_random",
            shown_in=("methods", "paper002", "layer_causal", "intervals", "comparisons", "k_sweep", "premise",
                      "lr_sweep_figure", "k_sweep_figure", "sizes_figure", "models_figure", "reproduction_figure",
                      "compared", "orders_spread", "f2t"),
            published=True, finetuned=True,
            rank={"methods": 1.5, "layer_causal": 1.5, "intervals": 3, "comparisons": 0.5}),
    _cosine("simaou_random", "Random SimAOU", figure_label="Random SimAOU (reference, uniform $r$)",
            shown_in=("methods_baselines", "layer_causal", "reproduction_figure"), published=True),
    _cosine("simaou_random_gaussian", "Random SimAOU (Gaussian)", figure_label="Random SimAOU (Gaussian $r$)",
            shown_in=("methods_baselines",)),
    _cosine("simam_before", "SimAM_before", figure_label="SimAM (before FT)",
            shown_in=("layer_causal", "reproduction_figure", "f2t"), published=True),
    _cosine("simam_after", "SimAM_after", figure_label="SimAM (after FT)",
            shown_in=("methods", "paper002", "layer_causal", "intervals", "comparisons",
                      "reproduction_figure", "compared", "f2t"),
            published=True, finetuned=True),
    Metric("simam_delta", "cosine", "similarity", "SimAM_delta", -2.0, 2.0, 0.01, r"SimAM$_\Delta$",
           shown_in=("variants", "methods", "paper002", "intervals", "comparisons", "k_sweep",
                     "per_layer_figure", "lr_sweep_figure", "k_sweep_figure", "sizes_figure", "models_figure",
                     "reproduction_figure", "compared", "orders_spread", "f2t"),
           published=True, finetuned=True),
    _cosine("alpha", "alpha", figure_label=r"$\alpha$", shown_in=("alpha_figure", "f2t", "with_baseline"),
            published=True, finetuned=True),
)  # fmt: skip

_active: list[tuple[Metric, ...]] = [CATALOG]


def catalog() -> tuple[Metric, ...]:
    """The metrics in use: :data:`CATALOG`, or a test's (:func:`extended`)."""
    return _active[-1]


@contextlib.contextmanager
def extended(*metrics: Metric) -> Iterator[tuple[Metric, ...]]:
    """Within the block, the catalog holds ``metrics`` too (after the others)."""
    _active.append(catalog() + tuple(metrics))
    try:
        yield catalog()
    finally:
        _active.pop()


def get(name: str) -> Metric | None:
    """A score's row (a score on the f2t subset as its own), or None."""
    name = name.removesuffix("_f2t")
    return next((m for m in catalog() if m.name == name), None)


def names(*, kind: str | None = None, computed: str | None = None) -> tuple[str, ...]:
    """The metrics' names in catalog order, of one kind or way of computing where given."""
    return tuple(
        m.name for m in catalog() if (kind is None or m.kind == kind) and (computed is None or m.computed == computed)
    )


def shown_in(table: str) -> tuple[str, ...]:
    """The metrics a table or figure lists, in its row order: catalog order unless a row says its rank."""
    rows = [m for m in catalog() if table in m.shown_in]
    ranked = sorted(range(len(rows)), key=lambda i: (rows[i].rank.get(table, i), i))
    return tuple(rows[i].name for i in ranked)


def published() -> frozenset[str]:
    """The run-level scores a published cell may name."""
    return frozenset(m.name for m in catalog() if m.published)


def in_percent(metric: str) -> bool:
    """Whether a score is shown in percent (a share of examples)."""
    found = get(metric)
    return found is not None and found.kind == "share"


def display_scale(metric: str) -> float:
    """The factor from a metric table's value to what tables, claims and figures show: 100 for a
    share of examples (percent, or points for a difference), 1 otherwise."""
    found = get(metric)
    return found.scale if found is not None else 1.0


def value_range(metric: str) -> tuple[float, float]:
    """(lowest, highest) value a score can take; unbounded for a metric not in the catalog."""
    found = get(metric)
    return (found.low, found.high) if found is not None else (-np.inf, np.inf)


def margin(metric: str) -> float:
    """The smallest effect of interest of a score, in the units the metric tables hold it."""
    found = get(metric)
    if found is None:
        raise KeyError(f"{metric}: not in the metric catalog; add its row to icl_gd/metrics/catalog.py")
    return found.margin


def label(metric: str, table: str | None = None) -> str:
    """Plain-text name of a metric ("simaou_norm" -> "SimAOU_norm"), or the one ``table`` gives its row."""
    found = get(metric)
    if found is None or metric.endswith("_f2t"):
        return metric
    return found.named.get(table, found.label)


def figure_label(metric: str) -> str:
    """Mathtext name of a metric in a figure ("simam_delta" -> "SimAM$_\\Delta$")."""
    found = get(metric)
    if found is None or metric.endswith("_f2t"):
        return metric
    return found.figure_label or metric


def axis_label(metric: str) -> str:
    """A figure axis showing ``metric`` ("acc_ft" -> "FT accuracy (%)")."""
    found = get(metric)
    if found is None or metric.endswith("_f2t") or not found.axis_label:
        return figure_label(metric)
    return found.axis_label


def finetuned(metric: str) -> bool:
    """Whether a score reads a finetuned model (FT's predictions, outputs or maps): a claim on it
    compares ICL, or ZSL, with finetuning (``premise.finetuned_methods``). No pseudo-score outside
    the catalog (the majority-class rate) does."""
    found = get(metric)
    return found is not None and found.finetuned


def random_baseline(metric: str) -> str | None:
    """The random update's similarity a figure draws beside ``metric``, if any."""
    found = get(metric)
    return found.random_baseline if found is not None and not metric.endswith("_f2t") else None


def color(metric: str) -> str | None:
    """A figure's colour for ``metric``, where it stands for a setting."""
    found = get(metric)
    return found.color if found is not None and not metric.endswith("_f2t") else None
