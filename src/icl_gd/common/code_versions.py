"""A job's code version, read from the imports: the checksums of the meaning of the package modules
that a rule's script executes (their syntax trees without docstrings: comments, docstrings and
formatting left out), passed to the rule as a parameter.

Snakemake's code trigger sees a rule's own script, not what it imports; through the params
trigger an edit of a module reruns exactly the jobs whose scripts import it, directly or through
other modules of the package. The modules are found by parsing the source (``ast``), never by
importing it, so the Snakefile stays cheap to read. Two kinds of module are left out on purpose:

- :data:`INFRASTRUCTURE`: how a job runs, not what it computes (atomic writes, the time and
  memory a job took, frame I/O, logging, the warm worker, checksums): an edit there changes no
  result and must rerun nothing;
- :data:`DECIDERS`: what decides a job's parameters (the run spec, a task's resolved spec, its
  preset) reaches the job as a parameter, which the params trigger compares: an edit that changes
  no job's parameters reruns nothing, one that does reruns exactly the jobs it changes. What a
  decider imports to decide is not followed either.

A module of ``report/figures/`` counts as that subpackage whole (one checksum over its files).
Standard library only.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
INFRASTRUCTURE = frozenset(
    {
        "common/atomic",
        "common/frames",
        "common/runtime",
        "common/warm",
        "common/checksums",
        "common/benchmark",
        "activations/work",
    }
)
DECIDERS = frozenset({"config/resolve", "config/validation", "data/presets", "planning/plan"})
WHOLE = ("report/figures",)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, package: Path = PACKAGE) -> set[str]:
    """The package's modules that ``path`` imports (dotted, ``icl_gd.metrics.formulas``), at the top
    or inside a function. ``path`` may lie outside the package (a workflow script): then it has
    absolute imports only. A name imported from a module (``from icl_gd.common.specs import
    TaskSpec``) counts as that module."""
    own = module_name(path, package) if path.is_relative_to(package.parent) else ""
    where = own.split(".") if own else []
    if own and path.name != "__init__.py":
        where = where[:-1]
    found = set()
    for level, module, names in _import_statements(path.read_text()):
        base = where[: len(where) - level + 1] if level else []
        stem = [*base, *(module.split(".") if module else [])]
        found |= {".".join([*stem, name]) for name in names} if level or module else set(names)
    modules = set()
    for name in found:
        parts = name.split(".")
        if parts[0] != package.name:
            continue
        while parts and not (
            (package.parent / Path(*parts)).with_suffix(".py").exists()
            or (package.parent / Path(*parts) / "__init__.py").exists()
        ):
            parts.pop()
        modules.add(".".join(parts))
    return modules - {own}


def _key(dotted: str, package: Path) -> str:
    """``icl_gd.metrics.formulas`` -> ``metrics/formulas``; a module of a subpackage counted whole
    -> that subpackage."""
    path = dotted.removeprefix(package.name + ".").replace(".", "/")
    for whole in WHOLE:
        if path.startswith(whole + "/"):
            return whole
    return path


def _files(module: str, package: Path) -> list[Path]:
    if (package / module).is_dir() and module in WHOLE:
        return sorted((package / module).glob("*.py"))
    path = package / f"{module}.py"
    return [path if path.exists() else package / module / "__init__.py"]


def direct_imports(path: Path, package: Path = PACKAGE) -> set[str]:
    """The package's modules a file imports, as paths under the package (``metrics/formulas``)."""
    return {_key(dotted, package) for dotted in imported(path, package) - {package.name}}


def executed(script: Path, package: Path = PACKAGE) -> set[str]:
    """Every module of the package a script runs: its imports and theirs, a decider's not followed."""
    seen, todo = set(), list(direct_imports(script, package))
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        if module in DECIDERS:
            continue
        for f in _files(module, package):
            todo += [m for m in direct_imports(f, package) if m != module]
    return seen


def code_version(modules, package: Path = PACKAGE) -> dict[str, str]:
    """``{module: the first 16 hex digits of its meaning}`` (:func:`meaning`: the syntax tree, so
    that a comment, a docstring or a reformatting reruns nothing), for modules given as paths under
    the package (``models/builtin``); a subpackage counted whole hashes its files' names and meanings,
    in order."""
    versions = {}
    for module in sorted(modules):
        if module in WHOLE:
            digest = hashlib.sha256()
            for path in _files(module, package):
                digest.update(path.name.encode())
                digest.update(meaning(path).encode())
            versions[module] = digest.hexdigest()[:16]
        else:
            versions[module] = meaning(_files(module, package)[0])[:16]
    return versions


def of_script(script: str | Path, package: Path = PACKAGE, leave_out: tuple[str, ...] = ()) -> dict[str, str]:
    """The code version of a rule whose script is ``script``: what it executes that can change what
    it writes (not infrastructure, not a decider, nor ``leave_out``)."""
    modules = executed(Path(script), package) - INFRASTRUCTURE - DECIDERS - set(leave_out)
    return code_version(modules, package)


def meaning(path: Path) -> str:
    """The sha256 of a module's syntax tree without its docstrings: what the code does, not how it
    is written (comments, docstrings, blank lines and line breaks leave it as it is)."""
    return _meaning_of(path.read_text())


# The Snakefile asks for every rule's code version, and each script reaches dozens of the same
# modules: each text is parsed once per process (keyed by the text, so an edited file is read anew).
@functools.cache
def _import_statements(text: str) -> tuple[tuple[int, str | None, tuple[str, ...]], ...]:
    """Every import of a module's text, at the top or inside a function: (level, module, names);
    a plain ``import a.b`` is (0, None, ("a.b",))."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Import):
            found.append((0, None, tuple(alias.name for alias in node.names)))
    return tuple(found)


@functools.cache
def _meaning_of(text: str) -> str:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()
