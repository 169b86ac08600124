"""Which tables and figures the report holds, built from the aggregated metrics files.

The layouts themselves live in ``tables`` and ``figures``; this module decides what goes where.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import pandas as pd

from icl_gd.activations import cache
from icl_gd.common import frames, names, provenance
from icl_gd.metrics import catalog
from icl_gd.report import (
    choice_table,
    claim_wording,
    costs,
    figures,
    premise_table,
    published,
    render,
    summary,
    tables,
)

log = logging.getLogger(__name__)
# The papers' published numbers (published.py), shipped with the workflow.
PUBLISHED = Path(__file__).resolve().parents[3] / "docs" / "published.csv"


def _stems(outputs: list[str]) -> dict[str, Path]:
    """Output files -> {name: path without extension}, in output order."""
    stems: dict[str, Path] = {}
    for out in map(Path, outputs):
        stems.setdefault(out.stem, out.with_suffix(""))
    return stems


def _paths(found) -> list[str]:
    """An input that is one file or several."""
    return [found] if isinstance(found, str) else list(found)


def build_table(
    name: str,
    inputs: dict,
    *,
    model: str,
    variant: str,
    methods: list[str],
    n_seeds: int,
    baseline: str | None = None,
    layer_causal=(),
    clipped=(),
    paper002=(),
    roles=None,
    k_sweep=(),
    significance: float = 0.05,
    ci_level: float = 0.95,
    records=(),
    **_,
) -> pd.DataFrame:
    """The table ``name`` of the report, from the files in ``inputs`` (summary, comparisons,
    data statistics; the published numbers come from :data:`PUBLISHED`). ``roles``: published
    method -> the run's
    (``plan.published_roles``). ``records``: the costs table's jobs (rule, setting, path of the job's
    benchmark record), read where they exist."""
    if name == "costs":
        return costs.costs_table(costs.read_records(list(records)))
    if name == "data":
        return tables.data_table(frames.read_frame(inputs["data"]), made_by=frames.read_provenance(inputs["data"]))
    if name == "comparisons":
        return tables.comparisons_table(
            frames.read_frame(inputs["comparisons"]), model, variant, significance=significance, ci_level=ci_level
        )
    if name == "orders":
        return tables.orders_table(frames.read_frame(inputs["orders"]), model, variant, methods)
    if name == "choice":
        return choice_table.choice_table(choice_table.read_choices(_paths(inputs["choice"])))
    if name in ("claims", "claims_chosen"):
        return claim_wording.claims_table(
            frames.read_frame(inputs["claims"]),
            model,
            roles or {},
            ci_level=ci_level,
            premise=frames.read_frame(inputs["premise"]) if "premise" in inputs else None,
        )
    summary = frames.read_frame(inputs["summary"])
    if name == "premise":
        methods = frames.read_frame(inputs["premise_methods"]) if "premise_methods" in inputs else None
        return premise_table.premise_table(
            frames.read_frame(inputs["premise"]), summary, (roles or {}).get("gd"), methods
        )
    if name == "reproduction":
        table = published.read_published(PUBLISHED)
        cells = published.reproduction(table, summary, model, roles or {})
        return tables.reproduction_table(cells, published.n_results(table), ci_level=ci_level)
    first = baseline or methods[0]
    common = dict(n_seeds_expected=n_seeds)
    builders = {
        "accuracy": lambda: tables.accuracy_table(summary, model, variant=variant, method=first, **common),
        "methods": lambda: tables.methods_table(summary, model, variant=variant, methods=methods, **common),
        "variants": lambda: tables.variants_table(summary, model, method=first, **common),
        "layer_causal": lambda: tables.layer_causal_table(summary, model, variant, first, layer_causal, **common),
        "clipping": lambda: tables.layer_causal_table(summary, model, variant, first, clipped, **common),
        "paper002": lambda: tables.methods_table(
            summary,
            model,
            variant=variant,
            methods=list(paper002),
            metrics=catalog.shown_in("paper002"),
            baselines=(),
            **common,
        ),
        "intervals": lambda: tables.intervals_table(summary, model, variant, methods),
        "k_sweep": lambda: tables.k_sweep_table(summary, model, variant, list(k_sweep)),
    }
    if name not in builders:
        raise ValueError(
            f"unknown table {name!r}; known: "
            f"{sorted([*builders, 'costs', 'data', 'comparisons', 'reproduction', 'claims', 'orders', 'choice'])}"
        )
    return builders[name]()


def write_table(name: str, inputs: dict, output: str, *, configfiles=(), caption: str | None = None, **params) -> None:
    """Build the table ``name`` and write its .md, .tex and .csv beside ``output``. ``caption``:
    the one the Snakemake report shows (the table rule's parameter); by default
    :func:`names.table_caption` at ``params["ci_level"]``, which is what the rule passes."""
    table = build_table(name, inputs, **params)
    if caption is None:
        caption = names.table_caption(name, ci_level=params.get("ci_level", 0.95))
    source = f" Model: {params['model']}, variant: {params['variant']}; config: {', '.join(configfiles)}."
    stem = Path(output).with_suffix("")
    render.write_table_files(table, stem, caption + source)
    log.info("wrote table %s", stem)


def _grad_norm_figure(train_logs: list[str], *, model: str, variant: str):
    """Paper 001 Fig. 4: the logs of one task and seed, one panel per method in the given order;
    a layer-causal method (kind ``lcgd``) on a log colour scale, as in the paper."""
    norms, log_scale, runs = {}, set(), set()
    for path in train_logs:
        meta, log_ = cache.read_train_log(path)
        norms[meta["setting"]] = log_["grad_norm"]
        if meta["kind"] == "lcgd":
            log_scale.add(meta["setting"])
        runs.add((meta["task"], meta["seed"]))
    if len(runs) > 1:
        raise ValueError(f"gradient-norm logs of several runs given: {sorted(runs)}; expected one task and seed")
    which = ", ".join(f"task {names.task_label(task)}, seed {seed}" for task, seed in runs) or "no training log given"
    title = f"{model} ({names.variant_label(variant, in_text=True)}): $\\ell_2$ norm of each layer's K/V gradient per training step\n{which}"
    return figures.grad_norm_figure(norms, log_scale=log_scale, title=title)


def write_figures(
    runs_path: str | None,
    summary_path: str | None,
    outputs: list[str],
    *,
    model: str,
    variant: str,
    methods: list[str],
    ci_level: float = 0.95,
    baseline: str | None = "gd",
    train_logs: list[str] = (),
    lr_sweep: list[dict] = (),
    k_sweep: list[dict] = (),
    models: list[str] = (),
    kinds: dict[str, str] | None = None,
    roles: dict[str, str] | None = None,
    sizes_path: str | None = None,
    claims_path: str | None = None,
    orders_path: str | None = None,
    premise_path: str | None = None,
) -> None:
    """Each output stem names its figure. ``methods`` are the report variant's (``kinds``: each
    one's kind, which picks its colour: names are the user's); alpha shows those
    compared with ``baseline``; the gradient norms come from ``train_logs`` (one task and seed);
    ``lr_sweep`` rows are (group, method, task, lr), ``k_sweep`` rows (group, method, task, k);
    ``models`` is the models figure's order;
    ``roles`` match the reproduction and claims figures' published methods to the run's, ``sizes_path``
    (``model_statistics``) the sizes figure its models' parameter counts, ``claims_path`` (rule
    ``evaluate_claims``) is the claims figure's tests and ``premise_path`` the premise figure's premise,
    ``orders_path`` (rule ``order_sensitivity``) the orders figure's table.
    The metrics tables are read only by the figures that need them (the gradient-norm job has no
    metrics among its inputs)."""
    runs = functools.cache(lambda: frames.read_frame(runs_path))
    summary = functools.cache(lambda: frames.read_frame(summary_path))
    builders = {
        "per_layer": lambda: figures.per_layer_figure(
            runs(), model, variant=variant, methods=methods, ci_level=ci_level, kinds=kinds
        ),
        "accuracy": lambda: figures.accuracy_figure(
            summary(), model, variant=variant, method=methods[0], ci_level=ci_level
        ),
        "alpha": lambda: figures.alpha_figure(
            summary(),
            model,
            variant=variant,
            methods=[m for m in methods if m != baseline],
            baseline=baseline,
            ci_level=ci_level,
            kinds=kinds,
        ),
        "grad_norms": lambda: _grad_norm_figure(list(train_logs), model=model, variant=variant),
        "prediction_changes": lambda: figures.prediction_changes_figure(
            summary(), model, variant=variant, methods=methods
        ),
        "lr_sweep": lambda: figures.lr_sweep_figure(
            summary(),
            model,
            pd.DataFrame(list(lr_sweep), columns=["group", "method", "task", "lr"]),
            variant=variant,
            ci_level=ci_level,
        ),
        "k_sweep": lambda: figures.k_sweep_figure(
            summary(),
            model,
            pd.DataFrame(list(k_sweep), columns=["group", "method", "task", "k"]),
            variant=variant,
            ci_level=ci_level,
        ),
        "models": lambda: figures.models_figure(
            runs(), models, variant=variant, methods=methods, ci_level=ci_level, kinds=kinds
        ),
        "sizes": lambda: figures.sizes_figure(
            summary(), frames.read_frame(sizes_path), variant=variant, methods=methods, ci_level=ci_level
        ),
        "reproduction": lambda: figures.reproduction_figure(
            published.reproduction(published.read_published(PUBLISHED), summary(), model, roles or {}),
            model,
            ci_level=ci_level,
        ),
        "output_distributions": lambda: figures.output_distributions_figure(
            summary(), model, variant=variant, methods=methods, ci_level=ci_level, kinds=kinds
        ),
        "orders": lambda: figures.orders_figure(
            frames.read_frame(orders_path), model, variant=variant, methods=methods, ci_level=ci_level, kinds=kinds
        ),
        "claims": lambda: figures.claims_figure(frames.read_frame(claims_path), model, roles or {}, ci_level=ci_level),
        "premise": lambda: figures.premise_figure(
            premise_table.premise_table(
                frames.read_frame(premise_path), summary(), (roles or {}).get("gd")
            ).reset_index()
        ),
    }
    for name, stem in _stems(outputs).items():
        figures.write_figure(builders[name](), stem)
        log.info("wrote figure %s", stem)


def write_first_page(
    inputs: dict,
    md_path: str,
    rst_path: str,
    *,
    model: str,
    variant: str,
    about: dict,
    tables: list[str],
    figures: list[str],
    roles: dict[str, str] | None = None,
    ci_level: float = 0.95,
) -> None:
    """The report's first page (``summary``) from the run's files: the data statistics, and where
    the report sets the run beside the papers, the claims' tests, their premise (and finetuning's
    side of it, ``premise_methods``) and the summary."""
    claim_tests = cells = premise = premise_methods = None
    n_published = 0
    if "premise" in inputs:
        premise = frames.read_frame(inputs["premise"])
    if "premise_methods" in inputs:
        premise_methods = frames.read_frame(inputs["premise_methods"])
    chosen_tests = frames.read_frame(inputs["claims_chosen"]) if "claims_chosen" in inputs else None
    if "claims" in inputs:
        claim_tests = frames.read_frame(inputs["claims"])
        table = published.read_published(PUBLISHED)
        cells = published.reproduction(table, frames.read_frame(inputs["summary"]), model, roles or {})
        n_published = published.n_results(table)
    blocks = summary.first_page(
        model=model,
        variant=variant,
        about=about,
        data=frames.read_frame(inputs["data"]),
        claim_tests=claim_tests,
        premise=premise,
        premise_methods=premise_methods,
        choices=choice_table.read_choices(_paths(inputs["choice"])) if "choice" in inputs else None,
        chosen_tests=chosen_tests,
        reproduction=cells,
        n_published=n_published,
        tables=list(tables),
        figures=list(figures),
        ci_level=ci_level,
        # every cache behind the page: the run's own and, where they ran, its further orders'
        made_by=provenance.merged(*(frames.read_provenance(inputs[t]) for t in ("summary", "orders") if t in inputs)),
    )
    summary.write(blocks, md_path, rst_path)
    log.info("wrote the first page %s", md_path)
