"""The rerun trigger's grain: each rule's ``code`` parameter (workflow/rules/common.smk) hashes
exactly the package modules its job executes that can change what it writes, so an edit reruns
the jobs that run the edited code and no other (issue 49, item 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.test_layering import imported

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "icl_gd"
RULES = REPO / "workflow" / "rules"
# How a job runs, not what it computes: writing files atomically, recording what a job took (its
# time, memory and counted FLOPs), reading and writing parquet, logging, the warm worker,
# checksums of inputs. An edit of them must rerun nothing.
INFRASTRUCTURE = {
    "common/atomic",
    "common/frames",
    "common/runtime",
    "common/warm",
    "common/checksums",
    "common/benchmark",
    "activations/work",
}
# What decides a job's parameters: what they decide reaches the job as a parameter, which the
# params trigger compares (the run spec, a task's resolved spec, its preset).
DECIDERS = {"config/resolve", "config/validation", "data/presets", "plan"}


def module_path(dotted: str) -> str:
    return dotted.removeprefix("icl_gd.").replace(".", "/")


def file_of(module: str) -> Path:
    path = PACKAGE / f"{module}.py"
    return path if path.exists() else PACKAGE / module / "__init__.py"


def direct_imports(path: Path) -> set[str]:
    """The package's modules a file imports (``test_layering.imported``), as paths under icl_gd/; a
    module of report/figures/ as that subpackage, whose checksum counts it whole."""
    found = set()
    for dotted in imported(path) - {"icl_gd"}:
        parts = module_path(dotted).split("/")
        found.add("/".join(parts[:2] if parts[:2] == ["report", "figures"] else parts))
    return found


def executed(script: Path) -> set[str]:
    """Every module a script runs: its imports and theirs (not a decider's), a subpackage counted whole."""
    seen, todo = set(), list(direct_imports(script))
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        if module in DECIDERS:  # what it decides arrives as a parameter; what it imports to decide, too
            continue
        files = sorted((PACKAGE / module).glob("*.py")) if (PACKAGE / module).is_dir() else [file_of(module)]
        for f in files:
            todo += [m for m in direct_imports(f) if not m.startswith(module + "/")]
    return seen


def code_lists() -> dict[str, set[str]]:
    text = (RULES / "common.smk").read_text()
    lists = {
        name: set(re.findall(r'"([\w/]+)"', args))
        for name, args in re.findall(r"^(\w+_CODE) = code_version\(([^)]*)\)", text, re.M)
    }
    assert lists, "no code_version lists found in common.smk"
    return lists


def rules() -> list[tuple[str, str, str]]:
    """(rule, its script, the name of its code parameter) of every rule with both."""
    found = []
    for smk in sorted(RULES.glob("*.smk")):
        for block in re.split(r"^rule ", smk.read_text(), flags=re.M)[1:]:
            name = block.split(":")[0]
            script = re.search(r'script:\s*\n\s*"\.\./scripts/([\w.]+)"', block)
            code = re.search(r"^\s*code=(\w+),", block, re.M)
            if script and code:
                found.append((name, script.group(1), code.group(1)))
    return found


# Rules whose script runs without a code parameter, and why.
WITHOUT_CODE = {
    "download_model": "a hub download: an edit of the downloader must not fetch a model's gigabytes again",
    "disk_estimate": "writes no file, so it runs whenever it is named",
    "cost_estimate": "declares no output (it measures this machine), so it runs whenever it is named",
}


def test_every_rule_that_runs_a_script_has_a_code_parameter():
    scripted = {
        r
        for smk in RULES.glob("*.smk")
        for r in re.findall(r"^rule (\w+):(?:(?!^rule ).)*?script:", smk.read_text(), re.M | re.S)
    }
    assert scripted - set(WITHOUT_CODE) == {name for name, _, _ in rules()}


@pytest.mark.parametrize("rule, script, code", rules(), ids=lambda x: x if isinstance(x, str) else None)
def test_a_rules_code_parameter_hashes_what_its_job_runs_and_nothing_else(rule, script, code):
    lists = code_lists()
    # prepare_task's code depends on the task: a corpus's parser joins it where the task reads one
    listed = lists["PACKAGE_DATA_CODE"] if code == "data_code" else lists[code]
    runs = executed(REPO / "workflow" / "scripts" / script) - INFRASTRUCTURE - DECIDERS
    assert listed == runs, (
        f"rule {rule}: {code} lists {sorted(listed - runs)} that its job does not run, "
        f"and misses {sorted(runs - listed)} that it does"
    )


def test_the_grain_a_data_statistics_or_claims_text_edit_reruns_no_score():
    lists = code_lists()
    assert "metrics/statistics" not in lists["METRICS_CODE"]
    assert "report/claims_text" not in lists["CLAIMS_CODE"] and "report/claims_text" in lists["REPORT_CODE"]
