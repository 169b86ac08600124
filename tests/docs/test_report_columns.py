"""Every shipped report carries what today's code writes for its config (issue 82, item 4): a
report rendered before a column joined the premise or the claims table (a new reading, a new
verdict) fails here, so that it cannot fall behind the code unnoticed. A report known to be older
is marked so by name, strictly: once it is rerun, the mark fails until it is taken off."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from icl_gd.common.names import method_label
from icl_gd.config import validation
from icl_gd.report import claim_wording, premise_table

REPO = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
CONFIGS = [REPO / "config.yaml", *sorted((REPO / "configs").glob("*.yaml"))]
# a shipped report rendered before today's columns, with why: its column test is then a strict xfail,
# so that the mark must come off when it is rerun (issue 82 reran the protocol reports at cf5b623)
OLDER: dict[str, str] = {}


def shipped_reports() -> list[tuple[str, Path]]:
    """(report folder, its config) of every shipped config that renders the claims into reports/."""
    found = []
    for path in CONFIGS:
        config = validation.validate(yaml.safe_load(path.read_text()), SCHEMA)
        folder = config["report"]["dir"]
        if config["report"]["reproduction"] and folder.split("/")[0] == "reports":
            found.append((folder, path))
    return found


def missing_columns(folder: Path, config: dict) -> list[str]:
    """The columns today's code writes for ``config`` that the report in ``folder`` lacks: the premise
    table's own (``premise_table.PREMISE_COLUMNS``) and finetuning's side per method of the trained
    variant, and the claims table's readings over the tasks where the model, and finetuning, learn."""
    if not (folder / "tables" / "premise.csv").exists():
        return ["premise.csv: the whole table"]
    premise = set(pd.read_csv(folder / "tables" / "premise.csv", nrows=0).columns)
    wanted = list(premise_table.PREMISE_COLUMNS)
    for method in config["variants"].get("trained", []):
        name = method_label(method)
        wanted += [f"FT - ZSL ({name})", f"FT - ZSL ({name}) low", f"FT - ZSL ({name}) high", f"FT learns ({name})"]
    claims = set(pd.read_csv(folder / "tables" / "claims.csv", nrows=0).columns)
    missing = [f"premise.csv: {c}" for c in wanted if c not in premise]
    return missing + [f"claims.csv: {c}" for c in (claim_wording.AGAIN, claim_wording.BOTH) if c not in claims]


@pytest.mark.parametrize(
    "folder, config_path",
    [
        pytest.param(
            folder,
            path,
            id=folder,
            marks=[pytest.mark.xfail(strict=True, reason=OLDER[folder])] if folder in OLDER else [],
        )
        for folder, path in shipped_reports()
    ],
)
def test_a_shipped_report_has_every_column_todays_code_writes(folder, config_path):
    config = validation.validate(yaml.safe_load(config_path.read_text()), SCHEMA)
    missing = missing_columns(REPO / folder, config)
    assert not missing, (
        f"{folder} lacks what today's code writes for {config_path.name}: {missing}; rerun it from a clean clone "
        f"(snakemake --cores all --configfile {config_path.relative_to(REPO)}) and ship its report"
    )


def test_the_check_finds_a_column_a_report_lacks(tmp_path):
    """The case built to fail: the default report with its novel-words column cut out of the premise
    table and the both-learn verdict out of the claims table."""
    config = validation.validate(yaml.safe_load((REPO / "config.yaml").read_text()), SCHEMA)
    (tmp_path / "tables").mkdir()
    premise = pd.read_csv(REPO / "reports/tables/premise.csv")
    premise.drop(columns=["ICL, novel label words (%)"]).to_csv(tmp_path / "tables/premise.csv", index=False)
    claims = pd.read_csv(REPO / "reports/tables/claims.csv")
    claims.drop(columns=[claim_wording.BOTH]).to_csv(tmp_path / "tables/claims.csv", index=False)
    assert missing_columns(REPO / "reports", config) == []
    assert missing_columns(tmp_path, config) == [
        "premise.csv: ICL, novel label words (%)",
        f"claims.csv: {claim_wording.BOTH}",
    ]
    assert {folder for folder, _ in shipped_reports()} >= {"reports", "reports/reader-protocol", *OLDER}
    assert missing_columns(tmp_path / "elsewhere", config) == ["premise.csv: the whole table"]
