"""The report stage picks tables and figures by output name and writes every format."""

import numpy as np
import pandas as pd
import pytest

from icl_gd.activations import cache
from icl_gd.common import names
from icl_gd.metrics import claim_definitions, claim_testing, scoring
from icl_gd.report import outputs, summary

METRICS = [
    "acc_zsl",
    "acc_icl",
    "acc_ft",
    "jaccard_all",
    "jaccard_correct",
    "jaccard_incorrect",
    "simaou",
    "simaou_norm",
    "simam_after",
    "simam_delta",
]


def _runs():
    rng = np.random.default_rng(0)
    rows = []
    for variant, methods in {"trained": ["gd", "lcgd"], "untrained": ["gd"]}.items():
        for task in ("sst2", "cb"):
            for seed in (1, 2):
                for method in methods:
                    for metric in METRICS:
                        layers = [pd.NA] if metric.startswith(("acc", "jaccard")) else [0, 1, pd.NA]
                        rows += [
                            dict(
                                model="m",
                                variant=variant,
                                task=task,
                                seed=seed,
                                method=method,
                                metric=metric,
                                layer=layer,
                                value=float(rng.uniform()),
                            )
                            for layer in layers
                        ]
    return scoring.tidy(pd.DataFrame(rows))


def test_write_tables_and_figures(tmp_path):
    runs = _runs()
    summary = scoring.aggregate(runs)
    runs.to_parquet(tmp_path / "runs.parquet")
    summary.to_parquet(tmp_path / "summary.parquet")
    tables = [
        str(tmp_path / f"t/{name}.{ext}")
        for name in ("accuracy", "methods", "variants")
        for ext in ("md", "tex", "csv", "html")
    ]
    for name in ("accuracy", "methods", "variants"):
        outputs.write_table(
            name,
            {"summary": str(tmp_path / "summary.parquet")},
            str(tmp_path / f"t/{name}.md"),
            model="m",
            methods=["gd", "lcgd"],
            variant="trained",
            n_seeds=3,
            baseline="gd",
            configfiles=["config.yaml"],
        )
    for path in tables:
        assert (tmp_path / path).stat().st_size > 0
    methods_md = (tmp_path / "t/methods.md").read_text()
    assert "LCGD" in methods_md and "of 3 seeds" in methods_md  # 2 of 3 configured seeds ran
    cell = summary.query(
        "variant == 'trained' and task == 'cb' and method == 'lcgd' and metric == 'simam_delta' and layer.isna()"
    )
    assert f"{cell['mean'].item():.2f}" in methods_md and "config: config.yaml" in methods_md
    # the report's viewer gets the same table as HTML: caption above, bold best values, the marks kept
    methods_html = (tmp_path / "t/methods.html").read_text()
    assert methods_html.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in methods_html
    assert methods_html.index("<caption>") < methods_html.index("<tbody>") and "<strong>" in methods_html
    assert f"{cell['mean'].item():.2f}" in methods_html and "†" in methods_html and "of 3 seeds" in methods_html
    names = ("per_layer", "accuracy", "alpha", "prediction_changes", "lr_sweep", "models")
    figures = [str(tmp_path / f"f/{name}.{ext}") for name in names for ext in ("png", "pdf")]
    sweep = [
        dict(group="GD", method=m, task=t, lr=lr) for m, lr in (("gd", 1e-3), ("lcgd", 2e-3)) for t in ("sst2", "cb")
    ]
    outputs.write_figures(
        str(tmp_path / "runs.parquet"),
        str(tmp_path / "summary.parquet"),
        figures,
        model="m",
        methods=["gd", "lcgd"],
        variant="trained",
        lr_sweep=sweep,
        models=["m"],
    )
    for path in figures:
        assert (tmp_path / path).stat().st_size > 1000


