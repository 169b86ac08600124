"""Shipped reports that can be rebuilt (issue 71, item 2): no first page under reports/ names software
that ran from a working tree with uncommitted changes, since no commit holds the code that made
those numbers. A report is shipped from a clean clone of a commit on main."""

from __future__ import annotations

from pathlib import Path

import pytest

from icl_gd.common import provenance

REPO = Path(__file__).resolve().parents[2]
FIRST_PAGES = sorted((REPO / "reports").glob("**/summary.md")) + sorted((REPO / "reports").glob("**/summary.rst"))


def dirty_lines(text: str) -> list[str]:
    """The lines of a first page that name a dirty working tree, in the words ``provenance.describe``
    uses for one (the summary's sentence about such records uses them too)."""
    marker = provenance.describe({"commit": "0" * 40, "clean": False}).rsplit("(", 1)[1].rstrip(")")
    return [line for line in text.splitlines() if marker in line]


def test_there_are_first_pages_to_check():
    names = {p.parent.relative_to(REPO).as_posix() for p in FIRST_PAGES}
    assert {"reports", "reports/smollm2-protocol", "reports/gemma3-protocol", "reports/reader-protocol"} <= names


@pytest.mark.parametrize("page", FIRST_PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_shipped_first_page_names_uncommitted_changes(page):
    lines = dirty_lines(page.read_text())
    assert not lines, (
        f"{page.relative_to(REPO)} names caches made from uncommitted changes, which no commit can rebuild; "
        "rerun its config from a clean clone of a commit on main and ship that report:\n" + "\n".join(lines)
    )


def test_the_check_can_fail():
    dirty = {"python": "3.11.7", "commit": "a0290f0fba" + "0" * 30, "clean": False}
    clean = {**dirty, "clean": True}
    page = f"## Software\n\n- {provenance.describe(clean)}\n- {provenance.describe(dirty)}\n"
    assert dirty_lines(page) == [f"- {provenance.describe(dirty)}"]
    assert dirty_lines(f"Caches made with {provenance.describe(clean)}.") == []
