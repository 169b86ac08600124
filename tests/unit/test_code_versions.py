"""The rerun trigger's grain: each rule's ``code`` parameter is the checksum of the package modules
its script executes, read from the imports (``icl_gd.common.code_versions``), so an edit reruns
the jobs that run the edited code and no other (issue 49, item 2; issue 62, item 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from icl_gd.common import code_versions
from icl_gd.common.code_versions import DECIDERS, INFRASTRUCTURE, executed

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "workflow" / "rules"
SCRIPTS = REPO / "workflow" / "scripts"


def rules() -> list[tuple[str, str, str]]:
    """(rule, its script, its code parameter as written) of every rule with a script."""
    found = []
    for smk in sorted(RULES.glob("*.smk")):
        for block in re.split(r"^rule ", smk.read_text(), flags=re.M)[1:]:
            name = block.split(":")[0]
            script = re.search(r'script:\s*\n\s*"\.\./scripts/([\w.]+)"', block)
            code = re.search(r"^\s*code=(.+),$", block, re.M)
            if script:
                found.append((name, script.group(1), code.group(1) if code else None))
    return found


# Rules whose script runs without a code parameter, and why.
WITHOUT_CODE = {
    "download_model": "a hub download: an edit of the downloader must not fetch a model's gigabytes again",
    "disk_estimate": "writes no file, so it runs whenever it is named",
    "cost_estimate": "declares no output (it measures this machine), so it runs whenever it is named",
}


def runs(script: str) -> set[str]:
    """What a rule's code parameter hashes: the modules its script executes that can change what it writes."""
    return executed(SCRIPTS / script) - INFRASTRUCTURE - DECIDERS


@pytest.mark.parametrize("rule, script, code", rules(), ids=lambda x: x if isinstance(x, str) else None)
def test_every_rule_hashes_the_code_of_its_own_script(rule, script, code):
    if rule in WITHOUT_CODE:
        assert code is None, f"rule {rule}: {WITHOUT_CODE[rule]}"
    elif rule == "prepare_task":  # the task's data code: a corpus's parser joins it where the task reads one
        assert code == "data_code"
    else:
        assert code == f'code_of("{script}")', f"rule {rule} runs {script} but its code parameter is {code}"


# Scripts whose name is not a rule's, and why.
NOT_A_RULES_NAME = {
    # the five extraction rules' (extract_base, extract_zsl, finetune_and_extract and the further
    # orders'): Snakemake records the script: line in every output's metadata, and a new name would
    # rerun every finished extraction of every run, hours on a real model, for a name
    "extract.py": {"extract_base", "finetune_and_extract"},
}


def test_every_script_is_named_after_a_rule_that_runs_it():
    """A script's name says which rule runs it; a script that several rules run is named after one of
    them, or listed in :data:`NOT_A_RULES_NAME` with why."""
    rules_of: dict[str, set[str]] = {}
    for rule, script, _ in rules():
        rules_of.setdefault(script, set()).add(rule)
    named = {s: sorted(r) for s, r in rules_of.items() if Path(s).stem not in r}
    assert named == {s: sorted(r) for s, r in NOT_A_RULES_NAME.items()}


def rules_running(module: str) -> set[str]:
    return {rule for rule, script, code in rules() if code and module in runs(script)}


EXTRACTIONS = {"extract_base", "finetune_and_extract", "extract_order", "finetune_order"}
MODEL_JOBS = {"build_builtin_model", "convert_gguf_model", "make_variant", "model_statistics"}
REPORT = {"table", "figure", "first_page"}


def test_an_edit_reruns_the_jobs_of_its_stage_and_no_other():
    """The issue's three edits: a metric's formula reruns the metric jobs (and no model job, no
    extraction), a table's code the report jobs only, the extraction's code the extractions."""
    scripted = {rule for rule, _, code in rules() if code}
    formulas = rules_running("metrics/formulas")
    assert {"score_run", "aggregate_metrics", "compare_methods", "evaluate_claims", "order_run"} <= formulas
    assert not formulas & (EXTRACTIONS | MODEL_JOBS)
    assert rules_running("report/tables") == REPORT & scripted
    assert rules_running("activations/extract") == EXTRACTIONS & scripted
    assert "metrics/statistics" not in runs("score_run.py")  # the data table's statistics: no run's scores
    # the claims' text rewords the report, not the claims' tests
    assert "report/claim_wording" not in runs("evaluate_claims.py") and "report/claim_wording" in runs("table.py")


