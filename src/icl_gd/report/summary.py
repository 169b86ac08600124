"""The report's first page: what was run and what it found, written from the run's own files.

One page, rendered twice from the same blocks: Markdown beside the tables and figures
(``{report.dir}/summary.md``, which a repository browser shows) and reStructuredText for the
landing page of ``snakemake --report`` (``{report.dir}/summary.rst``, named by the Snakefile's
``report:`` directive), whose links open the tables and figures inside the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from icl_gd.common import names, provenance
from icl_gd.common.atomic import write_text
from icl_gd.metrics import claim_definitions
from icl_gd.metrics import premise as premise_module
from icl_gd.report import choice_table, claim_wording


@dataclass(frozen=True)
class Link:
    """A table or figure of the report: ``kind`` "table" or "figure", ``name`` its stem."""

    label: str
    kind: str
    name: str


Inline = list  # of str and Link
Block = tuple  # ("h1" | "h2" | "h3", str) | ("p", Inline) | ("ul", list[Inline])
HEADINGS = {"h1": ("#", "="), "h2": ("##", "-"), "h3": ("###", "~")}  # Markdown's mark, reST's underline


def _unknown(kind) -> ValueError:
    # a block of another kind once rendered as a list of its characters, one bullet each
    return ValueError(f"first page: a block of kind {kind!r}; use one of {[*HEADINGS, 'p', 'ul']}")


COLLAPSE = f"{100 * premise_module.COLLAPSE_SHARE:g}%"


def _table(name: str, label: str | None = None) -> Link:
    return Link(label or name, "table", name)


def _figure(name: str, label: str | None = None) -> Link:
    return Link(label or name, "figure", name)


def _claim_line(claim: claim_definitions.Claim, verdict: str, rows: pd.DataFrame) -> Inline:
    line = [f"**{verdict}**: {claim.paper} {claim.table}, {claim.text}"]
    rows = rows[rows["comparison"] == 0]
    if verdict == "not run" or rows.empty:
        return line + [" (the run has no such cell)"]
    unit = " points" if rows["unit"].iloc[0] == "points" else ""
    mean = rows[rows["task"] == claim_definitions.MEAN].iloc[0]
    tasks = rows[rows["task"] != claim_definitions.MEAN]
    if claim.quantifier == "mean":
        decimals = 1 if unit else 3
        line.append(
            f"; mean a - b {mean.difference:+.{decimals}f}{unit} "
            f"[{mean.ci_low:+.{decimals}f}, {mean.ci_high:+.{decimals}f}]"
        )
    else:
        counts = claim_wording.status_counts(s for s in tasks["status"] if s != "undefined")
        line.append(f"; {counts['hold']} of {sum(counts.values())} tasks hold, {counts['break']} break")
        if counts["negligible"]:
            line.append(f", {counts['negligible']} negligible")
    incomplete = rows[(rows["status"] == "incomplete") & (rows["task"] != claim_definitions.MEAN)]
    if len(incomplete):
        line.append(
            "; incomplete: "
            + ", ".join(f"{names.task_label(r.task)} ({r.incomplete})" for r in incomplete.itertuples(index=False))
        )
    first = rows.iloc[0]
    if verdict == "inconclusive":
        needed = claim_wording.needed_text(first)
        if needed.startswith("none"):
            line.append("; no sample size resolves it (a difference of exactly 0)")
        else:
            line.append(f"; would need {needed}")
    return line


def _premise_blocks(premise: pd.DataFrame, methods: pd.DataFrame | None = None, claim_seeds: int = 0) -> list[Block]:
    """Whether the model learns in context, per task: the claims' precondition; and where each
    finetuning method learns (``methods``: ``premise.METHOD_COLUMNS``, None for a run before it).
    ``claim_seeds``: the seeds the claims read, which the premise's own (``premise.seeds``) may exceed."""
    blocks: list[Block] = [("h2", "Does the model learn in context?")]
    if premise.empty:
        return blocks + [("p", ["Not tested: the run has no ICL of the trained model."])]
    level = claim_wording.percent_text(float(premise["level"].iloc[0]))
    collapsed = premise[premise["collapsed"]]
    blocks.append(
        (
            "p",
            [
                f"The model {premise_module.learns_text(premise)}. The claims' premise, not one of them: on a task "
                "where ICL is no more accurate than zero-shot (ZSL), or than always answering the evaluation "
                "examples' majority class, a claim on ICL says nothing about ICL; nor where it does not follow "
                "its demonstrations' labels, which ICL above ZSL does not show (any context can shift a model "
                "towards the task's words). It learns where three differences lie above 0 on "
                f"{level} intervals (seeds and examples crossed, as a claim on every task reads them"
                + (
                    f"; on {seeds} seeds per task, the claims' {claim_seeds} and "
                    f"{seeds - claim_seeds} more, config key premise.seeds"
                    if claim_seeds and (seeds := _seeds(premise)) > claim_seeds
                    else ""
                )
                + "): "
                f"{claim_wording.PREMISE_RULE}"
                + (
                    f". {claim_wording.PERMUTED_NOT_RUN[0].upper()}{claim_wording.PERMUTED_NOT_RUN[1:]}"
                    if claim_wording.permuted_not_run(premise)
                    else ""
                )
                + (
                    f"; ICL collapses onto one label (at least {COLLAPSE} of its answers) on "
                    + ", ".join(names.task_label(t) for t in collapsed["task"])
                    if len(collapsed)
                    else ""
                )
                + ":"
            ],
        )
    )
    return blocks + [
        ("ul", [[claim_wording.premise_task_text(r)] for r in premise.itertuples(index=False)]),
        *_finetuning_blocks(methods),
        *_novel_blocks(premise),
        *_calibration_blocks(premise),
        (
            "p",
            [
                "Beside how alike ICL and finetuning are (paper 001's question: does the similarity grow with "
                "ICL's own effect?): ",
                _table("premise", "the premise table"),
                ", ",
                _figure("premise", "ICL's gain against SimAOU_norm"),
                ".",
            ],
        ),
    ]


