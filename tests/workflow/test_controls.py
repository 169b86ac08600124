"""Snakemake's controls on this DAG (issue 43), as a user reaches for them on a fresh clone: --until
each model rule, --omit-from, --forcerun, --allowed-rules, a cache or a table as the target, --batch,
--notemp with temporary caches and --keep-going past one task's failure. In each, the jobs that run
are the ones the flag names, their outputs appear, and a plain run afterwards completes what is left
and then plans nothing. --until in the compact layout, whose caches take their run's ZSL cache as an
input (what Snakemake's issue 823 tripped on); --forcerun in both, whose DAGs it plans differently."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from tests.workflow.test_workflow import checkout, jobs_planned, snakemake  # noqa: E402

pytestmark = pytest.mark.slow

CONFIG = {
    "models": {
        "tiny": {
            "source": "builtin",
            "n_layer": 2,
            "n_embd": 32,
            "n_head": 2,
            "n_positions": 512,
            "vocab_size": 600,
            "pretrain_steps": 10,
            "pretrain_len": 64,
        }
    },
    "variants": {"trained": ["gd"], "untrained": ["gd"]},
    "methods": {"gd": {"kind": "gd"}},
    "tasks": {"sst2": {"source": "synthetic"}, "cb": {"source": "synthetic"}},
    "n_seeds": 2,
    "k": 4,
    "max_eval": 8,
    "batch_size": 4,
    "synthetic": {"n_train": 30, "n_eval": 12},
    # no claims and no premise: what each test checks is Snakemake's flags, not them (and without the
    # premise's settings, its evaluation and its figures, each run has a fifth fewer jobs)
    "report": {"dir": "results/reports", "reproduction": False},
}
SEEDS = {"sst2": (2, 3), "cb": (3, 4)}


def caches(workdir: Path) -> set[str]:
    """The settings' caches that exist, as 'variant/task/seed/setting'."""
    root = workdir / "results/activations/tiny"
    return {str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.arrow")} if root.exists() else set()


def expected(settings, variants=("trained", "untrained")) -> set[str]:
    """The caches of ``settings``."""
    out = set()
    for variant in variants:
        for task, seeds in SEEDS.items():
            for seed in seeds:
                for setting in settings:
                    if setting != "zsl" or seed == seeds[0]:  # one ZSL per task, the first seed's
                        out.add(f"{variant}/{task}/seed{seed}/{setting}")
    return out


def clone(tmp_path_factory, name: str, **changes) -> Path:
    workdir = checkout(tmp_path_factory.mktemp(name) / "clone")
    (workdir / "config.yaml").write_text(yaml.safe_dump({**CONFIG, **changes}))
    return workdir


@pytest.fixture(scope="module", params=["compact", "float32"])
def layout_run(request, tmp_path_factory):
    """A clone in the given cache layout: the compact one run rule by rule with --until (the test
    below; the layout whose ICL and training caches take ZSL's as an input, where Snakemake's issue
    823 stopped --until), the float32 one run at once (then tested further)."""
    workdir = clone(tmp_path_factory, f"until_{request.param}", cache_dtype=request.param)
    if request.param == "float32":
        snakemake(workdir, "--cores", "2")
    return request.param, workdir


@pytest.mark.parametrize("layout_run", ["compact"], indirect=True)
def test_until_each_model_rule_then_the_rest(layout_run):
    layout, workdir = layout_run
    snakemake(workdir, "--cores", "2", "--until", "build_builtin_model")
    assert (workdir / "resources/models/tiny/trained/config.json").exists() and not caches(workdir)
    assert not (workdir / "resources/models/tiny/untrained").exists()
    snakemake(workdir, "--cores", "2", "--until", "make_variant")
    assert (workdir / "resources/models/tiny/untrained/config.json").exists() and not caches(workdir)
    snakemake(workdir, "--cores", "2", "--until", "extract_zsl")
    assert caches(workdir) == expected(["zsl"])
    snakemake(workdir, "--cores", "2", "--until", "extract_base")  # Snakemake's issue 823 stopped it here
    assert caches(workdir) == expected(["zsl", "icl"])
    snakemake(workdir, "--cores", "2", "--until", "finetune_and_extract")
    assert caches(workdir) == expected(["zsl", "icl", "gd"])
    assert not (workdir / "results/metrics").exists()
    # --omit-from: what does not follow from the scores still runs: the data statistics (from the
    # caches) and their table, the gradient norms' figure (from the training logs)
    assert jobs_planned(workdir, "--omit-from", "score_run") == {
        "task_statistics": 2,
        "data_statistics": 1,
        "table": 1,
        "figure": 1,
    }
    snakemake(workdir, "--cores", "2", "--omit-from", "score_run")
    assert (workdir / "results/reports/tables/data.md").exists() and not (workdir / "results/metrics/runs").exists()
    snakemake(workdir, "--cores", "2")
    assert (workdir / "results/reports/summary.md").exists()
    assert jobs_planned(workdir) == {}


def test_forcerun_plans_the_rule_and_what_follows_it(layout_run):
    layout, workdir = layout_run
    for flag in ("--forcerun", "-R"):
        planned = jobs_planned(workdir, flag, "finetune_and_extract")
        assert planned.pop("finetune_and_extract") == 2 * 2 * 2  # variants x tasks x seeds
        assert planned.pop("score_run") == 2 * 2 * 2
        assert not {"extract_zsl", "extract_base", "build_builtin_model", "make_variant", "prepare_task"} & set(planned)
    planned = jobs_planned(workdir, "--forcerun", "extract_zsl")
    assert planned["extract_zsl"] == 2 * 2
    if layout == "compact":  # its caches store their change from ZSL's: a new ZSL remakes them
        # ICL of both variants, per task and seed
        assert planned["extract_base"] == 2 * 2 * 2 and planned["finetune_and_extract"] == 2 * 2 * 2
    else:
        assert "extract_base" not in planned and "finetune_and_extract" not in planned


# what this checks does not depend on the layout: one layout's run is enough (2 min of CI)
@pytest.mark.parametrize("layout_run", ["compact"], indirect=True)
def test_allowed_rules_and_single_targets(layout_run):
    _, workdir = layout_run
    score = workdir / "results/metrics/runs/tiny/trained/sst2/seed3/gd.parquet"
    score.unlink()
    # Snakemake's --allowed-rules builds only what the targets need through allowed rules: with the
    # default target, whose own rule and aggregate are not allowed, nothing (its design, not the
    # DAG's: docs/reruns.md). Named as the target, the file is made by the allowed rule alone.
    assert jobs_planned(workdir, "--allowed-rules", "score_run") == {}
    target = str(score.relative_to(workdir))
    assert jobs_planned(workdir, "--allowed-rules", "score_run", "--", target) == {"score_run": 1}
    snakemake(workdir, "--cores", "2", "--allowed-rules", "score_run", "--", target)
    assert score.exists()
    # made again, it holds what it held: Snakemake compares the checksums of small inputs, so
    # nothing that reads it reruns
    assert jobs_planned(workdir) == {}
    # one cache as the target: its job alone (and what it needs), nothing downstream
    cache = workdir / "results/activations/tiny/untrained/cb/seed4/gd.arrow"
    cache.unlink()
    planned = jobs_planned(workdir, str(cache.relative_to(workdir)))
    assert planned == {"finetune_and_extract": 1}
    snakemake(workdir, "--cores", "2", str(cache.relative_to(workdir)))
    assert cache.exists()
    snakemake(workdir, "--cores", "2")  # what reads the new cache (its score, unless it is the same)
    assert jobs_planned(workdir) == {}
    # a table as the target
    table = workdir / "results/reports/tables/accuracy.md"
    table.unlink()
    assert jobs_planned(workdir, str(table.relative_to(workdir))) == {"table": 1}
    snakemake(workdir, "--cores", "2", str(table.relative_to(workdir)))
    assert table.exists()
    snakemake(workdir, "--cores", "2")
    assert jobs_planned(workdir) == {}


# the trained variant alone below: what each checks does not depend on a second one (a model job and
# half the runs less, minutes of CI)
TRAINED = {"trained": ["gd"]}


def test_batches(tmp_path_factory):
    workdir = clone(tmp_path_factory, "batch", variants=TRAINED)
    # --batch R=i/n keeps only the i-th share of R's inputs, and the default target still needs the
    # rest through every other path: of all (or of any aggregate), the first batch is the whole run
    planned = jobs_planned(workdir, "--batch", "all=1/2")
    assert planned["score_run"] == 2 * 2 and planned["aggregate_metrics"] == 1
    planned = jobs_planned(workdir, "--batch", "compare_methods=1/2")
    assert planned["score_run"] == 2 * 2
    # the target rule scores (every run scored, nothing after) cuts the run into shares of runs
    snakemake(workdir, "--cores", "2", "--batch", "scores=1/2", "scores")
    runs = workdir / "results/metrics/runs/tiny"
    first = {p.relative_to(runs).as_posix() for p in runs.rglob("*.parquet")}
    assert len(first) == 2 and not (workdir / "results/metrics/summary.parquet").exists()
    assert caches(workdir) < expected(["zsl", "icl", "gd"], ("trained",))
    snakemake(workdir, "--cores", "2", "--batch", "scores=2/2", "scores")
    assert caches(workdir) == expected(["zsl", "icl", "gd"], ("trained",))
    assert not (workdir / "results/metrics/summary.parquet").exists()
    snakemake(workdir, "--cores", "2")
    assert jobs_planned(workdir) == {}


def test_notemp_keeps_temporary_caches(tmp_path_factory):
    workdir = clone(tmp_path_factory, "notemp", caches="temporary", variants=TRAINED)
    snakemake(workdir, "--cores", "2", "--notemp")
    assert caches(workdir) == expected(["zsl", "icl", "gd"], ("trained",))  # kept, though temporary
    assert (workdir / "results/reports/summary.md").exists()
    # a run without --notemp finds nothing to do: the kept caches are no reason to rerun
    assert jobs_planned(workdir) == {}


def test_keep_going_makes_every_other_tasks_outputs(tmp_path_factory):
    # a local task whose data file is damaged: its data job fails at run time, the other tasks' run
    workdir = clone(
        tmp_path_factory,
        "keep_going",
        variants=TRAINED,
        tasks={
            "sst2": {"source": "synthetic"},
            "mine": {
                "source": "local",
                "path": "data/mine",
                "splits": {"train": "train", "eval": "validation"},
                "template": "Text: {text} Label:",
                "label_words": ["Negative", "Positive"],
                "seeds": [1],
                "lr": 1e-3,
            },
        },
    )
    (workdir / "data/mine").mkdir(parents=True)
    for split in ("train", "validation"):
        (workdir / f"data/mine/{split}.parquet").write_bytes(b"not a parquet file")
    proc = snakemake(workdir, "--cores", "2", "--keep-going", check=False)
    assert proc.returncode != 0
    made = caches(workdir)
    assert {c for c in made if "/sst2/" in c} == {
        c for c in expected(["zsl", "icl", "gd"], ("trained",)) if "/sst2/" in c
    }
    assert not {c for c in made if "/mine/" in c}
    scores = {
        p.relative_to(workdir / "results/metrics/runs/tiny").as_posix()
        for p in (workdir / "results/metrics/runs/tiny").rglob("*.parquet")
    }
    assert scores == {f"trained/sst2/seed{s}/gd.parquet" for s in (2, 3)}
    # fixed, a plain run completes what is left
    pd.DataFrame(
        {"text": [f"a {w} sentence number {i}" for i, w in enumerate(["good", "bad"] * 15)], "label": [0, 1] * 15}
    ).to_parquet(workdir / "data/mine/train.parquet")
    pd.DataFrame(
        {"text": [f"another {w} one {i}" for i, w in enumerate(["good", "bad"] * 6)], "label": [0, 1] * 6}
    ).to_parquet(workdir / "data/mine/validation.parquet")
    snakemake(workdir, "--cores", "2")
    assert jobs_planned(workdir) == {}