def test_grad_norm_figure_from_training_logs_of_user_named_methods(tmp_path, monkeypatch):
    """Methods named by the user: the log colour scale follows a method's kind, not its name."""
    norms = {"vanilla": np.full((3, 2), 2.0), "causal": np.full((3, 2), 1e-3)}
    logs = []
    for method, kind in (("vanilla", "gd"), ("causal", "lcgd")):
        path = tmp_path / f"{method}.parquet"
        meta = dict(
            model="m", variant="trained", task="subj", seed=4, setting=method, method=method, kind=kind, lr=0.003
        )
        cache.write_train_log(path, meta, loss=np.ones(3), grad_norm=norms[method], skipped=np.zeros(3, bool))
        logs.append(str(path))
    drawn = {}
    original = outputs.figures.grad_norm_figure

    def spy(norms, **kwargs):
        drawn.update(norms=norms, **kwargs)
        return original(norms, **kwargs)

    monkeypatch.setattr(outputs.figures, "grad_norm_figure", spy)
    paths = [str(tmp_path / f"grad_norms.{ext}") for ext in ("png", "pdf")]
    # no metrics tables: the gradient-norm job does not read them
    outputs.write_figures(
        None, None, paths, model="m", variant="trained", methods=["vanilla", "causal"], train_logs=logs
    )
    assert list(drawn["norms"]) == ["vanilla", "causal"] and drawn["log_scale"] == {"causal"}
    np.testing.assert_allclose(drawn["norms"]["causal"], norms["causal"])
    assert "Subj, seed 4" in drawn["title"]
    assert all((tmp_path / f"grad_norms.{ext}").stat().st_size > 1000 for ext in ("png", "pdf"))


def test_captions_take_the_configured_interval_level(tmp_path):
    runs = _runs()
    summary = scoring.aggregate(runs)
    summary.assign(ci_low=summary["mean"] - 0.1, ci_high=summary["mean"] + 0.1).to_parquet(tmp_path / "summary.parquet")
    common = dict(
        model="m", methods=["gd", "lcgd"], variant="trained", n_seeds=2, baseline="gd", configfiles=["paper.yaml"]
    )
    # what the default run's reports/tables/intervals.md carries
    assert names.table_caption("intervals") == (
        "Layer-mean scores, mean over seeds, with 95% intervals on the crossed seeds x examples design: one resample "
        "of the task's evaluation examples for every seed, the seeds' spread as a Student t with seeds - 1 degrees "
        "of freedom (one seed: the examples only)."
    )
    for level, text in ((0.95, "95%"), (0.9, "90%"), (0.975, "97.5%")):
        outputs.write_table(
            "intervals",
            {"summary": str(tmp_path / "summary.parquet")},
            str(tmp_path / f"{level}/intervals.md"),
            ci_level=level,
            **common,
        )
        md = (tmp_path / f"{level}/intervals.md").read_text()
        assert md.startswith(
            f"**Layer-mean scores, mean over seeds, with {text} intervals on the crossed seeds x "
            "examples design: one resample of the task's evaluation examples for every seed, the "
            "seeds' spread as a Student t with seeds - 1 degrees of freedom (one seed: the examples "
            "only). Model: m, variant: trained; config: paper.yaml.**"
        )
        tex = text.replace("%", r"\%")
        assert f"with {tex} intervals on the crossed seeds" in (tmp_path / f"{level}/intervals.tex").read_text()

    # the comparisons table's footnote says the level too
    comparisons = pd.DataFrame(
        [
            dict(
                model="m",
                variant="trained",
                task="cb",
                method="lcgd",
                baseline="gd",
                metric="acc_ft",
                diff=0.1,
                ci_low=0.0,
                ci_high=0.2,
                significant=True,
            )
        ]
    )
    comparisons.to_parquet(tmp_path / "comparisons.parquet")
    outputs.write_table(
        "comparisons",
        {"comparisons": str(tmp_path / "comparisons.parquet")},
        str(tmp_path / "c/comparisons.md"),
        ci_level=0.9,
        **common,
    )
    md = (tmp_path / "c/comparisons.md").read_text()
    assert md.count("90%") == 2 and "95%" not in md  # caption and footnote

    # the rule hands over the caption the Snakemake report shows: the table carries that very text
    outputs.write_table(
        "intervals",
        {"summary": str(tmp_path / "summary.parquet")},
        str(tmp_path / "r/intervals.md"),
        caption="As in the report.",
        ci_level=0.9,
        **common,
    )
    assert (tmp_path / "r/intervals.md").read_text().startswith("**As in the report. Model: m,")


def _claim_tests():
    """A claims table as evaluate_claims writes it, from two hand-made tasks (ICL right on every
    example, ZSL on half): some claims tested, the others not run."""
    runs = []
    for task in ("sst2", "cb"):
        n = 80
        zsl = np.arange(n) < n // 2
        icl = np.ones(n, dtype=bool)
        gold = np.zeros(n, dtype=np.int16)
        runs.append(
            scoring.RunExamples(
                meta=dict(model="m", variant="trained", task=task, seed=1, method="gd", baseline=None),
                example_id=np.arange(n),
                gold=gold,
                pred_zsl=np.where(zsl, 0, 1).astype(np.int16),
                pred_icl=np.where(icl, 0, 1).astype(np.int16),
                pred_ft=np.where(zsl, 0, 1).astype(np.int16),
                similarities={"simam_delta": np.linspace(0, 1, n).reshape(n, 1)},
            )
        )
    return claim_testing.evaluate_claims(runs, {"gd": "gd"}, n_boot=200)


