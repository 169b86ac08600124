"""A job's benchmark record (icl_gd.common.benchmark): written by the job itself at its exit, in
place and in the warm worker alike, with the memory, CPU and time the job took, and kept when the
job fails."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from icl_gd.common import benchmark, warm
from tests.unit.common.test_warm import client, script, server  # noqa: F401  (server: a fixture)

# ~200 MB touched page by page and a second of CPU: far above what the bare interpreter takes
BODY = """
from icl_gd.common.runtime import log_to
log_to(sys.argv[1] + ".log", threads=1, benchmark=sys.argv[1])
import time
block = bytearray(200 * 2**20)
for i in range(0, len(block), 4096):
    block[i] = 1
end = time.process_time() + 1.0
while time.process_time() < end:
    pass
if len(sys.argv) > 2:
    raise RuntimeError("the job failed")
"""


def _check(record: dict, warm_: bool) -> None:
    assert set(record) == set(benchmark.COLUMNS)
    assert record["max_rss"] >= 200, record  # the high-water mark saw the whole block
    assert 1.0 <= record["cpu_time"] <= record["s"] * 1.5 + 0.5, record
    # in percent of one core, as Snakemake's: the spin keeps one core busy (less where other
    # processes share the cores, as when a model run goes on beside the tests)
    assert record["s"] < 30 and 10 <= record["mean_load"] <= 150, record
    assert record["mean_load"] == pytest.approx(100 * record["cpu_time"] / record["s"], rel=0.02), record
    assert record["warm"] == int(warm_) and record["gpu_max_mb"] == 0 and record["threads"] == 1


def test_a_job_run_in_place_records_what_it_took(tmp_path):
    job = script(tmp_path, BODY)
    done = client(None, job, str(tmp_path / "in_place.tsv"))
    assert done.returncode == 0, done.stderr
    _check(benchmark.read(tmp_path / "in_place.tsv"), warm_=False)


def test_a_job_run_in_the_warm_worker_records_its_own_process_not_the_client(server, tmp_path):  # noqa: F811
    job = script(tmp_path, BODY)
    done = client(server, job, str(tmp_path / "warm.tsv"))
    assert done.returncode == 0, done.stderr
    _check(benchmark.read(tmp_path / "warm.tsv"), warm_=True)


@pytest.mark.parametrize("in_worker", [False, True])
def test_a_failed_job_leaves_its_record(server, tmp_path, in_worker):  # noqa: F811
    job = script(tmp_path, BODY)
    done = client(server if in_worker else None, job, str(tmp_path / "failed.tsv"), "fail")
    assert done.returncode == 1
    assert "the job failed" in (tmp_path / "failed.tsv.log").read_text()
    _check(benchmark.read(tmp_path / "failed.tsv"), warm_=in_worker)


def test_the_clock_starts_once_per_job(monkeypatch):
    monkeypatch.delenv(benchmark.START_ENV, raising=False)
    benchmark.stamp_start()
    first = benchmark.started()
    benchmark.stamp_start()
    assert benchmark.started() == first
    record = benchmark.measure(first - 10.0)
    assert record["s"] >= 10 and record["h:m:s"].startswith("0:00:1")
    assert record["started"] == round(first - 10.0, 3)  # where the job lay in the run, with s


def test_a_job_notes_its_work_as_further_columns(tmp_path, monkeypatch):
    monkeypatch.setattr(benchmark, "_NOTES", {})
    benchmark.note(gflop=12.5)
    benchmark.write(tmp_path / "r.tsv", {**benchmark.measure(benchmark.started()), **benchmark._NOTES})
    header = (tmp_path / "r.tsv").read_text().splitlines()[0].split("\t")
    assert header == [*benchmark.COLUMNS, "gflop"] and benchmark.read(tmp_path / "r.tsv")["gflop"] == 12.5


def test_no_path_writes_nothing(tmp_path):
    benchmark.record_at_exit(None)
    benchmark.record_at_exit("")
    assert not list(tmp_path.iterdir())


def test_a_snakemake_benchmark_file_reads_too(tmp_path):
    path = tmp_path / "snakemake.tsv"
    path.write_text(
        "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
        "12.5\t0:00:12\t300.1\t900\t250\t260\t1.0\t2.0\t95.0\t11.9\n"
    )
    record = benchmark.read(path)
    assert record["s"] == 12.5 and record["max_rss"] == 300.1 and record["h:m:s"] == "0:00:12"


def test_the_warm_client_stamps_the_start_before_handing_over(monkeypatch):
    monkeypatch.delenv(benchmark.START_ENV, raising=False)
    monkeypatch.delenv(warm.SOCKET_ENV, raising=False)
    warm.delegate()  # no worker: returns, and the job runs in place with its clock started
    assert float(os.environ[benchmark.START_ENV]) > 0


def _timeline():
    path = Path(__file__).resolve().parents[3] / "benchmarks/timeline.py"
    spec = importlib.util.spec_from_file_location("timeline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_timeline_places_each_rule_from_its_jobs_records(tmp_path):
    """benchmarks/timeline.py: per rule, its first start and last end after the run's first job,
    and its jobs' seconds and CPU; a record from before the started column by its file's time."""
    root = tmp_path / "results/benchmarks"
    t0 = 1_700_000_000.0

    def job(rel: str, started: float | None, s: float, cpu: float) -> None:
        record = {**benchmark.measure(t0), "s": s, "cpu_time": cpu, "started": started}
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if started is None:  # a record written before the column existed
            del record["started"]
            (root / rel).write_text("\t".join(record) + "\n" + "\t".join(map(str, record.values())) + "\n")
        else:
            benchmark.write(root / rel, record)

    job("prepare_task/sst2.tsv", t0, 1.0, 0.5)
    job("prepare_task/cb.tsv", t0 + 0.5, 2.0, 1.5)
    job("extract/tiny/trained/sst2/seed2/zsl.tsv", t0 + 3.0, 4.0, 3.0)
    job("aggregate_metrics.tsv", None, 1.5, 1.0)
    os.utime(root / "aggregate_metrics.tsv", (t0 + 9.0, t0 + 9.0))  # exited at 9 s: started at 7.5
    phases = _timeline().phases(root)
    assert [(p.rule, p.jobs, p.first_start, p.last_end, p.job_s, p.cpu_s) for p in phases] == [
        ("prepare_task", 2, 0.0, 2.5, 3.0, 2.0),
        ("extract", 1, 3.0, 7.0, 4.0, 3.0),
        ("aggregate_metrics", 1, 7.5, 9.0, 1.5, 1.0),
    ]