def _finetuning_blocks(methods: pd.DataFrame | None) -> list[Block]:
    """Where each finetuning method learns: finetuning's side of the premise."""
    if methods is None or methods.empty:
        return []
    return [
        (
            "p",
            [
                "Finetuning learns (FT more accurate than ZSL, in each method's runs of the trained model, on the "
                f"same intervals): {premise_module.finetuning_text(methods)}. A claim on how alike ICL and finetuning "
                "are says little where finetuning does not learn either: each claim that compares them is read again "
                "over the tasks where both learn."
            ],
        )
    ]


def _novel_blocks(premise: pd.DataFrame) -> list[Block]:
    """Where the model follows label words it never saw as labels (none where it was not run)."""
    if "icl_novel_majority_status" not in premise or (premise["icl_novel_majority_status"] == "not run").all():
        return []
    where = premise_module.where_text(premise, "follows_novel")
    accuracy = ", ".join(
        f"{names.task_label(r.task)} {r.icl_novel:.0f}%"
        for r in premise.itertuples(index=False)
        if math.isfinite(r.icl_novel)
    )
    return [
        (
            "p",
            [
                "With label words it never saw as labels (each class's word drawn from a held-out pool of the "
                "tokenizer's words, none a protocol label word; beside the premise, on its intervals), ICL answers "
                f"with the gold class's word more often than the majority class {where} (ICL's accuracy: {accuracy})."
            ],
        )
    ]


