"""The report stage picks tables and figures by output name and writes every format."""

import numpy as np
import pandas as pd

from icl_gd import report, scoring

METRICS = ["acc_zsl", "acc_icl", "acc_ft", "jaccard_all", "jaccard_correct", "jaccard_incorrect",
           "simaou", "simaou_norm", "simam_after", "simam_delta"]


def _runs():
    rng = np.random.default_rng(0)
    rows = []
    for variant, methods in {"trained": ["gd", "lcgd"], "untrained": ["gd"]}.items():
        for task in ("sst2", "cb"):
            for seed in (1, 2):
                for method in methods:
                    for metric in METRICS:
                        layers = [pd.NA] if metric.startswith(("acc", "jaccard")) else [0, 1, pd.NA]
                        rows += [dict(model="m", variant=variant, task=task, seed=seed, method=method,
                                      metric=metric, layer=layer, value=float(rng.uniform())) for layer in layers]
    return scoring.tidy(pd.DataFrame(rows))


def test_write_tables_and_figures(tmp_path):
    runs = _runs()
    summary = scoring.aggregate(runs)
    runs.to_parquet(tmp_path / "runs.parquet")
    summary.to_parquet(tmp_path / "summary.parquet")
    tables = [str(tmp_path / f"t/{name}.{ext}") for name in ("accuracy", "methods", "variants") for ext in ("md", "tex", "csv")]
    report.write_tables(str(tmp_path / "summary.parquet"), tables, model="m", methods=["gd", "lcgd"], variant="trained", n_seeds=3)
    for path in tables:
        assert (tmp_path / path).stat().st_size > 0
    methods_md = (tmp_path / "t/methods.md").read_text()
    assert "LCGD" in methods_md and "of 3 seeds" in methods_md  # 2 of 3 configured seeds ran
    cell = summary.query("variant == 'trained' and task == 'cb' and method == 'lcgd' and metric == 'simam_delta' and layer.isna()")
    assert f"{cell['mean'].item():.2f}" in methods_md
    figures = [str(tmp_path / f"f/{name}.{ext}") for name in ("per_layer", "accuracy") for ext in ("png", "pdf")]
    report.write_figures(str(tmp_path / "runs.parquet"), str(tmp_path / "summary.parquet"), figures,
                         model="m", methods=["gd", "lcgd"], variant="trained")
    for path in figures:
        assert (tmp_path / path).stat().st_size > 1000
