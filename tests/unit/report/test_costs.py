"""The report's costs table (icl_gd.report.costs): the jobs' own records summed by rule and
setting, a job without a record counted as missing, never as zero."""

from __future__ import annotations

from icl_gd.common import benchmark
from icl_gd.report import costs, render


def _record(path, seconds, cpu, rss, gpu=0.0, warm=1, gflop=None):
    record = {c: "" for c in benchmark.COLUMNS}
    record.update(s=seconds, max_rss=rss, cpu_time=cpu, gpu_max_mb=gpu, warm=warm)
    if gflop is not None:
        record["gflop"] = gflop
    record["h:m:s"] = "0:00:00"
    benchmark.write(path, record)


def test_rows_sum_each_rules_jobs_and_count_the_missing(tmp_path):
    entries = []
    for i, (seconds, rss) in enumerate([(2.0, 400.0), (4.0, 500.0)]):
        path = tmp_path / f"gd{i}.tsv"
        _record(path, seconds, seconds * 0.9, rss, gpu=100.0 * (i + 1), gflop=1500.0)
        entries.append({"rule": "finetune_and_extract", "setting": "gd", "path": str(path)})
    entries.append({"rule": "finetune_and_extract", "setting": "gd", "path": str(tmp_path / "never_written.tsv")})
    _record(tmp_path / "zsl.tsv", 90.0, 170.0, 300.0, warm=0, gflop=2000.0)
    entries.insert(0, {"rule": "extract_zsl", "setting": "zsl", "path": str(tmp_path / "zsl.tsv")})

    records = costs.read_records(entries)
    assert len(records) == 4 and records["seconds"].isna().sum() == 1
    table = costs.costs_table(records)
    assert list(table.index) == [("extract_zsl", "zsl"), ("finetune_and_extract", "gd"), ("all", "—")]
    zsl, gd, total = (table.loc[i] for i in table.index)
    assert list(gd) == ["3", "2", "3.00 s", "6.00 s", "5.40 s", "500", "200", "3"]
    assert list(zsl) == ["1", "1", "1 min 30 s", "1 min 30 s", "2 min 50 s", "300", "—", "2"]
    assert list(total)[:2] == ["4", "3"] and total["Total wall"] == "1 min 36 s" and total["TFLOP"] == "5"
    notes = " ".join(table.attrs["footnotes"])
    assert "1 of 4 jobs left no record" in notes and "2 of 3 jobs ran in the warm worker" in notes
    # renders as every other table does
    paths = render.write_table_files(table, tmp_path / "costs", "What the run cost.")
    assert "| finetune_and_extract | gd" in paths[0].read_text()


def test_without_counted_flops_the_column_is_left_out(tmp_path):
    _record(tmp_path / "a.tsv", 1.0, 1.0, 10.0)
    table = costs.costs_table(
        costs.read_records([{"rule": "aggregate_metrics", "setting": "", "path": str(tmp_path / "a.tsv")}])
    )
    assert "TFLOP" not in table.columns and table.index[0] == ("aggregate_metrics", "—")
