"""Display text of the tables, figures and report: the names of tasks, methods, metrics and model
variants, and the tables' captions.

One dictionary per kind of name. Metrics have two renderings, because the tables are plain text
(Markdown, LaTeX after escaping, CSV) and the figures are drawn with matplotlib's mathtext; each
figure axis that would be ambiguous with a legend's short name has a label of its own. A name that
is not in a dictionary is shown as it is (a user's task), or in a form derived from it.

A table's caption is written into its .md and .tex files and shown in the Snakemake report
(``workflow/report/tables.rst`` renders the table rule's ``caption`` parameter): both come from
:func:`table_caption`, with the configured interval level.

Imports nothing else of the package.
"""

from __future__ import annotations

from collections.abc import Iterable

# The reference tasks in the order the papers list them; any other task follows alphabetically.
TASK_ORDER: tuple[str, ...] = ("sst2", "sst5", "mr", "subj", "agnews", "cb")
TASK_LABELS = {"sst2": "SST2", "sst5": "SST5", "mr": "MR", "subj": "Subj", "agnews": "AGNews", "cb": "CB"}
METHOD_LABELS = {"gd": "GD", "lcgd": "LCGD"}

# Paper 001 Table 1's row names ("No Training" is its untrained model).
VARIANT_LABELS = {
    "trained": "Trained",
    "trained_embeddings": "Trained Embeddings",
    "untrained": "No Training",
    "layernorm_only": "LayerNorm Only",
}


# "{ci}": the bootstrap intervals' level, e.g. "95%" (config key statistics.ci_level).
TABLE_CAPTIONS = {
    "accuracy": "ZSL / FT / ICL accuracy, Jaccard index of prediction changes and Rec2FTP (%), after paper 003 Table 1; "
    "beyond it, ZSL's and ICL's accuracy after contextual calibration (each label word's probability divided by "
    "its mean over three content-free queries in the same context, Zhao et al. 2021) and, where the claims' premise "
    "is read, ICL's accuracy with its demonstrations' labels permuted consistently, against the permuted gold, "
    "and with label words the model never saw as labels (a held-out pool of its vocabulary), against the gold.",
    "methods": "Similarity of ICL and finetuning per method, layer mean, mean ± std over seeds, after paper 001 Table 2, with the random SimAOU baselines; then how far each method's label distribution (renormalised over the label words) lies from ICL's, KL(ICL || FT) in nats and the total variation TV(ICL, FT), beside how far ZSL's does, KL(ICL || ZSL) (lowest in bold).",
    "variants": "SimAOU and SimAM_delta of GD for trained and untrained models, after paper 001 Table 1.",
    "layer_causal": "SimAOU (normalised, as the reference reports it) and SimAM of standard and layer-causal finetuning, after paper 003 Table 2.",
    "clipping": "Layer-causal finetuning with gradient clipping against standard finetuning, after paper 003 Table 3.",
    "paper002": "Label-switched and linearized finetuning against their plain counterparts (paper 002): accuracies (%) and similarities.",
    "comparisons": "Each method minus the baseline method, paired by example, with {ci} bootstrap intervals; * marks p < the significance level.",
    "intervals": "Layer-mean scores, mean over seeds, with {ci} intervals on the crossed seeds x examples design: one "
    "resample of the task's evaluation examples for every seed, the seeds' spread as a Student t with "
    "seeds - 1 degrees of freedom (one seed: the examples only).",
    "orders": "Order sensitivity (beyond the papers: Shen et al. 2023): per method, the share of evaluation examples "
    "whose ICL / finetuned prediction changes across further seeded orders of the same demonstrations "
    "(config key orders), their difference, and how much the layer-mean SimAOU_norm and SimAM_delta vary "
    "across the orders (sample std, mean over seeds); mean over seeds with {ci} intervals on the crossed "
    "seeds x examples design (as the intervals table's).",
    "costs": "What the run cost: per rule and setting, the jobs, their mean and total wall time, CPU time and "
    "the largest memory of any of them, from each job's benchmark record.",
    "data": "Data statistics with the model's own token counts and the sizes actually evaluated, after paper 001 Table 3.",
    "k_sweep": "Accuracies (%) and layer-mean similarities against the number of demonstrations k: each method's "
    "ICL accuracy is ICL on its own k demonstrations; mean [{ci} interval] over seeds.",
    "reproduction": "Every published cell this run covers (docs/published.csv; the papers' fairseq 1.3B model) beside "
    "this run's mean over seeds with its {ci} interval, the difference (run - published) and whether "
    "the two agree given both the run's interval and the published ± spread.",
    "premise": "Does the model learn in context, and is ICL then like finetuning? Per model and task, the claims' "
    "premise (ICL's accuracy against ZSL's and against the majority class of the evaluation examples, and ICL's "
    "with its demonstrations' labels permuted consistently against the permuted gold's majority class, in "
    "points, with the claims' crossed seeds x examples intervals; the model learns in context where all three "
    "lower ends lie above 0) and ICL's most-predicted label, beside SimAOU_norm of GD on the trained model "
    "(layer mean, {ci} interval): paper 001 asks whether the similarity grows with ICL's own effect. Then "
    "finetuning's side of the premise: per finetuning method, FT's accuracy against ZSL's on the same "
    "intervals, and whether it learns (the lower end above 0).",
    "choice": "Finetuning at a chosen setting: per model, variant, task and method that chooses its learning rate "
    "and epochs (methods.<name>.choose), every point of its grid, finetuned on each seed's own demonstrations and "
    "scored on held-out train rows that no seed takes as a demonstration (never an evaluation example): its "
    "accuracy there per seed and their mean (%), beside the model's own zero-shot accuracy on the same rows; "
    "the chosen point (the highest mean; a tie to the smaller rate, then the fewer epochs) marked.",
    "claims": "The papers' claims, each tested on this run's layer-mean scores (a: the claimed larger or smaller "
    "cell, b: what it is compared with): per task a - b with its paired interval on the crossed seeds x "
    "examples design (one resample of the examples for a and b in every seed, the seeds' spread as a "
    "Student t; one seed: the examples only), the claim's quantifier read on the intervals against 0 "
    "(superiority) or its smallest effect of interest (non-inferiority): supported, equivalent, "
    "contradicted, negligible (no effect of interest), inconclusive (with the seeds, or examples per "
    "seed, its test would need for 80% power) or not run.",
}
# the claims read again with GD and its kin at the rate chosen on development rows (plan.chosen_roles)
TABLE_CAPTIONS["claims_chosen"] = (
    "The claims again, each finetuning method at the learning rate and epochs chosen per model, variant and "
    "task on held-out train rows (methods.<name>.choose) in place of the protocol's rate; a claim on a method "
    "that the run does not choose a rate for is not run. " + TABLE_CAPTIONS["claims"]
)


