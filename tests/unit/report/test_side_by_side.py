"""Several models' reports side by side (icl_gd.report.side_by_side), on report folders the tests write."""

from __future__ import annotations

import pandas as pd
import pytest

from icl_gd.metrics.premise import NO_TASK
from icl_gd.report import premise_table, side_by_side

CLAIMS = ("ICL beats ZSL", "SimAOU above random", "Order matters")


def _report(folder, verdicts, again, learns=None):
    """A rendered report with the claims' verdicts (and, where ``learns`` is given, a premise table
    with one row per task: whether the model learns in context there)."""
    (folder / "tables").mkdir(parents=True)
    claims = pd.DataFrame(
        {
            "Paper": "003",
            "Table": "Table 1",
            "Claim": CLAIMS,
            "Test": "a > b",
            "Verdict": verdicts,
            side_by_side.AGAIN: again,
        }
    )
    # a claim with two cells b has two rows: read once
    pd.concat([claims, claims.iloc[:1]]).to_csv(folder / "tables" / "claims.csv", index=False)
    if learns is not None:
        rows = []
        for i, (task, learning) in enumerate(learns.items()):
            numbers = dict.fromkeys(premise_table.PREMISE_COLUMNS, "1.0")
            numbers.update(
                {"ICL - ZSL low": f"{10.0 * i - 5}", "ICL - ZSL": f"{10.0 * i}", "ICL - ZSL high": f"{10.0 * i + 5}"}
            )
            numbers.update(
                {
                    "SimAOU_norm low": f"{0.1 * i - 0.05}",
                    "SimAOU_norm": f"{0.1 * i}",
                    "SimAOU_norm high": f"{0.1 * i + 0.05}",
                }
            )
            numbers.update({"Learns in context": "yes" if learning else "no", "ICL's most-predicted label": "x (50%)"})
            rows.append({"Model": folder.name if i == 0 else "", "Task": task, **numbers})
        pd.DataFrame(rows).to_csv(folder / "tables" / "premise.csv", index=False)
    return folder


def test_two_models_side_by_side(tmp_path):
    small = _report(
        tmp_path / "small",
        ["supported", "inconclusive", "not run"],
        [NO_TASK, NO_TASK, "not run"],
        {"SST2": False, "MR": False},
    )
    large = _report(
        tmp_path / "large",
        ["supported (bootstrap-limited)", "contradicted", "inconclusive"],
        ["supported", "supported", "inconclusive"],
        {"SST2": True, "MR": False},
    )
    reports = [side_by_side.read_report(small), side_by_side.read_report(large)]
    table = side_by_side.claims_side_by_side(reports).set_index("Claim")
    assert len(table) == 3
    assert table.loc["ICL beats ZSL", side_by_side.ACROSS] == "the same on every model"
    assert table.loc["ICL beats ZSL", side_by_side.PREMISE] == "unchanged where it learns"
    assert table.loc["SimAOU above random", side_by_side.ACROSS] == "depends on the model"
    assert table.loc["SimAOU above random", side_by_side.PREMISE] == "changes where it learns"
    assert table.loc["Order matters", side_by_side.ACROSS] == "run on one model"
    block = side_by_side.markdown(reports, "figures/premise.png")
    assert "- **small**: learns in context on 0 of 2 tasks" in block
    assert "- **large**: learns in context on 1 of 2 tasks: SST2" in block
    assert "depends on the model 1" in block and "![" in block
    # the block replaces itself in a page and leaves the prose around it
    page = tmp_path / "results.md"
    page.write_text("# Results\n\nProse.\n")
    side_by_side.main([str(small), str(large), "--into", str(page), "--figure", str(tmp_path / "fig" / "premise.png")])
    side_by_side.main([str(small), str(large), "--into", str(page), "--figure", str(tmp_path / "fig" / "premise.png")])
    text = page.read_text()
    assert text.startswith("# Results\n\nProse.\n") and text.count(side_by_side.BEGIN) == 1
    assert "](fig/premise.png)" in text and (tmp_path / "fig" / "premise.png").exists()