def test_the_first_page_says_what_was_run_and_what_it_found(tmp_path):
    import docutils.core

    from icl_gd.report import summary

    tests = _claim_tests()
    about = dict(
        models={"m": "builtin"},
        variants=["trained"],
        seeds={"sst2": [2], "cb": [3]},
        k=[4, 8],
        configfiles=["configs/x.yaml"],
        overrides="",
        checkpoints="Model m: a checkpoint; its use is under the Terms (https://example.org/terms).",
    )
    data = pd.DataFrame({"task": ["sst2", "cb"], "n_evaluated": [80, 80]})
    blocks = summary.first_page(
        model="m",
        variant="trained",
        about=about,
        data=data,
        claim_tests=tests,
        reproduction=pd.DataFrame({"within": [True, False, False]}),
        n_published=169,
        tables=["accuracy", "claims"],
        figures=["claims"],
    )
    md = summary.to_markdown(blocks)
    assert md.startswith("# What this run found") and "SST2 (seed 2), CB (seed 3)" in md and "80 evaluation" in md
    assert "k = 4, 8 demonstrations" in md
    # a pretrained checkpoint's terms on the first screen, under what was run
    assert md.index("its use is under the Terms (https://example.org/terms)") < md.index("## The papers' claims")
    assert "configs/x.yaml" in md and "[the claims table](tables/claims.md)" in md
    verdict = tests.loc[tests["claim"] == "003-T1-icl-zsl", "verdict"].iloc[0]
    assert f"- **{verdict}**: 003 Table 1, ICL is more accurate than zero-shot on every task" in md
    assert "1 of the 3 published cells this run covers are within" in md and "of 169" in md
    assert sum(line.startswith("- **") for line in md.splitlines()) == len(claim_definitions.CLAIMS)  # a line per claim
    # the report's page: its links name the report's own result targets; the markup is escaped
    rst = summary.to_rst(blocks)
    assert "`the claims table <claims.html_>`_" in rst and "SimAM\\_delta" in rst and "{{" not in rst
    targets = "\n".join(
        f".. _{name}: javascript:show('{name}')"
        for name in ("claims.html", "claims.png", "accuracy.html", "reproduction.html", "reproduction.png")
    )
    html = docutils.core.publish_parts(
        rst + "\n" + targets + "\n", writer="html", settings_overrides={"report_level": 2, "halt_level": 2}
    )["html_body"]
    assert '<h1 class="title">What this run found</h1>' in html and "javascript:show('claims.html')" in html
    assert "SimAM_delta" in html and "<strong>" + verdict + "</strong>" in html
    summary.write(blocks, tmp_path / "summary.md", tmp_path / "summary.rst")
    assert (tmp_path / "summary.md").read_text() == md and (tmp_path / "summary.rst").read_text() == rst
    # without the papers' part: what was run, and the links
    bare = summary.to_markdown(
        summary.first_page(
            model="m",
            variant="trained",
            about=about,
            data=None,
            claim_tests=None,
            reproduction=None,
            n_published=0,
            tables=["accuracy"],
            figures=[],
        )
    )
    assert "claims" not in bare and "[accuracy](tables/accuracy.md)" in bare


def _software_page(made_by: dict) -> str:
    """A first page with nothing but what made it (``made_by``), as markdown."""
    from icl_gd.report import summary

    return summary.to_markdown(
        summary.first_page(
            model="m",
            variant="trained",
            about=dict(models={"m": "builtin"}, variants=["trained"], seeds={"sst2": [2]}, k=[4], configfiles=[]),
            data=None,
            claim_tests=None,
            reproduction=None,
            n_published=0,
            tables=[],
            figures=[],
            made_by=made_by,
        )
    )