def _calibration_blocks(premise: pd.DataFrame) -> list[Block]:
    """Which premise readings contextual calibration changes (none where it was not run: caches
    without content-free queries). The claims read raw predictions."""
    if "icl_zsl_calibrated_status" not in premise or (premise["icl_zsl_calibrated_status"] == "not run").all():
        return []
    changes = premise_module.calibration_changes(premise)
    rule = (
        "Read again with ZSL's and ICL's predictions calibrated (each label word's probability divided by its mean "
        "over three content-free queries in the same context, Zhao et al. 2021; the same intervals, the same "
        "label-following test; the claims read raw predictions, as the papers do): "
    )
    if not changes:
        return [("p", [rule + "calibration changes the premise on no task."])]
    said = [
        f"{names.task_label(task)} ({'learns' if before else 'does not learn'} raw, "
        f"{'learns' if after else 'does not'} calibrated)"
        for _, task, before, after in changes
    ]
    return [("p", [rule + "calibration changes the premise on " + ", ".join(said) + "."])]


def _second_reading(verdicts: dict[str, str], again: dict[str, str], premise: pd.DataFrame) -> list[Block]:
    """The claims whose verdicts differ when read over only the tasks where the model learns in
    context."""
    if not again or premise.empty:
        return []
    learning = [names.task_label(t) for t in names.order_tasks(premise.loc[premise["learns"].astype(bool), "task"])]
    if not learning:
        return [("p", ["No claim can be read again over the tasks where the model learns in context: there is none."])]
    where = f"only the tasks where the model learns in context ({', '.join(learning)})"
    differ = [c for c in claim_definitions.CLAIMS if again[c.id] != verdicts[c.id]]
    if not differ:
        return [("p", [f"Read again over {where}, every claim gets the same verdict."])]
    return [
        (
            "p",
            [f"Read again over {where}, {len(differ)} of the {len(verdicts)} claims get another verdict:"],
        ),
        (
            "ul",
            [
                [f"{c.paper} {c.table}, {c.text}: {verdicts[c.id]} over all tasks, {again[c.id]} over those"]
                for c in differ
            ],
        ),
    ]


def _third_reading(verdicts: dict[str, str], both: dict[str, str], tests: pd.DataFrame) -> list[Block]:
    """The claims that compare ICL with finetuning whose verdicts differ when read over only the
    tasks where ICL and every finetuning method a claim reads learn, and those with no such task."""
    compared = [
        c
        for c in claim_definitions.CLAIMS
        if both.get(c.id, "not run") not in ("not run", premise_module.NOT_APPLICABLE)
    ]
    if not compared:
        return []
    readable = [c for c in compared if both[c.id] != premise_module.BOTH_NO_TASK]
    differ = [c for c in readable if both[c.id] != verdicts[c.id]]
    where = (
        "only the tasks where the model learns in context and every finetuning method a claim reads learns as well "
        "(FT above ZSL)"
    )
    if not readable:
        none = f"none of the {len(compared)} claims that compare ICL with finetuning has such a task"
        return [("p", [f"Read again over {where}: {none}."])]
    counted = (
        f"{len(differ)} of the {len(readable)} claims that compare ICL with finetuning and have such a task get "
        "another verdict"
        + (f" ({len(compared) - len(readable)} more have none)" if len(readable) < len(compared) else "")
    )
    blocks: list[Block] = [("p", [f"Read again over {where}, {counted}{':' if differ else '.'}"])]
    if differ:
        blocks.append(
            (
                "ul",
                [
                    [
                        f"{c.paper} {c.table}, {c.text}: {verdicts[c.id]} over all tasks, {both[c.id]} over "
                        + ", ".join(names.task_label(t) for t in claim_wording.both_tasks(tests, c.id))
                    ]
                    for c in differ
                ],
            )
        )
    return blocks


