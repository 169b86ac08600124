"""The shipped configs: they validate against the schema, and the paper's config plans the papers' runs.

The dry run needs no network (HF_HUB_OFFLINE=1): download_model and prepare_task are only planned.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from icl_gd.config import resolve as cfg  # noqa: E402
from icl_gd.config import validation  # noqa: E402
from icl_gd.models import origins  # noqa: E402
from icl_gd.planning import plan  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
PAPER = REPO / "configs" / "paper.yaml"
BENCH = REPO / "configs" / "benchmark-1.3b.yaml"
SHIPPED = [REPO / "config.yaml", *sorted((REPO / "configs").glob("*.yaml"))]

# docs/protocol.md, "Tasks and data": three seeds per task, typed again by hand.
PROTOCOL_SEEDS = {
    "sst2": [2, 3, 4],
    "sst5": [5, 6, 7],
    "mr": [5, 6, 7],
    "subj": [4, 5, 6],
    "agnews": [3, 4, 5],
    "cb": [3, 4, 5],
}


def load(path: Path) -> dict:
    return validation.validate(yaml.safe_load(path.read_text()), SCHEMA)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_shipped_configs_validate(path):
    config = load(path)
    assert config["models"] and config["tasks"] and config["variants"]
    for task in config["tasks"]:
        assert cfg.task_seeds(config, task)


def test_default_config_is_offline():
    config = load(REPO / "config.yaml")
    assert {spec["source"] for spec in config["models"].values()} == {"builtin"}
    assert {cfg.task_spec(config, t).source for t in config["tasks"]} == {"synthetic"}


def test_paper_config_is_the_protocol():
    config = load(PAPER)
    assert list(config["models"]) == ["fairseq-1.3b"]
    model = config["models"]["fairseq-1.3b"]
    assert (model["source"], model["id"]) == ("hub", "KoboldAI/fairseq-dense-1.3B")
    assert sorted(config["tasks"]) == sorted(PROTOCOL_SEEDS)
    for task, seeds in PROTOCOL_SEEDS.items():
        spec = cfg.task_spec(config, task)
        assert spec.source == "hub" and spec.hub_id == cfg.TASK_PRESETS[task]["hub_id"]
        assert cfg.task_seeds(config, task) == seeds
    assert (config["k"], config["max_eval"], config["n_seeds"]) == (32, 2000, None)
    assert (config["record_position"], config["ft_demos"]) == ("label_word", "all")
    assert config["variants"] == {
        "trained": ["gd", "lcgd", "lcgd_clip", "gd_switched", "gd_linearized"],
        "trained_embeddings": ["gd"],
        "untrained": ["gd"],
    }
    clip = cfg.method_spec(config, "lcgd_clip")
    assert (clip["kind"], clip["clip_grad_norm"]) == ("lcgd", 12.0)  # paper 003 Table 3
    assert cfg.method_spec(config, "gd_switched")["demo_labels"] == "switched"
    assert cfg.method_spec(config, "gd")["demo_labels"] == "gold"  # the schema default
    assert cfg.icl_setting(config, "gd_switched") == "icl_switched"
    assert cfg.method_spec(config, "gd_linearized")["kind"] == "linearized"  # paper 002


# --------------------------------------------------------------------------------------------------
# Dry run of configs/paper.yaml
# --------------------------------------------------------------------------------------------------


def dry_run_of(config_path: Path, workdir: Path) -> str:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(config_path),
        "-n",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env=env, timeout=120)
    assert proc.returncode == 0, f"dry run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert not (workdir / "results").exists() and not (workdir / "resources").exists()  # nothing was run
    return proc.stdout


def test_a_model_in_parts_is_fetched_by_the_workflow_not_by_the_set_up(tmp_path):
    """configs/gemma3-protocol.yaml validates without its file (no test downloads it) and plans the
    file's assembly once, before its one conversion."""
    config = load(REPO / "configs" / "gemma3-protocol.yaml")
    assert cfg.gguf_file(config["models"]["gemma3"], "gemma3") == "resources/gguf/gemma3.gguf"
    # the data table's caption tells every reader of its report the model's origin and terms
    note = origins.checkpoint_note(config["models"])
    assert note.startswith("Model gemma3: Gemma-3 270M, Google DeepMind's pretrained base model")
    assert "Gemma Terms of Use (https://ai.google.dev/gemma/terms)" in note
    smollm2 = origins.checkpoint_note(load(REPO / "configs" / "smollm2-protocol.yaml")["models"])
    assert "SmolLM2-135M-Instruct" in smollm2 and "Apache License 2.0" in smollm2
    assert origins.checkpoint_note(load(REPO / "config.yaml")["models"]) == ""  # the built-in model: no note
    unknown = {**config["models"]["gemma3"], "sha256": "0" * 64}
    assert origins.checkpoint_note({"mine": unknown}) == ""
    jobs = planned_jobs(dry_run_of(REPO / "configs" / "gemma3-protocol.yaml", tmp_path))
    assembled = [fields for rule, fields in jobs if rule == "assemble_gguf"]
    assert [f["output"] for f in assembled] == ["resources/gguf/gemma3.gguf"]
    converted = [fields for rule, fields in jobs if rule == "convert_gguf_model"]
    assert [f["input"] for f in converted] == ["resources/gguf/gemma3.gguf"]