def test_provenance_records_the_software_and_names_a_mix_of_versions():
    from icl_gd.common import provenance
    from icl_gd.report import tables

    record = provenance.collect("cpu", "torch.float32")
    assert record["transformers"] == __import__("transformers").__version__ and record["dtype"] == "float32"
    assert record["python"].count(".") == 2 and record["device"] == "cpu" and len(record["commit"] or "x" * 40) == 40
    other = dict(record, transformers="9.99.0", device="NVIDIA H100", dtype="bfloat16")
    merged = provenance.distinct([record, dict(record, dtype="bfloat16"), other])
    assert (
        len(merged) == 2 and merged[0]["dtypes"] == ["float32", "bfloat16"] and merged[1]["devices"] == ["NVIDIA H100"]
    )
    assert provenance.distinct(merged) == merged  # merging merged records changes nothing
    assert "transformers 9.99.0" in provenance.describe(merged[1]) and "NVIDIA H100, bfloat16" in provenance.describe(
        merged[1]
    )
    made_by = {"caches": merged, "computed": provenance.software()}
    notes = tables.provenance_notes(made_by)
    assert "come from 2 different software versions" in notes[0] and "transformers 9.99.0" in notes[0]
    page = _software_page(made_by)
    assert "## Software" in page and "2 different software versions" in page and "Metrics computed with Python" in page
    assert "recorded no versions" in tables.provenance_notes(None)[0]


def test_the_first_page_reads_every_caches_provenance_and_says_when_any_was_uncommitted():
    """Provenance merged over several tables (the run's scores and its further orders'): caches from a
    clean commit, a second commit and a working tree with uncommitted changes all reach the Software
    section, the uncommitted ones named in one line; a run from clean commits alone has no such line."""
    from icl_gd.common import provenance

    base = {**provenance.software(), "device": "cpu", "dtype": "float32"}
    clean, second = dict(base, commit="a" * 40, clean=True), dict(base, commit="b" * 40, clean=True)
    dirty = dict(base, commit="c" * 40, clean=False)
    scores = {"caches": provenance.distinct([clean, clean]), "computed": dict(base, commit="d" * 40, clean=True)}
    orders = {"caches": provenance.distinct([second, dirty]), "computed": dict(base, commit="e" * 40, clean=True)}
    made_by = provenance.merged(scores, None, orders)
    assert [r["commit"][0] for r in made_by["caches"]] == ["a", "b", "c"] and made_by["computed"]["commit"][0] == "d"
    assert provenance.uncommitted(made_by["caches"]) == made_by["caches"][2:]

    text = _software_page(made_by)
    assert "3 different software versions" in text and "commit bbbbbbbbbb (clean)" in text
    assert "1 of these 3 ran from a working tree with uncommitted changes" in text
    assert "uncommitted changes:" not in _software_page(provenance.merged(scores))  # clean commits alone
    assert "It ran from a working tree" in _software_page(provenance.merged({"caches": [dirty]}))


def test_the_constraints_file_pins_what_made_the_shipped_reports():
    """constraints.txt (.ci/freeze-constraints) is refreshed with the shipped reports: every library
    the first page names is pinned there at the version the report names."""
    import re
    from pathlib import Path

    from icl_gd.common import provenance

    root = Path(__file__).resolve().parents[3]
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (root / "constraints.txt").read_text(), re.M))
    pins = {name.lower(): version for name, version in pins.items()}
    assert {"snakemake", "pandas", "matplotlib", "playwright", *provenance.PACKAGES} <= set(pins)
    for page in (root / "reports/summary.md", root / "reports/smollm2/summary.md"):
        line = next(line for line in page.read_text().splitlines() if line.startswith("Caches made with"))
        for package in provenance.PACKAGES:
            shown = re.search(rf"\b{package} (\S+?)[,;]", line).group(1)
            assert shown.split("+")[0] == pins[package], (page, package, shown, pins[package])


def test_the_first_page_renders_each_block_kind_and_refuses_another():
    """Headings of three levels, a paragraph and a list, in Markdown and reST; a block of any other
    kind stops the page (it once rendered as a list of its characters, one bullet each)."""
    blocks = [("h1", "One"), ("h2", "Two"), ("h3", "Three_3"), ("p", ["a paragraph"]), ("ul", [["an item"]])]
    md = summary.to_markdown(blocks)
    assert md.startswith("# One\n\n## Two\n\n### Three_3\n\na paragraph\n\n- an item\n")
    rst = summary.to_rst(blocks)
    assert "Three\\_3\n~~~~~~~~\n" in rst and "Two\n---\n" in rst and "- an item" in rst
    for render in (summary.to_markdown, summary.to_rst):
        with pytest.raises(ValueError, match="a block of kind 'h4'; use one of"):
            render([("h4", "Four")])