def test_a_report_rendered_before_label_following_was_tested_learns_on_no_task(tmp_path):
    """An older report's premise table, without ICL on permuted labels: its model learns in context
    nowhere (ICL above zero-shot does not show that it follows its demonstrations' labels), and the
    line says so and what the older reading found."""
    old = _report(tmp_path / "old", ["supported"] * 3, ["supported"] * 3, {"SST2": True, "MR": False})
    premise = pd.read_csv(old / "tables" / "premise.csv", dtype=str, keep_default_na=False)
    premise.drop(columns=[c for c in premise if "ermuted" in c]).to_csv(old / "tables" / "premise.csv", index=False)
    report = side_by_side.read_report(old)
    assert set(report.premise[side_by_side.LEARNS]) == {"no"}
    assert set(report.premise[side_by_side.FOLLOWS]) == {premise_table.NOT_RUN}
    assert set(report.claims[side_by_side.AGAIN]) == {side_by_side.NOT_TESTED}  # over tasks it no longer grants
    line = side_by_side.premise_line(report)
    assert line.startswith("- **old**: learns in context on 0 of 2 tasks, as whether it follows")
    assert line.endswith("ICL above zero-shot and the majority class on 1: SST2")
    assert len(side_by_side.premise_points([report])) == 2  # the figure still draws its tasks, hollow


def test_a_report_without_the_premise_or_the_claims(tmp_path):
    old = _report(tmp_path / "old", ["supported"] * 3, ["x"] * 3)
    (old / "tables" / "claims.csv").write_text(
        pd.read_csv(old / "tables" / "claims.csv").drop(columns=[side_by_side.AGAIN]).to_csv(index=False)
    )
    report = side_by_side.read_report(old)
    assert report.premise is None and set(report.claims[side_by_side.AGAIN]) == {side_by_side.NOT_TESTED}
    assert "the premise was not tested" in side_by_side.premise_line(report)
    with pytest.raises(ValueError, match="no report has a premise table"):
        side_by_side.premise_points([report])
    with pytest.raises(FileNotFoundError, match="not a rendered report with the papers' claims"):
        side_by_side.read_report(tmp_path / "nothing")


def test_the_brief_form_drops_the_claims_notes_and_says_where_a_reading_differs(tmp_path):
    """The README's short form: a claim's statement without the note the claims table appends, each
    model's verdict, and its verdict where it learns in context only where that differs."""
    from icl_gd.metrics.claim_definitions import CLAIMS as KNOWN

    noted = next(c for c in KNOWN if c.note)
    small = _report(tmp_path / "small", ["supported", "inconclusive", "not run"], [NO_TASK, "supported", "not run"])
    large = _report(tmp_path / "large", ["contradicted (bootstrap-limited)"] * 3, ["contradicted"] * 3, {"SST2": True})
    for folder in (small, large):
        claims = pd.read_csv(folder / "tables" / "claims.csv", dtype=str, keep_default_na=False)
        claims["Claim"] = claims["Claim"].replace(CLAIMS[0], f"{noted.text} ({noted.note})")
        claims.to_csv(folder / "tables" / "claims.csv", index=False)
    page = tmp_path / "README.md"
    page.write_text("# Read me\n")
    side_by_side.main([str(small), str(large), "--into", str(page), "--brief"])
    rows = [line for line in page.read_text().splitlines() if line.startswith("| 003")]
    assert rows[0] == f"| 003 Table 1: {noted.text} | supported; {NO_TASK} | contradicted | depends on the model |"
    assert rows[1].endswith("| inconclusive; where it learns: supported | contradicted | depends on the model |")
    assert rows[2].endswith("| not run | contradicted | run on one model |")
    assert "- **small**: the premise was not tested" in page.read_text()
    with pytest.raises(SystemExit):
        side_by_side.main([str(small), "--brief", "--figure", str(tmp_path / "x.png")])


def test_a_report_at_the_chosen_setting_is_a_column_of_its_own_and_no_second_point(tmp_path):
    reader = _report(tmp_path / "reader", ["supported", "inconclusive", "not run"], ["supported"] * 3, {"SST2": True})
    pd.read_csv(reader / "tables" / "claims.csv", dtype=str).assign(Verdict="contradicted").to_csv(
        reader / "tables" / "claims_chosen.csv", index=False
    )
    reports = [side_by_side.read_report(reader), side_by_side.read_report(f"{reader}:chosen")]
    assert [r.name for r in reports] == ["reader", "reader, GD at its best"]
    table = side_by_side.claims_side_by_side(reports)
    assert list(table["reader, GD at its best: verdict"]) == ["contradicted"] * 3
    assert list(table[side_by_side.ACROSS][:2]) == ["run on one model"] * 2  # the same model, read again
    assert len(side_by_side.premise_points(reports)) == 1  # the same model's premise once
    with pytest.raises(FileNotFoundError, match="claims_chosen.csv is missing"):
        side_by_side.read_report(f"{_report(tmp_path / 'other', ['x'] * 3, ['x'] * 3)}:chosen")
