"""benchmarks/gpu_check.sh, the one command that measures a lent GPU, and its Python half: what can
be checked without a GPU (the script parses, its wheel list carries the versions the project is
tested with, its tiny config validates, the grid's failed jobs are told from those stopped at the
limit and their records moved aside)."""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

import yaml

from icl_gd.config import validation
from tests import benchmark_scripts

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks/gpu_check.sh"


def _gpu_check():
    return benchmark_scripts.load("gpu_check")


def test_the_script_parses_and_documents_itself():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    out = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--download" in out.stdout and "--tiny" in out.stdout


def test_the_wheels_are_the_tested_versions():
    gpu_check = _gpu_check()
    listed = gpu_check.wheel_list()
    assert "snakemake" in listed and "transformers" in listed and "jsonschema" in listed
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, _, version = line.strip().partition("==")
            pins[gpu_check.norm(name)] = version
    differ = {name: (version, pins[name]) for name, (version, _) in listed.items() if pins.get(name) != version}
    assert not differ, f"gpu_wheels.txt against constraints.txt: {differ}"
    image = {gpu_check.norm(n) for n in gpu_check.IMAGE}
    assert "torch" in image and "snakemake" not in image


def test_the_tiny_config_validates():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    tiny = yaml.safe_load((REPO / "benchmarks/gpu_check_tiny.yaml").read_text())
    bench = yaml.safe_load((REPO / "configs/benchmark-1.3b.yaml").read_text())
    assert tiny["variants"] == bench["variants"] and tiny["methods"] == bench["methods"]
    validation.validate(tiny, schema)


def test_the_cost_device_is_one_the_schema_offers(capsys):
    gpu_check = _gpu_check()
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    for name in ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "something else"):
        gpu_check.cost_device(argparse.Namespace(gpu=name))
        assert capsys.readouterr().out.strip() in schema["properties"]["cost_device"]["enum"]


LOG = """\
[Fri Nov 27 01:17:49 2026]
rule finetune_and_extract:
[Fri Nov 27 01:18:10 2026]
Finished jobid: 110 (Rule: extract_zsl)
[Fri Nov 27 01:18:15 2026]
Error in rule finetune_and_extract:
    message: None
    jobid: 12
    log: results/logs/extract/m/trained/sst2/seed2/gd_linearized.log, \
results/benchmarks/extract/m/trained/sst2/seed2/gd_linearized.tsv (check log file(s) for error details)
[Fri Nov 27 01:18:20 2026]
Finished jobid: 127 (Rule: extract_base)
[Fri Nov 27 01:20:00 2026]
Error in rule extract_base:
    jobid: 13
    log: results/logs/extract/m/trained/sst2/seed2/icl.log, \
results/benchmarks/extract/m/trained/sst2/seed2/icl.tsv (check log file(s) for error details)
"""


def test_failed_and_stopped_jobs_leave_the_records(tmp_path, capsys):
    gpu_check = _gpu_check()
    run = "extract/m/trained/sst2/seed2"
    for name, text in [
        (f"results/logs/{run}/gd_linearized.log", "Traceback\nRuntimeError: expected mat1 and mat2 to match\n"),
        (f"results/benchmarks/{run}/gd_linearized.tsv", "s\n1.0\n"),
        (f"results/benchmarks/{run}/icl.tsv", "s\n1.0\n"),
        (f"results/benchmarks/{run}/zsl.tsv", "s\n1.0\n"),
        (f"results/benchmarks/{run}/empty.tsv", ""),
    ]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "grid.txt").write_text(LOG)
    limit = time.mktime(time.strptime("Fri Nov 27 01:19:00 2026", "%a %b %d %H:%M:%S %Y"))
    gpu_check.failed(argparse.Namespace(log=str(tmp_path / "grid.txt"), workdir=str(tmp_path), before=limit))
    out = capsys.readouterr().out
    assert "finished jobs: 2 (extract_zsl 1, extract_base 1)" in out
    assert "failed jobs: 1; stopped at the time limit: 1" in out
    assert "1 x finetune_and_extract gd_linearized: RuntimeError: expected mat1 and mat2 to match" in out
    left = sorted(p.name for p in (tmp_path / "results/benchmarks").rglob("*.tsv"))
    aside = sorted(p.name for p in (tmp_path / "results/benchmarks_failed").rglob("*.tsv"))
    assert left == ["zsl.tsv"] and aside == ["empty.tsv", "gd_linearized.tsv", "icl.tsv"]
