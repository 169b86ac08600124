"""One style for the whole repository: `ruff format` and `ruff check` (the rules in pyproject.toml)
leave nothing to change. Run `ruff format . && ruff check --fix .` before a commit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True)


def test_the_code_is_formatted():
    out = ruff("format", "--check", ".")
    assert out.returncode == 0, f"run `ruff format .`:\n{out.stdout}{out.stderr}"


def test_the_linter_finds_nothing():
    out = ruff("check", ".")
    assert out.returncode == 0, f"run `ruff check --fix .`:\n{out.stdout}{out.stderr}"


def test_the_checks_can_fail(tmp_path):
    (tmp_path / "bad.py").write_text("import os\nx = {  'a':1 }\n")
    assert subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", str(tmp_path)], capture_output=True
    ).returncode
    assert subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", str(tmp_path)], capture_output=True
    ).returncode