def fake_package(root: Path) -> Path:
    package = root / "icl_gd"
    files = {
        "__init__.py": "",
        "common/__init__.py": "",
        "common/atomic.py": "",
        "metrics/__init__.py": "",
        "metrics/formulas.py": "from icl_gd.common import atomic\n",
        "metrics/scoring.py": "from . import formulas\n",
        "config/__init__.py": "",
        "config/resolve.py": "from icl_gd.metrics import formulas\n",
        "report/__init__.py": "",
        "report/figures/__init__.py": "",
        "report/figures/alpha.py": "",
        "report/tables.py": "def f():\n    from icl_gd.report.figures import alpha\n",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    (root / "score.py").write_text("from icl_gd.metrics.scoring import x\nfrom icl_gd.config import resolve\n")
    (root / "table.py").write_text("import icl_gd.report.tables\n")
    return package


def test_a_version_follows_the_imports_through_the_package_and_leaves_out_what_changes_no_result(tmp_path):
    package = fake_package(tmp_path)
    score, table = tmp_path / "score.py", tmp_path / "table.py"
    assert code_versions.executed(score, package) == {
        "metrics/scoring",
        "metrics/formulas",
        "common/atomic",
        "config/resolve",
    }
    assert code_versions.executed(table, package) == {"report/tables", "report/figures"}  # a function's import too
    before = {s: code_versions.of_script(s, package) for s in (score, table)}
    assert set(before[score]) == {"metrics/formulas", "metrics/scoring"}  # not the writer, not the decider

    def after(edit: str) -> dict:
        (package / edit).write_text((package / edit).read_text() + "CHANGED = 1\n")
        return {s: code_versions.of_script(s, package) != before[s] for s in (score, table)}

    assert after("common/atomic.py") == {score: False, table: False}
    assert after("config/resolve.py") == {score: False, table: False}
    assert after("metrics/formulas.py") == {score: True, table: False}  # through scoring
    before.update({s: code_versions.of_script(s, package) for s in (score, table)})
    assert after("report/figures/alpha.py") == {score: False, table: True}  # the subpackage counted whole


def test_a_version_is_the_codes_meaning_not_its_bytes(tmp_path):
    """A comment, a docstring (the module's, a function's, a class's), blank lines and a reformatting
    leave a module's version as it was; a changed constant, a renamed variable or a string that is
    not a docstring change it."""
    package = fake_package(tmp_path)
    formulas = package / "metrics/formulas.py"
    formulas.write_text(
        '"""Formulas."""\nfrom icl_gd.common import atomic\n\nSCALE = 2\n\n\n'
        'def f(x):\n    """Scaled."""\n    return x * SCALE\n'
    )
    version = code_versions.code_version({"metrics/formulas"}, package)

    def edited(text: str) -> bool:
        formulas.write_text(text)
        return code_versions.code_version({"metrics/formulas"}, package) != version

    same = [
        '"""Formulas, now\nwith more words."""\nfrom icl_gd.common import atomic\n\nSCALE = 2\n\n\n'
        'def f(x):\n    """Scaled."""\n    return x * SCALE\n',
        "from icl_gd.common import atomic  # the writer\nSCALE = 2\n# why 2\ndef f(x):\n    return x * SCALE\n",
        "from icl_gd.common import atomic\n\n\n\nSCALE = (\n    2\n)\n\n\ndef f(x):\n\n    return (x *\n SCALE)\n",
    ]
    assert [edited(text) for text in same] == [False, False, False]
    changed = [
        "from icl_gd.common import atomic\nSCALE = 3\ndef f(x):\n    return x * SCALE\n",
        "from icl_gd.common import atomic\nSCALE = 2\ndef f(y):\n    return y * SCALE\n",
        "from icl_gd.common import atomic\nSCALE = 2\ndef f(x):\n    'Scaled.'\n    'a string'\n    return x * SCALE\n",
    ]
    assert [edited(text) for text in changed] == [True, True, True]