def _chosen_reading(verdicts: dict[str, str], chosen: pd.DataFrame) -> list[Block]:
    """The claims read again with GD and its kin at the rate and epochs chosen on development rows:
    their verdicts counted, those that differ from the protocol's rate's, and where ICL and the
    chosen finetuning both learn."""
    again = {c: v for c, v in claim_wording.verdicts(chosen).items() if v != "not run"}
    if not again:
        return []
    differ = [c for c in claim_definitions.CLAIMS if c.id in again and again[c.id] != verdicts[c.id]]
    blocks: list[Block] = [
        ("h2", "The claims at the chosen setting"),
        (
            "p",
            [
                "Read again with GD and its kin at the learning rate and epochs chosen on development rows "
                f"(the claims that read only these): {claim_wording.counts_text(again)}: ",
                _table("claims_chosen", "the claims table at the chosen setting"),
                ". "
                + (
                    f"{len(differ)} get another verdict than at the protocol's rate:"
                    if differ
                    else "Every one gets the verdict it gets at the protocol's rate."
                ),
            ],
        ),
    ]
    if differ:
        blocks.append(
            (
                "ul",
                [
                    [
                        f"{c.paper} {c.table}, {c.text}: {verdicts[c.id]} at the protocol's rate, {again[c.id]} at the chosen one"
                    ]
                    for c in differ
                ],
            )
        )
    return blocks + _third_reading(claim_wording.verdicts(chosen), claim_wording.both_verdicts(chosen), chosen)


def _seeds(tests: pd.DataFrame) -> int:
    seeds = tests["n_seeds"].dropna()
    return int(seeds.max()) if len(seeds) else 0