def test_the_real_reader_trains_on_the_prepared_train_splits_of_its_tasks(tmp_path):
    """configs/reader-real-protocol.yaml (issue 81, item 3): its built-in model's build reads the
    real tasks' prepared train splits (pretrain_tasks), never a twin's and never an evaluation split."""
    jobs = planned_jobs(dry_run_of(REPO / "configs" / "reader-real-protocol.yaml", tmp_path))
    (build,) = [fields for rule, fields in jobs if rule == "build_builtin_model"]
    assert build["input"].split(", ") == [
        f"resources/datasets/{t}/train.parquet" for t in ("sst2", "sst5", "mr", "agnews")
    ]
    assert not [fields for rule, fields in jobs if rule == "synthetic_twin"]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> str:
    return dry_run_of(PAPER, tmp_path_factory.mktemp("paper_dry_run"))


def job_stats(stdout: str) -> dict[str, int]:
    """The first "Job stats" table of a dry run: rule -> count, with 'total'."""
    lines = stdout.splitlines()
    start = lines.index("Job stats:")
    assert lines[start + 1].split() == ["job", "count"] and set(lines[start + 2].replace(" ", "")) == {"-"}
    counts = {}
    for line in lines[start + 3 :]:
        if not line.strip():
            break
        name, count = line.split()
        counts[name] = int(count)
    return counts


