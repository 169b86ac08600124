"""Paper-style figures from the runs and summary tables and the training logs.

* :func:`per_layer_figure` -- paper 001 Fig. 3: per-layer similarity, one panel per metric, one
  line per training method, mean over all runs (tasks x seeds) at that layer; the random
  SimAOU baseline as a dashed reference line on a SimAOU panel.
* :func:`accuracy_figure` -- grouped bars per task for ZSL / FT / ICL accuracy (%).
* :func:`alpha_figure` -- paper 001 Fig. 2: alpha (layer mean) per task, one bar per method.
* :func:`grad_norm_figure` -- paper 001 Fig. 4 / paper 003 Fig. 3: layer x training-step
  heatmaps of the K/V gradient norms, one panel per method, linear or log colour scale.
* :func:`prediction_changes_figure` -- paper 003 Fig. 1: per task, the ZSL predictions changed
  to a right / wrong label by ICL only, FT only or both.
* :func:`lr_sweep_figure` -- layer-mean metrics against the learning rate, one line per task.
* :func:`k_sweep_figure` -- accuracies and similarities against the number of demonstrations.
* :func:`sizes_figure` -- the same against each model's parameter count.
* :func:`models_figure` -- layer-mean metrics per model, one bar per method.
* :func:`reproduction_figure` -- the papers' published values against this run's, one panel per
  metric, with the identity line (``published.reproduction``).
* :func:`claims_figure` -- the papers' claims as a forest plot: per claim and task the paired
  difference and its interval, the claimed side shaded, the verdict coloured.
* :func:`premise_figure` -- per model and task, ICL's gain over ZSL against SimAOU_norm of GD:
  does the similarity grow with ICL's own effect (paper 001's question)?
* :func:`output_distributions_figure` -- per task, KL(ICL || ZSL) beside each method's
  KL(ICL || FT): how far each setting's label distribution lies from ICL's (Shen et al. 2023).
* :func:`orders_figure` -- per task, the share of predictions the demonstrations' order changes,
  for ICL and each method.
* :func:`write_figure` -- saves ``stem.png`` (150 dpi) and ``stem.pdf`` atomically, closes it.

Error bars follow one rule everywhere (:func:`error_bars`): the spread of what was averaged
(sample std over seeds, or over runs = tasks x seeds) where more than one value went into the
mean; where only one did, its bootstrap interval over the evaluation examples (``ci_low``,
``ci_high``), drawn dashed, so that a single seed still shows its uncertainty. The title of each
figure says which it drew. A bar or panel without data says so ("n/a", "no data"), never a
silent gap or a zero.

Inputs are the tidy runs table (``results/metrics/runs.parquet``: model, variant, task, seed,
method, metric, layer, value, ci_low, ci_high), the summary table
(``results/metrics/summary.parquet``: model, variant, task, method, metric, layer, mean, std, n,
ci_low, ci_high) and gradient-norm arrays. The package imports nothing of icl_gd but the
display labels, the claims' texts and the atomic writer, and reads no config; it renders with the
non-interactive Agg backend (``base``). Its modules, by what they show: ``paper`` (the papers'
figures), ``sweeps`` (learning rate, k, model size, models), ``against_papers`` (reproduction,
claims), ``beyond`` (the tests of papers other than the three).
"""

from icl_gd.report.figures.against_papers import claims_figure, premise_figure, reproduction_figure
from icl_gd.report.figures.base import CHANGE_PARTS, error_bars, method_colors, plt, write_figure  # noqa: F401 (the tests use plt and method_colors)
from icl_gd.report.figures.beyond import orders_figure, output_distributions_figure
from icl_gd.report.figures.paper import (
    accuracy_figure,
    alpha_figure,
    grad_norm_figure,
    per_layer_figure,
    prediction_changes_figure,
)
from icl_gd.report.figures.sweeps import k_sweep_figure, lr_sweep_figure, models_figure, sizes_figure

__all__ = [
    "per_layer_figure",
    "accuracy_figure",
    "alpha_figure",
    "grad_norm_figure",
    "prediction_changes_figure",
    "lr_sweep_figure",
    "k_sweep_figure",
    "sizes_figure",
    "models_figure",
    "reproduction_figure",
    "claims_figure",
    "premise_figure",
    "output_distributions_figure",
    "orders_figure",
    "error_bars",
    "write_figure",
    "CHANGE_PARTS",
]