def first_page(
    *,
    model: str,
    variant: str,
    about: dict,
    data: pd.DataFrame | None,
    claim_tests: pd.DataFrame | None,
    reproduction: pd.DataFrame | None,
    premise: pd.DataFrame | None = None,
    premise_methods: pd.DataFrame | None = None,
    choices: pd.DataFrame | None = None,
    chosen_tests: pd.DataFrame | None = None,
    n_published: int,
    tables: list[str],
    figures: list[str],
    ci_level: float = 0.95,
    made_by: dict | None = None,
) -> list[Block]:
    """The blocks of the first page. ``about``: what was run (models, variants, tasks -> seeds, k,
    max_eval, config files, and ``data``: each task's source, for which ran on real text and which
    on the synthetic twins, ``names.data_sources_text``), from the config; ``data``: the data statistics (examples evaluated);
    ``claim_tests``: ``claim_testing.evaluate_claims``' table; ``premise``: ``claim_testing.evaluate``'s table of
    their premise, whether the model learns in context on each task, and ``premise_methods`` its finetuning side,
    whether each finetuning method learns (``premise.METHOD_COLUMNS``); ``reproduction``: ``published.reproduction``'s
    cells of the report model, out of ``n_published`` result cells; ``tables`` and ``figures``:
    the report's, to link to; ``choices``: the run's finetuning choices on development rows
    (``setting_choice.FINETUNING_COLUMNS``), where a method chooses its rate; ``chosen_tests``: the claims
    read again with GD and its kin at their chosen setting, where the run has them at both; ``made_by``: the summary table's provenance (the software that made the
    caches, and that computed the metrics). The claims and reproduction parts are left out where
    they are None."""
    blocks: list[Block] = [("h1", "What this run found")]
    evaluated = ""
    if data is not None and len(data):
        counts = sorted(set(int(n) for n in data["n_evaluated"]))
        evaluated = f"; {'/'.join(map(str, counts))} evaluation examples per task and seed"
    tasks = ", ".join(
        f"{names.task_label(t)} (seed{'s' if len(s) > 1 else ''} {', '.join(map(str, s))})"
        for t, s in about["seeds"].items()
    )
    models = ", ".join(f"{name} ({source})" for name, source in about["models"].items())
    config = ", ".join(about["configfiles"]) or "config.yaml"
    if about.get("overrides"):
        config += f" with --config {about['overrides']}"
    blocks.append(
        (
            "p",
            [
                f"Models: {models}; variants: {', '.join(about['variants'])}; tasks: {tasks}; "
                f"k = {', '.join(map(str, about['k']))} demonstrations{evaluated}; config: {config}. "
                f"The tables and figures show model {model}, variant {variant}."
            ],
        )
    )
    if about.get("data"):  # which tasks ran on real text, and which on the synthetic twins
        real = any(source["source"] == "package" for source in about["data"].values())
        link = (
            [" Origin, label rules and sizes: " if real else " Sizes: ", _table("data", "the data table"), "."]
            if "data" in tables
            else []
        )
        blocks.append(("p", [f"Data: {names.data_sources_text(about['data'], brief=True)}", *link]))
    if about.get("checkpoints"):  # a pretrained checkpoint's origin and the terms its use is under
        blocks.append(("p", [about["checkpoints"]]))

    if choices is not None and len(choices):
        blocks.append(("h2", "Finetuning at a chosen setting"))
        blocks.append(
            (
                "p",
                [
                    "Where a method chooses its learning rate and epochs (methods.<name>.choose), each was chosen "
                    "per model, variant and task before any of its runs, on held-out train rows that no seed "
                    "takes as a demonstration (never an evaluation example): the grid point whose finetuning "
                    "is most accurate there on the mean over the seeds, a tie to the smaller rate, then the "
                    "fewer epochs. Every grid point: ",
                    _table("choice", "the choice table"),
                    ".",
                ],
            )
        )
        blocks.append(("ul", [[line] for line in choice_table.choice_text(choices)]))
    if premise is not None:
        methods = premise_methods[premise_methods["model"] == model] if premise_methods is not None else None
        seeds = _seeds(claim_tests[claim_tests["model"] == model]) if claim_tests is not None else 0
        blocks += _premise_blocks(premise[premise["model"] == model], methods, seeds)
    if claim_tests is not None:
        tests = claim_tests[claim_tests["model"] == model]
        verdicts = claim_wording.verdicts(tests)
        counts = claim_wording.counts_text(verdicts)
        blocks.append(("h2", "The papers' claims"))
        blocks.append(
            (
                "p",
                [
                    f"{counts}, each read on paired intervals "
                    f"({'seeds and examples crossed' if _seeds(tests) > 1 else 'over the examples only: one seed'}) at "
                    f"{names.percent(ci_level)} (per-task intervals Bonferroni-corrected where a claim counts tasks): ",
                    _table("claims", "the claims table"),
                    ", ",
                    _figure("claims", "the forest plot"),
                    ".",
                ],
            )
        )
        blocks.append(
            ("ul", [_claim_line(c, verdicts[c.id], tests[tests["claim"] == c.id]) for c in claim_definitions.CLAIMS])
        )
        if premise is not None:
            blocks += _second_reading(
                verdicts, claim_wording.premise_verdicts(tests), premise[premise["model"] == model]
            )
        blocks += _third_reading(verdicts, claim_wording.both_verdicts(tests), tests)
        if chosen_tests is not None:
            blocks += _chosen_reading(verdicts, chosen_tests[chosen_tests["model"] == model])
    if reproduction is not None:
        within = int(reproduction["within"].sum())
        blocks.append(("h2", "Against the published numbers"))
        blocks.append(
            (
                "p",
                [
                    f"{within} of the {len(reproduction)} published cells this run covers are within its uncertainty "
                    f"(the run's interval and the published ± combined), of {n_published} published result cells; the "
                    f"papers' model is the fairseq 1.3B, so another model's run reads as a comparison: ",
                    _table("reproduction", "the reproduction table"),
                    ", ",
                    _figure("reproduction", "its figure"),
                    ".",
                ],
            )
        )
    blocks.append(("h2", "Software"))
    records = (made_by or {}).get("caches") or []
    if not records:
        blocks.append(("p", ["The caches recorded no versions (written before the workflow recorded them)."]))
    elif len(records) == 1:
        blocks.append(("p", [f"Caches made with {provenance.describe(records[0])}."]))
    else:
        blocks.append(
            (
                "p",
                [
                    f"The caches of this run come from {len(records)} different software versions, so "
                    "a difference between runs may be the libraries' rather than the code's:"
                ],
            )
        )
        blocks.append(("ul", [[provenance.describe(r)] for r in records]))
    if dirty := provenance.uncommitted(records):
        blocks.append(
            (
                "p",
                [
                    ("It" if len(records) == 1 else f"{len(dirty)} of these {len(records)}")
                    + " ran from a working tree with uncommitted changes: no commit holds the code that made "
                    "those caches, so their numbers cannot be rebuilt from the repository; rerun from a clean "
                    "clone of a commit to have them."
                ],
            )
        )
    if made_by and made_by.get("computed"):
        blocks.append(("p", [f"Metrics computed with {provenance.describe(made_by['computed'])}."]))
    blocks.append(("h2", "Tables and figures"))
    inline: Inline = ["Tables: "]
    for i, name in enumerate(tables):
        inline += ([", "] if i else []) + [_table(name)]
    inline += [". Figures: "]
    for i, name in enumerate(figures):
        inline += ([", "] if i else []) + [_figure(name)]
    blocks.append(("p", inline + ["."]))
    return blocks


