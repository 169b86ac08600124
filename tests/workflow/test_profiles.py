"""What the profiles ask of each job, read from dry runs: GPUs only for jobs that run on CUDA
locally, and the gpu cap shared out over the GPUs; through profiles/slurm, a GPU of its own and a
partition for each extraction, grouped per model variant, and a plan even on a machine without
SLURM."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import math  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

from icl_gd.config import resolve as cfg  # noqa: E402
from tests.workflow.test_workflow import TINY  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile")]
GPU_RULES = {"extract_zsl", "extract_base", "finetune_and_extract"}
CPU_RULES = {"build_builtin_model", "make_variant"}
# Two variants of one task and seed: per variant zsl, icl and gd extractions. No claims and no
# premise (their settings and the local jobs that read them): what these tests check is how the
# model jobs are grouped and sent to a cluster, and the SLURM run waits on every job it has.
CONFIG = {
    **TINY,
    "variants": {"trained": ["gd"], "untrained": ["gd"]},
    "tasks": {"sst2": {"source": "synthetic"}},
    "n_seeds": 1,
    "report": {"reproduction": False},
}


def plan(
    workdir: Path, *args: str, env: dict | None = None, config: dict = CONFIG
) -> tuple[dict[str, list[set[str]]], dict[str, list[str]]]:
    """A dry run of ``config``: rule -> its jobs' resources (as 'name=value' sets), and group job ->
    its jobs' rules."""
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    cmd = [*SNAKEMAKE, "-n", "--directory", str(workdir), "--configfile", str(workdir / "config.yaml"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    resources, groups = {}, {}
    rule = group = None
    for line in proc.stdout.splitlines():
        if match := re.match(r".*Group job (\S+) ", line):
            group = match.group(1)
            groups[group] = []
        elif match := re.match(r"(\s*)(?:local)?(?:rule|checkpoint) (\w+):", line):
            rule = match.group(2)
            if not match.group(1):
                group = None
            elif group:
                groups[group].append(rule)
        elif match := re.match(r"\s+resources: (.*)", line):
            resources.setdefault(rule, []).append(set(match.group(1).split(", ")))
    return resources, groups


def test_model_jobs_ask_for_a_gpu_only_where_they_run_on_cuda(tmp_path):
    for device, gpu in (("cpu", "gpu=0"), ("cuda", "gpu=1")):
        resources, groups = plan(tmp_path, "--config", f"device={device}")
        # the built-in model pretrains on the GPU where the extractions run there
        for rule in GPU_RULES | {"build_builtin_model"}:
            assert all(gpu in r for r in resources[rule]), (device, resources[rule])
        assert not any(item.startswith("gpu=") for r in resources["make_variant"] for item in r)
        assert groups == {}  # grouping is for cluster runs only


def test_the_gpu_cap_is_shared_out_over_the_gpus_in_sight(tmp_path):
    cap = yaml.safe_load((REPO / "profiles/default/config.yaml").read_text())["resources"]["gpu"]
    two_gpus = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}
    for args, share in (((), math.ceil(cap / 2)), (("--resources", "gpu=2"), 1), (("--resources", "gpu=5"), 3)):
        resources, _ = plan(tmp_path, "--config", "device=cuda", *args, env=two_gpus)
        for rule in GPU_RULES:
            assert all({"gpu=1", f"jobs_per_gpu={share}"} <= r for r in resources[rule]), (args, resources[rule])


def test_slurm_profile_plans_the_workflow_where_slurm_is_absent(tmp_path):
    # a PATH with Python and the shell tools the SLURM plugin calls, but no SLURM command
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("which", "sh", "bash"):
        (tools / tool).symlink_to(shutil.which(tool))
    path = f"{Path(sys.executable).parent}{os.pathsep}{tools}"
    assert shutil.which("sbatch", path=path) is None and shutil.which("sinfo", path=path) is None
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())
    resources, groups = plan(
        tmp_path, "--workflow-profile", str(REPO / "profiles/slurm"), env={**os.environ, "PATH": path}
    )
    for rule in GPU_RULES:
        partition = profile["set-resources"][rule]["slurm_partition"]
        assert all(
            {"gpu=1", f"slurm_partition={partition}", "cpus_per_gpu=1", "jobs_per_gpu=1"} <= r for r in resources[rule]
        )
    for rule in CPU_RULES:  # CPU jobs on the cluster (the login node sees no GPU: gpu=0)
        assert not any(item.startswith("gpu=") and item != "gpu=0" for r in resources[rule] for item in r)
    # a variant's zsl, icl and gd extractions are one group job
    assert {g: sorted(rules) for g, rules in groups.items()} == {
        "extract_tiny_trained": ["extract_base", "extract_zsl", "finetune_and_extract"],
        "extract_tiny_untrained": ["extract_base", "extract_zsl", "finetune_and_extract"],
    }