def planned_jobs(stdout: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, {field: value}) of every job block a dry run prints."""
    jobs = []
    for match in re.finditer(r"^rule (\w+):\n((?:    .*\n?)+)", stdout, flags=re.M):
        fields = {}
        for line in match.group(2).splitlines():
            key, _, value = line.strip().partition(": ")
            fields[key] = value
        jobs.append((match.group(1), fields))
    return jobs


def expected_counts(config: dict) -> dict[str, int]:
    """The plan, from the config: one cache per (variant, task, seed, setting), but one ZSL per
    (variant, task); one score per run."""
    n_runs_seeds = sum(len(cfg.task_seeds(config, t)) for t in config["tasks"])
    n_models = len(config["models"])
    icl_settings = sum(len({cfg.icl_setting(config, m) for m in methods}) for methods in config["variants"].values())
    zsl = n_models * len(config["tasks"]) * len(config["variants"])
    # per seed of a task, the methods that run on it (a method may name its own tasks)
    method_runs = sum(
        cfg.method_runs_on(config, m, t) * len(cfg.task_seeds(config, t))
        for methods in config["variants"].values()
        for m in methods
        for t in config["tasks"]
    )
    return {
        "download_model": sum(spec["source"] == "hub" for spec in config["models"].values()),
        "prepare_task": len(config["tasks"]),
        "make_variant": n_models * sum(v != "trained" for v in config["variants"]),
        "extract_zsl": zsl,
        # and ICL on permuted labels and on novel label words, the premise's, once each per trained task and seed
        "extract_base": n_models * n_runs_seeds * icl_settings + 2 * len(plan.permuted_runs(config)),
        "finetune_and_extract": n_models * method_runs,
        "score_run": n_models * method_runs,
        "aggregate_metrics": 1,
        "compare_methods": 1,
        "data_statistics": 1,
        "all": 1,
        "evaluate_claims": 1,
        "first_page": 1,
        "task_statistics": len(config["tasks"]),
        "table": 13,  # with premise and costs
        # the paper's config: per_layer, accuracy, alpha, grad_norms, prediction_changes,
        # output_distributions, reproduction; after the claims, claims and premise (it sweeps no
        # learning rate and runs one model)
        "figure": 7,
        "figure_after_claims": 2,
    }


def test_paper_dry_run_job_counts(dry_run):
    counts = job_stats(dry_run)
    expected = expected_counts(load(PAPER))
    assert counts.pop("total") == sum(counts.values())
    assert counts == expected
    # the same, literally: 6 tasks x 3 seeds; trained runs icl, icl_switched, icl_permuted and icl_novel, the
    # other two variants icl, each variant one ZSL per task; trained finetunes 4 methods on every task and
    # clipped LCGD on Subj's 3 seeds (paper 003 Table 3), the other two variants 1 method each
    assert counts == {
        "download_model": 1,
        "prepare_task": 6,
        "make_variant": 2,
        "extract_zsl": 6 * 3,
        "extract_base": 6 * 3 * (4 + 1 + 1),  # 108
        "finetune_and_extract": 6 * 3 * (4 + 1 + 1) + 3,  # 111
        "score_run": 111,
        "aggregate_metrics": 1,
        "compare_methods": 1,
        "task_statistics": 6,
        "data_statistics": 1,
        "all": 1,
        "evaluate_claims": 1,
        "first_page": 1,
        # paper 003 Tables 1-3, paper 001 Tables 1-3, paper 002, comparisons, intervals,
        # reproduction, claims, premise
        "table": 13,  # with costs
        # per_layer, accuracy, alpha, grad_norms, prediction_changes, output_distributions,
        # reproduction (no lr sweep, one model); claims, premise after the claims
        "figure": 7,
        "figure_after_claims": 2,
    }
    assert sum(counts.values()) == 391
    # the printed job blocks agree with the table
    assert Counter(rule for rule, _ in planned_jobs(dry_run)) == Counter(counts)


def test_benchmark_config_is_the_paper_grid_on_a_random_model_of_the_reference_shape(tmp_path):
    """configs/benchmark-1.3b.yaml: the paper's variants and methods on the synthetic twins, at the
    fairseq dense 1.3B's shape, with nothing to download (pretrain_steps 0: random weights)."""
    bench, paper = load(BENCH), load(PAPER)
    model = bench["models"]["bench-1.3b"]
    assert model["source"] == "builtin" and model["pretrain_steps"] == 0
    assert (model["n_layer"], model["n_embd"], model["n_head"], model["n_positions"]) == (24, 2048, 32, 2048)
    assert bench["variants"] == paper["variants"] and bench["methods"] == paper["methods"]
    assert {cfg.task_spec(bench, t).source for t in bench["tasks"]} == {"synthetic"}
    assert (bench["k"], bench["max_eval"], bench["synthetic"]["n_eval"]) == (32, 2000, 2000)
    counts = job_stats(dry_run_of(BENCH, tmp_path))
    # per seed: trained icl, icl_switched, icl_permuted, icl_novel and 4 methods (clipped LCGD on
    # Subj's 3 seeds only), the other variants icl and gd; one ZSL per variant and task
    assert (
        counts["extract_zsl"] + counts["extract_base"] + counts["finetune_and_extract"]
        == 6 * 3 * (8 + 2 + 2) + 3 + 3 * 6
    )  # 237
    assert "download_model" not in counts and counts["build_builtin_model"] == 1


def test_paper_dry_run_extraction_paths(dry_run):
    config = load(PAPER)
    pattern = re.compile(r"results/activations/fairseq-1\.3b/(\w+)/(\w+)/seed(\d+)/(\w+)\.arrow")
    found = set()
    for rule, fields in planned_jobs(dry_run):
        if rule not in ("extract_zsl", "extract_base", "finetune_and_extract"):
            continue
        outputs = fields["output"].split(", ")
        caches = [o for o in outputs if o.startswith("results/activations/")]
        assert len(caches) == 1, outputs
        match = pattern.fullmatch(caches[0])
        assert match, caches[0]
        variant, task, seed, setting = match.groups()
        wildcards = dict(kv.split("=", 1) for kv in fields["wildcards"].split(", "))
        assert wildcards == {
            "model": "fairseq-1.3b",
            "variant": variant,
            "task": task,
            "seed": seed,
            **({} if rule == "extract_zsl" else {"setting": setting}),
        }
        # compact caches: every setting but ZSL stores its change from its task's ZSL cache, which
        # is the first seed's (ZSL does not depend on the seed)
        references = [i for i in fields["input"].split(", ") if i.startswith("results/activations/")]
        first = PROTOCOL_SEEDS[task][0]
        zsl = f"results/activations/fairseq-1.3b/{variant}/{task}/seed{first}/zsl.arrow"
        assert references == ([] if setting == "zsl" else [zsl]), references
        assert setting != "zsl" or int(seed) == first
        if rule == "extract_zsl":
            assert setting == "zsl"
        elif rule == "extract_base":
            assert setting in cfg.BASE_SETTINGS and setting != "zsl"
        else:
            assert setting in config["methods"]
            assert fields["output"].endswith(
                f"results/training/fairseq-1.3b/{variant}/{task}/seed{seed}/{setting}.parquet"
            )
        found.add((variant, task, int(seed), setting))
    expected = {
        (variant, task, seed, setting)
        for variant, methods in config["variants"].items()
        for task, seeds in PROTOCOL_SEEDS.items()
        for seed in seeds
        for setting in {
            *(["zsl"] if seed == seeds[0] else []),
            *(cfg.icl_setting(config, m) for m in methods),
            *(["icl_permuted", "icl_novel"] if variant == "trained" else []),
            *(m for m in methods if cfg.method_runs_on(config, m, task)),
        }
    }
    assert found == expected
    assert len(found) == 126 + 111
    by_task = {task: sorted({s for _, t, s, _ in found if t == task}) for task in PROTOCOL_SEEDS}
    assert by_task == PROTOCOL_SEEDS
    assert {s for v, *_, s in found if v == "trained"} == {
        "zsl",
        "icl",
        "icl_switched",
        "icl_permuted",
        "icl_novel",
        "gd",
        "lcgd",
        "lcgd_clip",
        "gd_switched",
        "gd_linearized",
    }
    assert {s for v, *_, s in found if v != "trained"} == {"zsl", "icl", "gd"}