def to_markdown(blocks: list[Block]) -> str:
    """The page as Markdown, linking each table's .md and each figure's .png beside it."""

    def inline(parts: Inline) -> str:
        return "".join(
            p
            if isinstance(p, str)
            else f"[{p.label}]({'tables' if p.kind == 'table' else 'figures'}/{p.name}."
            f"{'md' if p.kind == 'table' else 'png'})"
            for p in parts
        )

    out = []
    for kind, content in blocks:
        if kind in HEADINGS:
            out += [f"{HEADINGS[kind][0]} {content}", ""]
        elif kind == "p":
            out += [inline(content), ""]
        elif kind == "ul":
            out += [f"- {inline(item)}" for item in content] + [""]
        else:
            raise _unknown(kind)
    return "\n".join(out)


def _rst_text(text: str) -> str:
    """Plain text for reStructuredText (and the Jinja pass Snakemake gives it): markup characters
    escaped, the page's own **bold** kept."""
    out = text
    for ch in ("\\", "`", "|", "_", "*"):
        out = out.replace(ch, "\\" + ch)
    out = out.replace("\\*\\*", "**")
    return out.replace("{", "&#123;").replace("}", "&#125;") if ("{{" in out or "{%" in out) else out


# Snakemake's landing page centres the description in a window-high box, so a page taller than
# the window is cut off at the top, out of scrolling's reach; this starts it at the top. The style
# lives in the description, so it leaves with it when another view opens.
_RST_LAYOUT = """.. raw:: html

   <style>div.grow.flex.items-center.justify-center.h-screen { align-items: flex-start; }</style>

"""


def to_rst(blocks: list[Block]) -> str:
    """The page as reStructuredText for the Snakemake report, linking each table's .html and each
    figure's .png by the link targets the report defines for its results."""

    def inline(parts: Inline) -> str:
        return "".join(
            _rst_text(p) if isinstance(p, str) else f"`{p.label} <{p.name}.{'html' if p.kind == 'table' else 'png'}_>`_"
            for p in parts
        )

    out = []
    for kind, content in blocks:
        if kind in HEADINGS:
            text = _rst_text(content)
            out += [text, HEADINGS[kind][1] * len(text), ""]
        elif kind == "p":
            out += [inline(content), ""]
        elif kind == "ul":
            out += [f"- {inline(item)}" for item in content] + [""]
        else:
            raise _unknown(kind)
    return _RST_LAYOUT + "\n".join(out)


def write(blocks: list[Block], md_path: str, rst_path: str) -> None:
    write_text(md_path, to_markdown(blocks))
    write_text(rst_path, to_rst(blocks))
