"""Paper-style result tables from the aggregated summary table.

Input: ``results/metrics/summary.parquet`` (one row per model, variant, task, method, metric and
layer, aggregated over seeds: columns ``mean``, ``std`` (sample std, NaN when n = 1) and ``n``).
Only run-level rows (``layer`` is NA: the mean over layers, or a scalar metric) enter the tables.

Three layouts:

* :func:`variants_table` -- paper 001 Table 1: rows (metric, model variant), columns tasks.
* :func:`methods_table` -- paper 001 Table 2: rows "metric (method)", columns tasks + Average.
* :func:`accuracy_table` -- paper 003 Table 1: rows accuracies / Jaccard indexes (%), columns tasks.

Each builder returns a DataFrame of display strings ("0.12 ± 0.01"; "—" where there is no data,
never 0). What the string cells cannot carry travels in ``DataFrame.attrs``:

* ``attrs["best"]``: list of ``(row_key, column)`` cells holding the best (highest) value among
  the rows of the same metric in that column (ties at display precision are all marked, unless
  every row ties; a metric with one valued row in the column marks nothing);
* ``attrs["footnotes"]``: lines printed under the table (fewer seeds than expected, averages
  over incomplete rows).

``render``'s :func:`to_markdown` / :func:`to_latex` / :func:`to_html` render a table (best values
in bold), and its :func:`write_table_files` writes ``stem.md``, ``stem.tex``, ``stem.csv`` and
``stem.html`` atomically.

This module imports nothing of the package but the display labels, the wording of a provenance
record and the atomic writer: functions
take DataFrames and return DataFrames or strings; nothing reads the config.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
import pandas as pd

from icl_gd.common.names import (
    TASK_ORDER,
    method_label,
    order_tasks,
    percent,
    task_label,
    variant_label,
)
from icl_gd.common.provenance import describe
from icl_gd.metrics import catalog
from icl_gd.report.selection import run_level

__all__ = [
    "TASK_ORDER",
    "PAPER_VARIANTS",
    "MISSING",
    "task_label",
    "variant_label",
    "method_label",
    "order_tasks",
    "format_cell",
    "variants_table",
    "methods_table",
    "accuracy_table",
    "layer_causal_table",
    "comparisons_table",
    "intervals_table",
    "data_table",
]

MISSING = "—"  # a cell without data (never shown as 0)
SEEDS_MARK = "†"  # the cell was computed from fewer seeds than expected
PARTIAL_MARK = "‡"  # an Average over the tasks that have data only

# The paper 001 Table 1 rows, in order; other variants found in the data are appended.
PAPER_VARIANTS: tuple[str, ...] = ("trained", "trained_embeddings", "untrained")

SIGNIFICANT_MARK = "*"


# ------------------------------------------------------------------------------- formatting


def _round(x: float, decimals: int) -> float:
    r = round(float(x), decimals)
    return 0.0 if r == 0 else r  # no "-0.00"


def format_cell(mean: float, std: float = math.nan, decimals: int = 2) -> str:
    """ "0.12 ± 0.01"; only the mean when std is NaN (one seed); "—" when mean is NaN."""
    if mean is None or pd.isna(mean):
        return MISSING
    text = f"{_round(mean, decimals):.{decimals}f}"
    if std is not None and not pd.isna(std):
        text += f" ± {_round(std, decimals):.{decimals}f}"
    return text


# --------------------------------------------------------------------------------- building


def _lookup(df: pd.DataFrame) -> dict[tuple, tuple[float, float, float]]:
    """(variant, method, metric, task) -> (mean, std, n)."""
    keys = ["variant", "method", "metric", "task"]
    dup = df.duplicated(keys, keep=False)
    if dup.any():
        example = df.loc[dup, keys].iloc[0].tolist()
        raise ValueError(f"summary has duplicate run-level rows, e.g. {example}")
    std = df["std"] if "std" in df.columns else pd.Series(np.nan, index=df.index)
    n = df["n"] if "n" in df.columns else pd.Series(np.nan, index=df.index)
    out = {}
    for key, m, s, k in zip(df[keys].itertuples(index=False, name=None), df["mean"], std, n, strict=True):
        out[key] = (
            float(m) if not pd.isna(m) else math.nan,
            float(s) if not pd.isna(s) else math.nan,
            float(k) if not pd.isna(k) else math.nan,
        )
    return out


def _best_rows(values: dict[Hashable, float], decimals: int, lowest: bool = False) -> list[Hashable]:
    """Rows holding the highest value (``lowest``: the lowest), compared at display precision (ties
    all marked); none when fewer than two rows have a value or when all of them tie (nothing
    stands out)."""
    present = {k: _round(v, decimals) for k, v in values.items() if not pd.isna(v)}
    if len(present) < 2:
        return []
    top = min(present.values()) if lowest else max(present.values())
    best = [k for k, v in present.items() if v == top]
    return [] if len(best) == len(present) else best


def _build(
    lookup: dict,
    rows: Sequence[dict],
    tasks: Sequence[str],
    *,
    decimals: int,
    n_seeds_expected: int | None,
    average_decimals: int | None = None,
    index_names: Sequence[str],
    caption_hint: str,
) -> pd.DataFrame:
    """Assemble the display table.

    Each row spec: ``key`` (row label, str or tuple), ``group`` (rows compared for the best
    value), ``lookup`` ((variant, method, metric) of the summary rows) and ``scale``.
    """
    columns = [task_label(t) for t in tasks]
    if len(set(columns)) != len(columns):  # a user task named like a display label
        columns = list(tasks)
    if average_decimals is not None:
        columns.append("Average")

    cells: dict[Hashable, list[str]] = {}
    means: dict[Hashable, list[float]] = {}
    short_ns: set[int] = set()
    partial_average = False
    for spec in rows:
        row_cells, row_means = [], []
        for task in tasks:
            mean, std, n = lookup.get((*spec["lookup"], task), (math.nan, math.nan, math.nan))
            mean, std = mean * spec["scale"], std * spec["scale"]
            text = format_cell(mean, std, decimals)
            if n_seeds_expected is not None and text != MISSING and not pd.isna(n) and n < n_seeds_expected:
                text += SEEDS_MARK
                short_ns.add(int(n))
            row_cells.append(text)
            row_means.append(mean)
        if average_decimals is not None:
            have = [m for m in row_means if not pd.isna(m)]
            avg = float(np.mean(have)) if have else math.nan
            text = format_cell(avg, math.nan, average_decimals)
            if have and len(have) < len(tasks):
                text += PARTIAL_MARK
                partial_average = True
            row_cells.append(text)
            row_means.append(avg)
        cells[spec["key"]] = row_cells
        means[spec["key"]] = row_means

    # Best value per column among the rows of the same metric; of a divergence, a distance from
    # ICL's output distribution, the lowest is the one that stands out.
    lower_is_closer = set(catalog.names(kind="divergence"))
    best: list[tuple[Hashable, str]] = []
    groups: dict[Hashable, list[Hashable]] = {}
    for spec in rows:
        groups.setdefault(spec["group"], []).append(spec["key"])
    for j, col in enumerate(columns):
        dec = average_decimals if col == "Average" and average_decimals is not None else decimals
        for group, keys in groups.items():
            for key in _best_rows({k: means[k][j] for k in keys}, dec, lowest=group in lower_is_closer):
                best.append((key, col))

    keys = [spec["key"] for spec in rows]
    if keys and isinstance(keys[0], tuple):
        index = pd.MultiIndex.from_tuples(keys, names=list(index_names))
    else:
        index = pd.Index(keys, name=index_names[0] if index_names else None)
    table = pd.DataFrame([cells[k] for k in keys], index=index, columns=columns, dtype=object)

    footnotes = []
    if short_ns:
        ns = " or ".join(str(n) for n in sorted(short_ns))
        footnotes.append(f"{SEEDS_MARK} computed from {ns} of {n_seeds_expected} seeds")
    if partial_average:
        footnotes.append(f"{PARTIAL_MARK} average over the tasks with data only")
    table.attrs["best"] = best
    table.attrs["footnotes"] = footnotes
    table.attrs["table"] = caption_hint
    return table


def _tasks_for(df: pd.DataFrame, tasks: Sequence[str] | None) -> list[str]:
    return list(tasks) if tasks is not None else order_tasks(df["task"].dropna().unique())


# ----------------------------------------------------------------------------------- tables


def variants_table(
    summary: pd.DataFrame,
    model: str,
    method: str = "gd",
    metrics: Sequence[str] | None = None,
    *,
    variants: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    n_seeds_expected: int | None = None,
    decimals: int = 2,
) -> pd.DataFrame:
    """Paper 001 Table 1: rows (metric, variant), columns tasks, cells "mean ± std".

    ``variants=None``: Trained, Trained Embeddings, No Training (rows kept, as "—", when absent)
    followed by any other variant of ``model`` found in the summary (e.g. layernorm_only).
    ``tasks=None``: every task of ``model`` in the summary, in paper order. ``metrics=None``: the
    catalog's ``variants`` rows.
    """
    metrics = catalog.shown_in("variants") if metrics is None else metrics
    df = run_level(summary, model)
    if variants is None:
        extra = sorted(set(df["variant"].dropna().unique()) - set(PAPER_VARIANTS))
        variants = [*PAPER_VARIANTS, *extra]
    rows = [
        {
            "key": (catalog.label(metric), variant_label(variant)),
            "group": metric,
            "lookup": (variant, method, metric),
            "scale": 1.0,
        }
        for metric in metrics
        for variant in variants
    ]
    return _build(
        _lookup(df),
        rows,
        _tasks_for(df, tasks),
        decimals=decimals,
        n_seeds_expected=n_seeds_expected,
        index_names=("Metric", "Setting"),
        caption_hint="variants",
    )


def methods_table(
    summary: pd.DataFrame,
    model: str,
    variant: str = "trained",
    methods: Sequence[str] = ("gd", "lcgd"),
    metrics: Sequence[str] | None = None,
    *,
    baselines: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    n_seeds_expected: int | None = None,
    decimals: int = 2,
    average_decimals: int = 3,
) -> pd.DataFrame:
    """Paper 001 Table 2: rows "metric (method)", columns tasks + "Average".

    "Average" is the mean of the task means (``average_decimals`` places, 3 as in the paper);
    a row with some tasks missing averages the others and is marked ‡. The paper's "SimAM" is
    cos(m_ICL, m_FT), i.e. ``simam_after``. ``baselines`` are rows of their own above, read from
    the first method's runs. ``metrics`` and ``baselines`` default to the catalog's ``methods`` and
    ``methods_baselines``. Accuracies and Jaccard indexes are shown in percent.
    """
    metrics = catalog.shown_in("methods") if metrics is None else metrics
    baselines = catalog.shown_in("methods_baselines") if baselines is None else baselines
    df = run_level(summary, model)
    rows = [
        {"key": catalog.label(metric), "group": metric, "lookup": (variant, methods[0], metric), "scale": 1.0}
        for metric in baselines
        if methods
    ]
    rows += [
        {
            "key": f"{catalog.label(metric)} ({method_label(method)})",
            "group": metric,
            "lookup": (variant, method, metric),
            "scale": catalog.display_scale(metric),
        }
        for metric in metrics
        for method in methods
    ]
    return _build(
        _lookup(df),
        rows,
        _tasks_for(df, tasks),
        decimals=decimals,
        n_seeds_expected=n_seeds_expected,
        average_decimals=average_decimals,
        index_names=("Metric",),
        caption_hint="methods",
    )


def accuracy_table(
    summary: pd.DataFrame,
    model: str,
    variant: str = "trained",
    method: str = "gd",
    metrics: Sequence[str] | None = None,
    *,
    tasks: Sequence[str] | None = None,
    n_seeds_expected: int | None = None,
    decimals: int = 1,
) -> pd.DataFrame:
    """Paper 003 Table 1: rows ZSL / FT / ICL accuracy, Jaccard all / correct / incorrect and
    Rec2FTP, and beyond it ICL's accuracy on permuted labels (the metric catalog's rows of the
    accuracy table, unless ``metrics`` says), in percent, columns tasks. A metric the run did not
    compute for ``method`` (no summary row at all: ICL on permuted labels where the claims'
    premise is not read) has no row; one it computed and found undefined shows "—".

    The best value is marked among the three accuracies; each other row is its own metric.
    """
    metrics = catalog.shown_in("accuracy") if metrics is None else metrics
    compared = set(catalog.shown_in("accuracy_best"))
    df = run_level(summary, model)
    computed = set(df.loc[(df["variant"] == variant) & (df["method"] == method), "metric"])
    metrics = [m for m in metrics if m in computed or not computed]
    rows = [
        {
            "key": catalog.label(metric),
            "group": "accuracy" if metric in compared else metric,
            "lookup": (variant, method, metric),
            "scale": catalog.display_scale(metric),
        }
        for metric in metrics
    ]
    return _build(
        _lookup(df),
        rows,
        _tasks_for(df, tasks),
        decimals=decimals,
        n_seeds_expected=n_seeds_expected,
        index_names=("Metric",),
        caption_hint="accuracy",
    )


def layer_causal_table(
    summary: pd.DataFrame,
    model: str,
    variant: str = "trained",
    ft: str = "gd",
    layer_causal: Sequence[str] = ("lcgd",),
    *,
    tasks: Sequence[str] | None = None,
    n_seeds_expected: int | None = None,
    decimals: int = 4,
    average_decimals: int = 4,
) -> pd.DataFrame:
    """Paper 003 Table 2 (``layer_causal`` = the unclipped layer-causal methods) and Table 3
    (``layer_causal`` = the clipped ones): SimAOU (Random), SimAOU per method, SimAM (ZSL) and
    SimAM per method (the catalog's ``layer_causal`` metrics, in that order), columns tasks +
    Average, four decimals as in the paper.

    Paper 003 reports the reference's "SimAOU", which is SimAOU_norm here (docs/protocol.md); its
    SimAM (ZSL) is cos(m_ICL, m_ZSL) (``simam_before``), SimAM (method) cos(m_ICL, m_method).
    Best values are marked among the SimAOU rows and among the SimAM rows (ZSL included).
    """
    df = run_level(summary, model)
    methods = [ft, *layer_causal]
    random, simaou, before, after = catalog.shown_in("layer_causal")
    rows = [{"key": "SimAOU (Random)", "group": "SimAOU (Random)", "lookup": (variant, ft, random), "scale": 1.0}]
    rows += [
        {"key": f"SimAOU ({method_label(m)})", "group": "SimAOU", "lookup": (variant, m, simaou), "scale": 1.0}
        for m in methods
    ]
    rows += [{"key": "SimAM (ZSL)", "group": "SimAM", "lookup": (variant, ft, before), "scale": 1.0}]
    rows += [
        {"key": f"SimAM ({method_label(m)})", "group": "SimAM", "lookup": (variant, m, after), "scale": 1.0}
        for m in methods
    ]
    return _build(
        _lookup(df),
        rows,
        _tasks_for(df, tasks),
        decimals=decimals,
        n_seeds_expected=n_seeds_expected,
        average_decimals=average_decimals,
        index_names=("Metric",),
        caption_hint="layer_causal",
    )


def _keyed_table(
    rows: list[list[str]],
    keys: list[tuple],
    names: Sequence[str],
    tasks: Sequence[str],
    kind: str,
    footnotes: Sequence[str] = (),
) -> pd.DataFrame:
    """Display cells with a (metric, row) index and task columns; nothing marked best."""
    index = pd.MultiIndex.from_tuples(keys, names=list(names)) if keys else None
    table = pd.DataFrame(rows, index=index, columns=[task_label(t) for t in tasks], dtype=object)
    table.attrs.update(best=[], footnotes=list(footnotes), table=kind)
    return table


def _interval_cell(index: pd.DataFrame, key: tuple, scale: float, decimals: int) -> str:
    """ "mean [low, high]" of the row ``key`` of ``index`` (its mean alone where it has no interval),
    scaled; "—" where there is no such row or no mean."""
    if key not in index.index or pd.isna(index.loc[key, "mean"]):
        return MISSING
    row = index.loc[key]
    text = format_cell(row["mean"] * scale, decimals=decimals)
    if not pd.isna(row["ci_low"]):
        text += f" [{_round(row['ci_low'] * scale, decimals):.{decimals}f}, {_round(row['ci_high'] * scale, decimals):.{decimals}f}]"
    return text


def intervals_table(
    summary: pd.DataFrame,
    model: str,
    variant: str = "trained",
    methods: Sequence[str] = ("gd",),
    metrics: Sequence[str] | None = None,
    *,
    tasks: Sequence[str] | None = None,
    decimals: int = 2,
) -> pd.DataFrame:
    """Every run-level score with its bootstrap interval: rows (metric, method), columns tasks,
    cells "mean [low, high]" (``ci_low``/``ci_high`` of the summary: the interval of the mean over
    seeds, examples resampled within each seed). Accuracies in percent. ``metrics=None``: the
    catalog's ``intervals`` rows."""
    metrics = catalog.shown_in("intervals") if metrics is None else metrics
    df = run_level(summary, model)
    if "ci_low" not in df.columns:
        raise ValueError("the summary has no ci_low / ci_high columns; rerun aggregate_metrics")
    tasks = _tasks_for(df, tasks)
    index = df.set_index(["variant", "method", "metric", "task"])
    rows, keys = [], []
    for metric in metrics:
        scale = catalog.display_scale(metric)
        for method in methods:
            rows.append([_interval_cell(index, (variant, method, metric, task), scale, decimals) for task in tasks])
            keys.append((catalog.label(metric), method_label(method)))
    return _keyed_table(rows, keys, ("Metric", "Method"), tasks, "intervals")


def orders_table(
    orders: pd.DataFrame,
    model: str,
    variant: str = "trained",
    methods: Sequence[str] = ("gd",),
    *,
    tasks: Sequence[str] | None = None,
    decimals: int = 2,
) -> pd.DataFrame:
    """Order sensitivity (``orders.order_table``): rows (method, what), columns tasks, cells
    "mean [low, high]" over seeds (the order metrics' intervals, seeds and examples crossed; the spreads over orders
    have none). ICL's row is the ICL each method is compared with (its own demonstrations). Rows per
    method: the catalog's ``orders`` metrics, then the spread over the orders of its
    ``orders_spread`` similarities (``orders.order_table``'s ``<similarity>_order_sd``)."""
    row_names = [(metric, catalog.label(metric, "orders")) for metric in catalog.shown_in("orders")]
    row_names += [
        (f"{name}_order_sd", f"{catalog.label(name)}: std over orders") for name in catalog.shown_in("orders_spread")
    ]
    df = orders[(orders["model"] == model) & (orders["variant"] == variant)]
    tasks = list(tasks) if tasks is not None else order_tasks(df["task"].dropna().unique())
    index = df.set_index(["method", "metric", "task"])
    rows, keys = [], []
    for method in methods:
        for metric, name in row_names:
            rows.append(
                [
                    _interval_cell(index, (method, metric, task), catalog.display_scale(metric), decimals)
                    for task in tasks
                ]
            )
            keys.append((method_label(method), name))
    n_orders = sorted({int(n) for n in df["n_orders"].dropna()}) if "n_orders" in df.columns else []
    notes = [f"{' or '.join(map(str, n_orders))} orders of each run's demonstrations"] if n_orders else []
    return _keyed_table(rows, keys, ("Method", "Metric"), tasks, "orders", footnotes=notes)


def k_sweep_table(
    summary: pd.DataFrame,
    model: str,
    variant: str,
    sweep: Sequence[dict],
    metrics: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The k sweep (``plan.k_sweeps`` rows: group, method, task, k) as :func:`intervals_table`
    cells: rows (metric, "group, k = n") in increasing k, columns tasks. ``metrics=None``: the
    catalog's ``k_sweep`` rows."""
    metrics = catalog.shown_in("k_sweep") if metrics is None else metrics
    members = sorted({(r["group"], int(r["k"]), r["method"]) for r in sweep})
    table = intervals_table(summary, model, variant, [m for _, _, m in members], metrics)
    keys = [(catalog.label(metric), f"{group}, k = {k}") for metric in metrics for group, k, _ in members]
    table.index = pd.MultiIndex.from_tuples(keys, names=["Metric", "Method"])
    table.attrs["table"] = "k_sweep"
    return table


def comparisons_table(
    comparisons: pd.DataFrame,
    model: str,
    variant: str = "trained",
    metrics: Sequence[str] | None = None,
    *,
    tasks: Sequence[str] | None = None,
    significance: float = 0.05,
    ci_level: float = 0.95,
    decimals: int = 3,
) -> pd.DataFrame:
    """Each method against the baseline, paired by example: rows (metric, "method − baseline"),
    columns tasks, cells the mean difference with its bootstrap interval, marked with
    :data:`SIGNIFICANT_MARK` where the sign-flip test's p-value is below ``significance``
    (``comparisons.parquet``, :func:`icl_gd.metrics.comparisons.compare_methods`); ``ci_level`` is the
    intervals' level, for the footnote. Accuracy in points (%). ``metrics=None``: the catalog's
    ``comparisons`` rows."""
    metrics = catalog.shown_in("comparisons") if metrics is None else metrics
    df = comparisons[(comparisons["model"] == model) & (comparisons["variant"] == variant)]
    tasks = list(tasks) if tasks is not None else order_tasks(df["task"].unique())
    index = df.set_index(["method", "metric", "task"])
    pairs = list(dict.fromkeys(zip(df["method"], df["baseline"])))
    rows, keys = [], []
    for metric in metrics:
        scale = catalog.display_scale(metric)
        for method, baseline in pairs:
            cells = []
            for task in tasks:
                key = (method, metric, task)
                if key not in index.index or pd.isna(index.loc[key, "diff"]):
                    cells.append(MISSING)
                    continue
                row = index.loc[key]
                text = f"{_round(row['diff'] * scale, decimals):+.{decimals}f}"
                if not pd.isna(row["ci_low"]):
                    lo, hi = _round(row["ci_low"] * scale, decimals), _round(row["ci_high"] * scale, decimals)
                    text += f" [{lo:+.{decimals}f}, {hi:+.{decimals}f}]"
                if bool(row["significant"]):
                    text += SIGNIFICANT_MARK
                cells.append(text)
            rows.append(cells)
            keys.append((catalog.label(metric), f"{method_label(method)} − {method_label(baseline)}"))
    notes = [
        f"{SIGNIFICANT_MARK} p < {significance:g}, two-sided paired sign-flip test over examples "
        f"(per-example differences averaged over seeds); [{percent(ci_level)} bootstrap interval]"
    ]
    return _keyed_table(rows, keys, ("Metric", "Comparison"), tasks, "comparisons", notes if keys else [])


def data_table(stats: pd.DataFrame, made_by: dict | None = None) -> pd.DataFrame:
    """Paper 001 Table 3 with real token counts: per task, the sizes of the splits, the number of
    examples actually evaluated, the mean prompt length in the model's tokens (ZSL query prompt,
    label word excluded), the mean ICL prompt length, the number of demonstrations that fit
    (true k, of k) and what ended each (demo_separator: eos, the reference's, or newline). ``stats`` is :func:`icl_gd.metrics.statistics.data_statistics`'s frame."""
    tasks = order_tasks(stats["task"])
    by_task = stats.set_index("task")
    columns = {
        "# Train": lambda r: f"{int(r['n_train']):,}",
        "# Validation": lambda r: f"{int(r['n_eval']):,}",
        "# Evaluated": lambda r: f"{int(r['n_evaluated']):,}",
        "Avg. # of Tokens": lambda r: f"{r['prompt_tokens']:.2f}",
        "Avg. ICL Prompt Tokens": lambda r: MISSING if pd.isna(r["icl_tokens"]) else f"{r['icl_tokens']:.1f}",
        "Demonstrations (true k / k)": lambda r: (
            MISSING if pd.isna(r["true_k"]) else f"{int(r['true_k'])} / {int(r['k'])}"
        ),
        "Separator": lambda r: r.get("demo_separator", "eos"),
    }
    body = [[fmt(by_task.loc[t]) for fmt in columns.values()] for t in tasks]
    table = pd.DataFrame(
        body, index=pd.Index([task_label(t) for t in tasks], name="Task"), columns=list(columns), dtype=object
    )
    table.attrs.update(best=[], footnotes=provenance_notes(made_by), table="data")
    return table


def provenance_notes(made_by: dict | None) -> list[str]:
    """Footnotes saying which software made the caches (``icl_gd.common.provenance``), and where a run's
    caches came from different versions, that they did."""
    if not made_by or not made_by.get("caches"):
        return ["Caches made by software that recorded no versions (written before the workflow recorded them)."]
    records = made_by["caches"]
    notes = (
        [f"Caches made with {describe(records[0])}."]
        if len(records) == 1
        else [
            f"The caches of this run come from {len(records)} different software versions; compare with care: "
            + " | ".join(describe(r) for r in records)
            + "."
        ]
    )
    return notes


def reproduction_table(cells: pd.DataFrame, n_published: int, *, ci_level: float = 0.95) -> pd.DataFrame:
    """Every published cell the run covers (``published.reproduction``): the published value ±
    its spread, as printed; this run's mean [interval]; the difference; whether the two agree
    given both uncertainties (``within``). Rows in the published file's order (paper, table, row, task); footnotes
    count the cells covered and within, and name the models."""
    rows, keys = [], []  # in the order of docs/published.csv: the papers' tables, row by row
    for c in cells.itertuples(index=False):
        decimals = max(int(c.published_decimals), 1 if c.unit == "percent" else 2)
        spread = "" if pd.isna(c.published_spread) else f" ± {c.published_spread:.{decimals}f}"
        rows.append(
            [
                f"{c.published:.{int(c.published_decimals)}f}{spread}",
                f"{c.mean:.{decimals}f} [{c.ci_low:.{decimals}f}, {c.ci_high:.{decimals}f}]",
                f"{c.difference:+.{decimals}f}",
                "yes" if c.within else "no",
            ]
        )
        setting = f"{method_label(c.method)}, {variant_label(c.variant, in_text=True)}"
        if c.run_method != c.method:
            setting += f" (run: {c.run_method})"
        task = f"Average ({c.n_tasks} tasks)" if c.task == "average" else task_label(c.task)
        keys.append((f"{c.paper} {c.table}", catalog.label(c.metric), setting, task))
    index = pd.MultiIndex.from_tuples(keys, names=["Source", "Metric", "Setting", "Task"]) if keys else None
    table = pd.DataFrame(
        rows,
        index=index,
        columns=["Published", f"This run [{percent(ci_level)} interval]", "Difference", "Within"],
        dtype=object,
    )
    models = ", ".join(sorted(set(cells["published_model"]))) if len(cells) else "—"
    within = int(cells["within"].sum()) if len(cells) else 0
    table.attrs.update(
        best=[],
        table="reproduction",
        footnotes=[
            f"Cells covered: {len(cells)} of {n_published} published result cells; within (|run - published| at "
            f"most this run's interval on the published value's side and the published ± combined in quadrature, "
            f"plus half the last printed digit): {within} of {len(cells)}. An average is the printed mean over the "
            f"row's tasks, set beside this run's mean over the same tasks (interval: the tasks' half-widths in "
            f"quadrature over their number).",
            f"Published numbers: {models}, the papers' model; a run on another model reads as a comparison.",
        ],
    )
    return table