def test_paper_dry_run_scores_alpha_against_gd(dry_run):
    """Every non-GD method of a variant that runs GD reads GD's cache too (alpha, paper 001 Fig. 2)."""
    seen = set()
    for rule, fields in planned_jobs(dry_run):
        if rule != "score_run":
            continue
        inputs = fields["input"].split(", ")
        variant, method = (
            fields["wildcards"].split("variant=")[1].split(",")[0],
            fields["wildcards"].split("method=")[1],
        )
        caches = [i for i in inputs if i.startswith("results/activations/")]
        # every run of the trained variant also scores ICL on permuted labels and on novel label words (the premise's)
        permuted = [c for c in caches if c.endswith(("/icl_permuted.arrow", "/icl_novel.arrow"))]
        assert len(permuted) == 2 * (variant == "trained") and all(f"/{variant}/" in c for c in permuted), inputs
        caches = [c for c in caches if c not in permuted]
        if method == "gd":
            assert len(caches) == 3, inputs  # zsl, icl, gd: no baseline of its own
        else:
            assert len(caches) == 4 and caches[-1].endswith("/gd.arrow") and f"/{variant}/" in caches[-1], inputs
            seen.add(method)
    assert seen == {"lcgd", "lcgd_clip", "gd_switched", "gd_linearized"}


def test_paper_dry_run_figures(dry_run):
    """One job per figure; the gradient norms of Subj's first seed (paper 001 Fig. 4), every method."""
    jobs = {
        fields["wildcards"]: fields
        for rule, fields in planned_jobs(dry_run)
        if rule in ("figure", "figure_after_claims")
    }
    assert set(jobs) == {
        f"figure={f}"
        for f in (
            "per_layer",
            "accuracy",
            "alpha",
            "grad_norms",
            "prediction_changes",
            "output_distributions",
            "reproduction",
            "claims",
            "premise",
        )
    }
    logs = jobs["figure=grad_norms"]["input"].split(", ")
    base = "results/training/fairseq-1.3b/trained/subj/seed4"
    assert [x for x in logs if x.startswith("results/")] == [
        f"{base}/{m}.parquet" for m in ("gd", "lcgd", "lcgd_clip", "gd_switched", "gd_linearized")
    ]
    assert "results/metrics/summary.parquet" in jobs["figure=alpha"]["input"]


def test_the_pythia_size_sweep_plans_every_size_and_the_sizes_figure(tmp_path):
    """configs/sweep-pythia.yaml: five sizes of one family from the hub, the protocol on each, one
    model-statistics job that counts their parameters, and the sizes figure."""
    config = load(REPO / "configs" / "sweep-pythia.yaml")
    assert [spec["id"] for spec in config["models"].values()] == [
        f"EleutherAI/pythia-{size}" for size in ("70m", "160m", "410m", "1b", "1.4b")
    ]
    assert config["dtype"] == "float32" and config["k"] == 32
    stdout = dry_run_of(REPO / "configs" / "sweep-pythia.yaml", tmp_path)
    counts = job_stats(stdout)
    assert counts["download_model"] == 5 and counts["model_statistics"] == 1
    assert counts["finetune_and_extract"] == 5 * 6 * 3 * 2  # models x tasks x seeds x (gd, lcgd)
    figures = {
        fields["wildcards"] for rule, fields in planned_jobs(stdout) if rule in ("figure", "figure_after_claims")
    }
    assert {"figure=sizes", "figure=models"} <= figures