def percent(level: float) -> str:
    """A confidence level as a percentage: 0.95 -> "95%", 0.975 -> "97.5%"."""
    return f"{level * 100:g}%"


def table_caption(table: str, *, ci_level: float = 0.95, data_sources: dict[str, dict] | None = None) -> str:
    """The caption of a report table (a key of :data:`TABLE_CAPTIONS`). ``data_sources``: each
    task's data (the rules' ``data_sources()``); where a task ran on real text of a package corpus,
    the data table's caption says which, with the corpus's origin, size, label rule and licence."""
    if table not in TABLE_CAPTIONS:
        raise ValueError(f"no caption for table {table!r}; known tables: {sorted(TABLE_CAPTIONS)}")
    caption = TABLE_CAPTIONS[table].format(ci=percent(ci_level))
    if table == "data" and data_sources and any(s["source"] == "package" for s in data_sources.values()):
        caption += " " + data_sources_text(data_sources)
    return caption


def _tasks_text(tasks: list[str]) -> str:
    names = [task_label(t) for t in tasks]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def data_sources_text(data_sources: dict[str, dict], brief: bool = False) -> str:
    """Which tasks ran on what: real text of a package corpus (where it comes from, its licence and
    split, and per task its size after the label rule and the rule), the synthetic twins, hub
    datasets or local files. ``data_sources``: task -> ``{"source", and for source package
    "corpus", "about", "rule" (and for ``brief``, the first page's: "short", "size"); for hub "id";
    for local "path"}``."""
    parts = []
    by_corpus: dict[str, list[str]] = {}
    for task, source in data_sources.items():
        if source["source"] == "package":
            by_corpus.setdefault(source["corpus"], []).append(task)
    for corpus, tasks in by_corpus.items():
        if brief:
            sizes = "; ".join(f"{task_label(t)} {data_sources[t]['size']}" for t in tasks)
            parts.append(
                f"{_tasks_text(tasks)} ran on real text, corpus {corpus} ({data_sources[tasks[0]]['short']}; {sizes})."
            )
        else:
            parts.append(
                f"{_tasks_text(tasks)} ran on real text, corpus {corpus}: {data_sources[tasks[0]]['about']}. "
                + " ".join(f"{task_label(t)}: {data_sources[t]['rule']}." for t in tasks)
            )
    others = {
        "synthetic": ("its synthetic twin", "their synthetic twins"),
        "hub": ("a hub dataset", "hub datasets"),
        "local": ("local files", "local files"),
    }
    for kind, (one, several) in others.items():
        tasks = [t for t, s in data_sources.items() if s["source"] == kind]
        if not tasks:
            continue
        what = one if len(tasks) == 1 else several
        where = ""
        if kind == "hub":
            where = " (" + ", ".join(f"{task_label(t)}: {data_sources[t].get('id')}" for t in tasks) + ")"
        elif kind == "local":
            where = " (" + ", ".join(f"{task_label(t)}: {data_sources[t].get('path')}" for t in tasks) + ")"
        parts.append(f"{_tasks_text(tasks)} ran on {what}{where}.")
    return " ".join(parts)


def task_label(task: str) -> str:
    """Display name of a task ("sst2" -> "SST2"); user tasks are shown as named."""
    return TASK_LABELS.get(task, task)


def method_label(method: str) -> str:
    """Display name of a training method ("lcgd" -> "LCGD")."""
    return METHOD_LABELS.get(method, method.upper())


def variant_label(variant: str, *, in_text: bool = False) -> str:
    """Display name of a model variant: a heading ("untrained" -> "No Training"), or, ``in_text``,
    within a sentence or title ("no training"): every word in lower case but a name with inner
    capitals ("LayerNorm only")."""
    label = VARIANT_LABELS.get(variant, variant.replace("_", " ").title())
    if not in_text:
        return label
    return " ".join(w if any(c.isupper() for c in w[1:]) else w.lower() for w in label.split(" "))


def order_tasks(tasks: Iterable[str]) -> list[str]:
    """Unique tasks, the reference six first in paper order, then the others alphabetically."""
    tasks = set(tasks)
    return [t for t in TASK_ORDER if t in tasks] + sorted(tasks - set(TASK_ORDER))
