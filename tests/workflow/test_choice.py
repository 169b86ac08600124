"""Finetuning's learning rate and epochs chosen on development rows, as a stage of the workflow (rule
choose_finetuning, a checkpoint): planned by a dry run, read by the finetuning, priced by the cost
estimate, and rerun by a grid edit only where it changes what it must."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import shutil  # noqa: E402

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from icl_gd.activations import cache  # noqa: E402
from icl_gd.common import benchmark  # noqa: E402
from icl_gd.metrics import setting_choice  # noqa: E402
from tests.workflow.test_workflow import TINY, checkout, jobs_planned, snakemake  # noqa: E402

GRID = {"lr": [0.01, 0.3, 3.0], "epochs": [1, 2], "examples": 10}
CONFIG = {
    **TINY,
    "variants": {"trained": ["best"]},
    "methods": {"best": {"kind": "gd", "choose": GRID}},
    "report": {"reproduction": False},
    "statistics": {"baseline_method": None},
}
TASKS = ("sst2", "cb")
SEEDS = {"sst2": (2, 3), "cb": (3, 4)}


def choices(workdir) -> dict[str, dict]:
    return {
        t: setting_choice.read_chosen(workdir / f"results/choice/tiny/{t}.parquet", "trained", "best") for t in TASKS
    }


def finetuned(workdir) -> dict[tuple[str, int], int]:
    """(task, seed) -> the finetuned cache's modification time, in ns."""
    return {
        (t, s): (workdir / f"results/activations/tiny/trained/{t}/seed{s}/best.arrow").stat().st_mtime_ns
        for t in TASKS
        for s in SEEDS[t]
    }


def write(workdir, grid):
    (workdir / "config.yaml").write_text(
        yaml.safe_dump({**CONFIG, "methods": {"best": {"kind": "gd", "choose": grid}}})
    )


@pytest.fixture(scope="module")
def chosen_run(tmp_path_factory):
    workdir = checkout(tmp_path_factory.mktemp("choice") / "clone")
    write(workdir, GRID)
    planned = jobs_planned(workdir)
    snakemake(workdir, "--cores", "2")
    return workdir, planned


@pytest.mark.slow
def test_the_choice_is_planned_made_and_read_by_the_finetuning(chosen_run):
    workdir, planned = chosen_run
    # a dry run lists one choice job per (model, task), and the finetuning that waits for it
    assert planned["choose_finetuning"] == 2 and planned["finetune_and_extract"] == 4
    for task in TASKS:
        table = pd.read_parquet(workdir / f"results/choice/tiny/{task}.parquet")
        assert list(table.columns) == setting_choice.FINETUNING_COLUMNS
        assert len(table) == len(SEEDS[task]) * 3 * 2 and (table["n_examples"] == 10).all()
        assert set(table["seed"]) == set(SEEDS[task]) and table["chosen"].sum() == len(SEEDS[task])
        chosen = setting_choice.chosen_of(table)
        assert chosen == dict(zip(("lr", "epochs"), setting_choice.finetuning_choice(table)))
        for seed in SEEDS[task]:  # every seed's finetuning at its task's choice
            run = cache.read_cache(workdir / f"results/activations/tiny/trained/{task}/seed{seed}/best.arrow")
            assert (run.meta["lr"], run.meta["epochs"]) == (chosen["lr"], chosen["epochs"])
            assert run.meta["queries"] == {"split": "evaluation"}  # the evaluation, never the development rows
        record = benchmark.read(workdir / f"results/benchmarks/choose_finetuning/tiny/{task}.tsv")
        assert record["gflop"] > 0
    assert jobs_planned(workdir) == {}


@pytest.mark.slow
def test_a_grid_edit_reruns_the_choice_and_only_the_finetuning_whose_choice_changed(chosen_run):
    workdir, _ = chosen_run
    before, times = choices(workdir), finetuned(workdir)
    # a rate that no task chose, gone: every choice reruns, no finetuning
    unchosen = [lr for lr in GRID["lr"] if lr not in {c["lr"] for c in before.values()}]
    if unchosen:
        write(workdir, {**GRID, "lr": [lr for lr in GRID["lr"] if lr != unchosen[0]]})
        assert jobs_planned(workdir)["choose_finetuning"] == 2
        snakemake(workdir, "--cores", "2")
        assert choices(workdir) == before and finetuned(workdir) == times
    # SST-2's chosen rate gone: its choice changes and its finetuning reruns; CB's where its choice changed
    grid = {**GRID, "lr": [lr for lr in GRID["lr"] if lr != before["sst2"]["lr"]]}
    write(workdir, grid)
    snakemake(workdir, "--cores", "2")
    after, new_times = choices(workdir), finetuned(workdir)
    assert after["sst2"] != before["sst2"]
    rerun = {key for key in times if new_times[key] != times[key]}
    assert rerun == {(t, s) for t in TASKS if after[t] != before[t] for s in SEEDS[t]}
    assert jobs_planned(workdir) == {}


@pytest.mark.slow
def test_a_moved_run_with_its_choices_plans_nothing(chosen_run, tmp_path):
    workdir, _ = chosen_run
    moved = tmp_path / "moved"
    shutil.copytree(workdir, moved, symlinks=True, copy_function=shutil.copy2)
    assert jobs_planned(moved) == {}


@pytest.mark.slow
def test_the_cost_estimate_prices_each_choice_as_its_job_counts_it(chosen_run):
    workdir, _ = chosen_run
    table_path = workdir / "results/cost_estimate.tsv"
    try:
        snakemake(workdir, "--cores", "2", "cost_estimate", "--config", "cost_calibration_s=0")
        table = pd.read_csv(table_path, sep="\t")
        rows = table[table["rule"] == "choose_finetuning"]
        assert sorted(rows["task"]) == sorted(TASKS) and (rows["seconds"] > 0).all()
        for row in rows.itertuples():
            record = benchmark.read(workdir / f"results/benchmarks/choose_finetuning/tiny/{row.task}.tsv")
            assert record["gflop"] == pytest.approx(row.gflop, rel=1e-3, abs=1e-4)
        # a choice job prices as many trainings as its grid has rates per seed, each a finetuning's
        finetune = table[(table["rule"] == "finetune_and_extract") & (table["task"] == "sst2")]["seconds"].mean()
        assert rows[rows["task"] == "sst2"]["seconds"].item() > finetune
    finally:
        table_path.unlink(missing_ok=True)
    assert jobs_planned(workdir) == {}
