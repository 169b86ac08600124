"""The package's layering: each subpackage's ``__init__`` says what it may import ("May import:"),
and every module keeps to it, at the top or inside a function; the stages import one way, with no
cycle; every module lies in a stage's subpackage, and no two share a file name; a metric or report
job loads no model code; docs/workflow.md's module table lists every module."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from icl_gd.common.code_versions import imported, module_name

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "icl_gd"
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())


def allowed(subpackage: str) -> set[str]:
    """What a subpackage's docstring lets it import: the names on its "May import:" line."""
    doc = ast.get_docstring(ast.parse((PACKAGE / subpackage / "__init__.py").read_text())) or ""
    line = re.search(r"^May import:(.*)$", doc, re.M)
    assert line, f"icl_gd/{subpackage}/__init__.py: its docstring has no 'May import:' line"
    if "nothing" in line.group(1):
        return set()
    return set(re.findall(r"``([\w.]+)``", line.group(1)))


def owner(module: str) -> str:
    """``icl_gd.metrics.formulas`` -> ``metrics``."""
    return module.split(".")[1] if module.count(".") else module


def modules_of(subpackage: str) -> list[Path]:
    return sorted((PACKAGE / subpackage).rglob("*.py"))


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_every_module_imports_only_what_its_subpackage_may(subpackage):
    may = allowed(subpackage)
    wrong = []
    for path in modules_of(subpackage):
        for target in sorted(imported(path)):
            if target == "icl_gd":
                wrong.append(f"{module_name(path)} imports the package's root")
                continue
            target_owner = owner(target)
            rel = target.removeprefix("icl_gd.")
            if target_owner == subpackage or target_owner in may or rel in may:
                continue
            wrong.append(f"{module_name(path)} imports {target}")
    assert not wrong, f"icl_gd/{subpackage} may import only {sorted(may) or 'nothing'}: " + "; ".join(wrong)


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_a_subpackage_init_imports_nothing(subpackage):
    tree = ast.parse((PACKAGE / subpackage / "__init__.py").read_text())
    assert not [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
    ]


def test_the_stages_import_one_way():
    """The subpackages' permissions form a chain with no cycle: some order puts every subpackage
    after all it may import (common, data, config, models, activations, metrics, planning, report)."""
    graph = {s: {owner("icl_gd." + a) for a in allowed(s)} for s in SUBPACKAGES}
    order, left = [], dict(graph)
    while left:
        ready = sorted(s for s, needs in left.items() if needs <= set(order))
        assert ready, f"a cycle among {sorted(left)}: {left}"
        order += ready
        for s in ready:
            del left[s]
    assert order == ["common", "data", "config", "models", "activations", "metrics", "planning", "report"]


def test_no_module_imports_in_a_cycle():
    graph = {module_name(p): imported(p) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    done: set[str] = set()

    def visit(node, path):
        assert node not in path, f"an import cycle: {' -> '.join([*path[path.index(node) :], node])}"
        if node in done:
            return
        for target in graph.get(node, ()):
            visit(target, [*path, node])
        done.add(node)

    for module in graph:
        visit(module, [])


def test_every_module_is_in_a_stage_and_no_two_share_a_file_name():
    """A module's file name says what it holds within its stage, once: ``planning/plan.py``, not a
    ``plan.py`` at the package's top, and no second ``extract.py`` or ``disk.py`` elsewhere."""
    assert [p.name for p in PACKAGE.glob("*.py")] == ["__init__.py"]
    modules = [p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"]
    names = [p.name for p in modules]
    shared = sorted({str(p.relative_to(PACKAGE)) for p in modules if names.count(p.name) > 1})
    assert not shared, f"modules that share a file name: {shared}"


def test_a_metric_or_report_job_loads_no_model_code():
    modules = [module_name(p) for s in ("metrics", "report") for p in modules_of(s) if p.name != "__init__.py"]
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(PACKAGE.parent), "HF_HUB_OFFLINE": "1", "PATH": ""},
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_the_checks_can_fail(tmp_path):
    # a module that imports upward is found, relative or absolute, at the top or in a function
    package = tmp_path / "icl_gd"
    for name in ("data", "metrics", "report"):
        (package / name).mkdir(parents=True)
        (package / name / "__init__.py").write_text("")
    (package / "metrics" / "formulas.py").write_text("")
    (package / "report" / "tables.py").write_text("")
    probe = package / "data" / "probe.py"
    probe.write_text("from ..metrics import formulas\n\ndef f():\n    from icl_gd.report import tables\n")
    assert imported(probe, package) == {"icl_gd.metrics.formulas", "icl_gd.report.tables"}
    assert allowed("common") == set() and "activations.cache" in allowed("metrics")


def test_the_module_table_lists_every_module():
    """docs/workflow.md's table of modules names each module by its path under icl_gd/."""
    text = (REPO / "docs" / "workflow.md").read_text()
    listed = set(re.findall(r"^\| `([\w/]+)(?:\.py|/)`", text, re.M))
    listed |= {
        m
        for line in text.splitlines()
        if line.startswith("| `")
        for m in re.findall(r"`([\w/]+)(?:\.py|/)`", line.split("|")[1])
    }
    on_disk = {
        p.relative_to(PACKAGE).with_suffix("").as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.name != "__init__.py" and "figures" not in p.parts
    } | {"report/figures"}
    assert listed == on_disk, (
        f"docs/workflow.md's module table: missing {sorted(on_disk - listed)}, stale {sorted(listed - on_disk)}"
    )
