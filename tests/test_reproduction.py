"""The published numbers (docs/published.csv), the reproduction table and figure, and the claims."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from icl_gd import claims, plan, published, report, tables, validation

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
TASKS = ("sst2", "sst5", "mr", "subj", "agnews", "cb")


def _config(path="configs/paper.yaml", **changes):
    return validation.validate({**yaml.safe_load((ROOT / path).read_text()), **changes}, SCHEMA)


# ------------------------------------------------------------------------ the published file


def test_every_published_row_names_what_the_workflow_computes():
    table = published.read_published(ROOT / "docs/published.csv")
    assert set(table["task"]) == set(TASKS)
    assert set(table[["paper", "table"]].itertuples(index=False, name=None)) == {
        ("001", "Table 1"), ("001", "Table 2"), ("001", "Table 3"), ("003", "Table 1"), ("003", "Table 2"),
        ("003", "Table 3")}
    # every published method is one that configs/paper.yaml runs, matched by what it does
    roles = published.protocol_roles(_config(), list(_config()["methods"]))
    assert set(table["method"]) <= set(roles) and all(roles[m] == m for m in table["method"])
    # the data statistics are columns of the workflow's data statistics
    import inspect

    from icl_gd import scoring
    stats = table[~table["metric"].isin(published.RUN_METRICS)]
    assert set(stats["metric"]) == set(published.DATA_STATISTICS)
    source = inspect.getsource(scoring.data_statistics)
    assert all(f'"{column}":' in source for column in published.DATA_STATISTICS.values())
    # the cells each table prints: 001 Table 1 has no AGNews column, 003 Table 3 is Subj only
    counts = table.groupby(["paper", "table"]).size().to_dict()
    assert counts == {("001", "Table 1"): 30, ("001", "Table 2"): 48, ("001", "Table 3"): 18,
                      ("003", "Table 1"): 36, ("003", "Table 2"): 36, ("003", "Table 3"): 5}


def test_the_published_file_agrees_with_the_protocol_document():
    """Two transcriptions of the same tables (docs/protocol.md section 9 and the CSV) agree."""
    table = published.read_published(ROOT / "docs/published.csv")
    text = (ROOT / "docs/protocol.md").read_text().split("## 9. The published numbers")[1]
    value = {(r.paper, r.table, r.task, r.variant, r.method, r.metric): r.value for r in table.itertuples()}
    rows = re.findall(r"^\| (agnews|cb|mr|sst2|sst5|subj) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    assert len(rows) == 6
    for task, *cells in rows:
        for (method, metric), cell in zip([("gd", "simaou_norm"), ("lcgd", "simaou_norm"), ("gd", "simam_delta"),
                                           ("lcgd", "simam_delta")], cells):
            assert value["001", "Table 2", task, "trained", method, metric] == float(cell), (task, method, metric)
        assert abs(value["003", "Table 2", task, "trained", "gd", "simaou_random"] - float(cells[4])) <= 5e-4 + 1e-12, task
    accuracy = re.findall(r"^\| (CB|SST2|SST5|Subj|MR|AGNews) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    assert len(accuracy) == 6
    for task, *cells in accuracy:
        for metric, cell in zip(("acc_zsl", "acc_ft", "acc_icl", "jaccard_all"), cells):
            assert value["003", "Table 1", task.lower(), "trained", "gd", metric] == float(cell), (task, metric)


@pytest.mark.parametrize("line, error", [
    ("001,Table 1,sst2,trained,gd,simaoux,0.05,0.01,score,m,", r"line 2: metric 'simaoux' is not one of"),
    ("001,Table 1,imdb,trained,gd,simaou,0.05,0.01,score,m,", r"line 2: task 'imdb'"),
    ("001,Table 1,sst2,trained,sgd,simaou,0.05,0.01,score,m,", r"line 2: method 'sgd'"),
    ("001,Table 1,sst2,trained,gd,simaou,high,0.01,score,m,", r"line 2: value 'high' is not a number"),
])
def test_a_bad_published_row_is_named_with_its_line(tmp_path, line, error):
    path = tmp_path / "p.csv"
    path.write_text(",".join(published.COLUMNS) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=error):
        published.read_published(path)
    path.write_text(",".join(published.COLUMNS) + "\n" + ("001,Table 1,sst2,trained,gd,simaou,0.05,,score,m,\n" * 2))
    with pytest.raises(ValueError, match="cells given twice"):
        published.read_published(path)


# ------------------------------------------------------------------------ reproduction


def _summary(rows):
    """A hand-made summary table: (variant, task, method, metric, mean[, ci half-width])."""
    out = []
    for variant, task, method, metric, mean, *half in rows:
        h = half[0] if half else 0.02
        out.append(dict(model="m", variant=variant, task=task, method=method, metric=metric, layer=pd.NA,
                        mean=mean, std=np.nan, n=1, ci_low=mean - h, ci_high=mean + h))
    return pd.DataFrame(out)


def _published(tmp_path, lines):
    path = tmp_path / "published.csv"
    path.write_text(",".join(published.COLUMNS) + "\n" + "\n".join(lines) + "\n")
    return published.read_published(path)


def test_reproduction_matches_methods_by_what_they_do_and_reads_the_published_unit(tmp_path):
    table = _published(tmp_path, [
        "001,Table 2,sst2,trained,lcgd,simaou_norm,0.22,0.01,score,fairseq 1.3B,",
        "003,Table 1,sst2,trained,gd,acc_icl,92.7,,percent,fairseq 1.3B,",
        "003,Table 1,cb,trained,gd,acc_icl,50,,percent,fairseq 1.3B,",
        "003,Table 3,subj,trained,lcgd_clip,simaou_norm,0.3480,,score,fairseq 1.3B,",
    ])
    config = _config("config.yaml", methods={"plain": {"kind": "gd"}, "causal": {"kind": "lcgd"},
                                             "fast": {"kind": "lcgd", "lr_scale": 2.0}},
                     variants={"trained": ["plain", "causal", "fast"]}, statistics={"baseline_method": "plain"})
    roles = published.protocol_roles(config, list(config["methods"]))
    assert roles == {"gd": "plain", "lcgd": "causal"}  # 'fast' trains at another rate: not the paper's LCGD
    summary = _summary([("trained", "sst2", "causal", "simaou_norm", 0.25, 0.02),   # 0.22 outside [0.23, 0.27]
                        ("trained", "sst2", "plain", "acc_icl", 0.90, 0.03),       # 92.7 inside [87, 93]
                        ("trained", "cb", "plain", "acc_icl", 0.45, 0.04)])        # "50": 49.5-50.5, outside [41, 49]
    cells = published.reproduction(table, summary, "m", roles)
    assert list(cells["task"]) == ["sst2", "sst2", "cb"]  # the clipped cell: not run
    assert list(cells["within"]) == [False, True, False]
    assert cells["mean"].tolist() == pytest.approx([0.25, 90.0, 45.0])
    assert cells["difference"].tolist() == pytest.approx([0.03, 90.0 - 92.7, 45.0 - 50.0])
    # a printed value is within when it is within half its last digit
    summary.loc[0, "ci_low"] = 0.2249  # "0.22" stands for 0.215-0.225
    assert published.reproduction(table, summary, "m", roles)["within"].iloc[0]
    shown = tables.reproduction_table(cells, n_published=4)
    md = tables.to_markdown(shown)
    assert "| 001 Table 2 | SimAOU_norm" in md and "LCGD, trained (run: causal)" in md
    assert "0.22 ± 0.01" in md and "92.7" in md and "90.0 [87.0, 93.0]" in md
    assert "Cells covered: 3 of 4 published result cells" in md and ": 1 of 3." in md


# ------------------------------------------------------------------------ claims


def _lcgd_summary(lcgd_minus_gd):
    rows = []
    for task, d in zip(TASKS, lcgd_minus_gd):
        rows += [("trained", task, "gd", "simaou_norm", 0.20), ("trained", task, "lcgd", "simaou_norm", 0.20 + d)]
    return _summary(rows)


def _verdict(claim_id, summary, roles={"gd": "gd", "lcgd": "lcgd"}, comparisons=None):
    claim = next(c for c in claims.CLAIMS if c.id == claim_id)
    return claims.evaluate(claim, summary, comparisons, "m", roles)


def test_a_claim_comes_out_supported_or_not_by_the_run():
    every = "001-T2-simaou-norm"  # LCGD's SimAOU_norm above GD's on every task
    assert _verdict(every, _lcgd_summary([0.1] * 6))["verdict"] == "supported"
    one_lower = _verdict(every, _lcgd_summary([0.1, 0.1, -0.05, 0.1, 0.1, 0.1]))
    assert one_lower["verdict"] == "not supported" and "5 of 6 tasks" in one_lower["statistic"]
    assert "MR -0.05" in one_lower["statistic"]
    # 003 says 5 of 6: the same run supports it
    assert _verdict("003-T2-simaou", _lcgd_summary([0.1, 0.1, -0.05, 0.1, 0.1, 0.1]))["verdict"] == "supported"
    assert _verdict("003-T2-simaou", _lcgd_summary([0.1, -0.1, -0.05, 0.1, 0.1, 0.1]))["verdict"] == "not supported"
    # without layer-causal GD in the run, nothing to test
    assert _verdict(every, _lcgd_summary([0.1] * 6), roles={"gd": "gd"})["verdict"] == "not run"


def test_claims_with_exceptions_constants_several_baselines_and_paired_tests():
    rows = []
    for task, d in zip(TASKS, (0.1, 0.1, 0.1, 0.1, -0.2, 0.1)):
        rows += [("trained", task, "gd", "simam_delta", 0.2), ("trained", task, "lcgd", "simam_delta", 0.2 + d),
                 ("untrained", task, "gd", "simam_delta", 0.25), ("trained_embeddings", task, "gd", "simam_delta", 0.1),
                 ("trained", task, "gd", "jaccard_all", 0.3 if task != "cb" else 0.8)]
    summary = _summary(rows)
    assert _verdict("001-T2-simam-delta", summary)["verdict"] == "supported"  # lower on AGNews only: excepted
    both = _verdict("001-T1T2-lcgd-baselines", summary)  # above untrained (0.25) and trained embeddings (0.1)?
    assert both["verdict"] == "not supported" and "SST2 +0.05/+0.20" in both["statistic"]
    jaccard = _verdict("003-T1-jaccard", summary)
    assert jaccard["verdict"] == "supported" and "CB 80.00" in jaccard["statistic"] and "5 of 6" in jaccard["statistic"]
    comparisons = pd.DataFrame([dict(model="m", variant="trained", task=t, method="lcgd", baseline="gd",
                                     metric="simam_delta", p_value=0.01 if t == "sst2" else 0.5) for t in TASKS])
    marked = _verdict("001-T2-simam-delta", summary, comparisons=comparisons)["statistic"]
    assert "SST2 +0.10*" in marked and "SST5 +0.10," in marked


def test_the_claims_table_counts_its_verdicts(tmp_path):
    summary = _lcgd_summary([0.1] * 6)
    table = claims.claims_table(summary, None, "m", {"gd": "gd", "lcgd": "lcgd"})
    assert len(table) == len(claims.CLAIMS) and set(table["Verdict"]) <= set(claims.VERDICTS)
    supported = int((table["Verdict"] == "supported").sum())
    assert supported >= 2 and table.attrs["footnotes"][0].startswith(f"{supported} supported")
    summary.to_parquet(tmp_path / "summary.parquet")
    pd.DataFrame(columns=["model", "variant", "task", "method", "baseline", "metric", "p_value"]).to_parquet(
        tmp_path / "comparisons.parquet")
    report.write_table("claims", {"summary": str(tmp_path / "summary.parquet"),
                                  "comparisons": str(tmp_path / "comparisons.parquet")},
                       str(tmp_path / "claims.md"), model="m", variant="trained", methods=["gd", "lcgd"], n_seeds=1,
                       roles={"gd": "gd", "lcgd": "lcgd"})
    csv = pd.read_csv(tmp_path / "claims.csv")
    assert list(csv.columns) == ["Paper", "Table", "Claim", "Test", "Statistic", "Verdict"]
    assert "not run" in set(csv["Verdict"])  # no untrained variant, no clipping in this run
    assert "\\begin{tabular}" in (tmp_path / "claims.tex").read_text()


def test_the_report_plans_reproduction_unless_switched_off():
    assert plan.tables(_config())[-2:] == ["reproduction", "claims"]
    assert plan.figures(_config())[-1] == "reproduction"
    off = _config(report={"reproduction": False})
    assert "reproduction" not in plan.tables(off) + plan.figures(off) and "claims" not in plan.tables(off)
    assert plan.figure_params(_config(), "reproduction")["roles"] == {m: m for m in _config()["methods"]}