def test_a_choice_on_development_rows_runs_on_a_gpu_node_of_its_own(tmp_path):
    """A method that chooses its rate (rule choose_finetuning, a checkpoint): a GPU job as the
    finetuning is, in no group (the finetuning it decides is planned once it has run)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("which", "sh", "bash"):
        (tools / tool).symlink_to(shutil.which(tool))
    path = f"{Path(sys.executable).parent}{os.pathsep}{tools}"
    choosing = {**CONFIG, "methods": {"gd": {"kind": "gd", "choose": {"lr": [0.1, 1.0]}}}}
    resources, groups = plan(
        tmp_path,
        "--workflow-profile",
        str(REPO / "profiles/slurm"),
        env={**os.environ, "PATH": path},
        config=choosing,
    )
    partition = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())["set-resources"]["choose_finetuning"]
    assert len(resources["choose_finetuning"]) == 1  # one job for both variants of the one task
    assert all(
        {"gpu=1", f"slurm_partition={partition['slurm_partition']}", "jobs_per_gpu=1"} <= r
        for r in resources["choose_finetuning"]
    )
    assert not any("choose_finetuning" in rules for rules in groups.values())


def write_estimate(workdir: Path, peaks: dict[str, float], seconds: dict[str, float]) -> None:
    """A cost estimate (results/cost_estimate.tsv) of CONFIG's model jobs, as `snakemake
    cost_estimate` writes it, with these peaks (MB) and times (s) per setting (every ICL setting
    icl's)."""
    from icl_gd.config import validation
    from icl_gd.planning import plan as plan_

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    rows = ["rule\tmodel\tvariant\ttask\tseed\torder\tsetting\tpath\tgflop\tseconds\tpeak_mb"]
    for e in plan_.extractions(validation.validate(CONFIG, schema)):
        setting = "icl" if cfg.is_icl_setting(e["setting"]) else e["setting"]
        rule = {"zsl": "extract_zsl", "icl": "extract_base"}.get(setting, "finetune_and_extract")
        cells = [rule, e["model"], e["variant"], e["task"], e["seed"], 0, e["setting"], e["setting"], 1.0]
        rows.append("\t".join(map(str, [*cells, seconds[setting], peaks[setting]])))
    rows.append("\t".join(["build_builtin_model", "tiny", "", "", "", "", "", "pretrain", "1", "30", "500"]))
    (workdir / "results").mkdir(exist_ok=True)
    (workdir / "results/cost_estimate.tsv").write_text("\n".join(rows) + "\n")


def test_model_jobs_ask_for_what_the_cost_estimate_predicts(tmp_path):
    resources, _ = plan(tmp_path)  # no estimate: each rule's fallback
    assert all({"mem_mb=8000", "runtime=60"} <= r for r in resources["extract_base"])
    assert all({"mem_mb=16000", "runtime=120"} <= r for r in resources["finetune_and_extract"])
    write_estimate(tmp_path, peaks={"zsl": 700, "icl": 2000, "gd": 3000}, seconds={"zsl": 60, "icl": 300, "gd": 1200})
    resources, _ = plan(tmp_path)
    # peak x 1.5 (at least 1000 MB); time x 2 + 5 min
    assert all({"mem_mb=1050", "runtime=7"} <= r for r in resources["extract_zsl"])
    assert all({"mem_mb=3000", "runtime=15"} <= r for r in resources["extract_base"])
    assert all({"mem_mb=4500", "runtime=45"} <= r for r in resources["finetune_and_extract"])
    assert all({"mem_mb=1000", "runtime=6"} <= r for r in resources["build_builtin_model"])
    assert all({"mem_mb=8000", "runtime=30"} <= r for r in resources["make_variant"])  # not estimated


def test_a_job_over_the_partitions_limits_stops_the_plan_with_its_numbers(tmp_path):
    write_estimate(tmp_path, peaks={"zsl": 700, "icl": 2000, "gd": 3000}, seconds={"zsl": 60, "icl": 300, "gd": 1200})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**CONFIG, "partition_limits": {"mem_mb": 4000}}))
    cmd = [*SNAKEMAKE, "-n", "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "2 job(s) would exceed the partition's limits" in text, text[-3000:]
    assert "finetune_and_extract model=tiny/variant=trained/task=sst2/seed=" in text
    assert "4,500 MB of memory (peak 3,000 MB x 1.5)" in text and "setting=zsl" not in text
