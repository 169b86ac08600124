"""The plan of a run (icl_gd.planning.plan): plain functions of the validated config, tested as such."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from icl_gd.activations import extract
from icl_gd.config import resolve as cfg  # noqa: E402
from icl_gd.config import validation
from icl_gd.planning import plan
from tests.conftest import run_extraction  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def load(path: str) -> dict:
    return validation.validate(yaml.safe_load((REPO / path).read_text()), SCHEMA)


def config(**raw) -> dict:
    return validation.validate({"tasks": {"sst2": None}, **raw}, SCHEMA)


PAPER = load("configs/paper.yaml")
DEFAULT = load("config.yaml")


def test_runs_and_extractions_of_the_paper_config():
    runs = plan.runs(PAPER)
    # tasks x seeds x (trained 4 methods + 1 + 1), and clipped LCGD on Subj's 3 seeds (paper 003 Table 3)
    assert len(runs) == 6 * 3 * (4 + 1 + 1) + 3
    assert {r["task"] for r in runs if r["method"] == "lcgd_clip"} == {"subj"}
    assert runs[0] == dict(model="fairseq-1.3b", variant="trained", task="sst2", seed=2, method="gd")
    caches = plan.extractions(PAPER)
    # per seed, trained: icl, icl_switched, icl_permuted and icl_novel (the premise's) + 4 methods
    # (+ clipped LCGD on Subj); the other two variants icl, gd; and each variant one ZSL per task,
    # the first seed's, which does not depend on the seed
    assert len(caches) == 6 * 3 * (8 + 2 + 2) + 3 + 6 * 3 == 237
    assert {c["seed"] for c in caches if c["setting"] == "zsl" and c["task"] == "sst2"} == {2}
    assert len({tuple(c.values()) for c in caches}) == len(caches)
    assert plan.run_settings(PAPER, "gd_switched") == ["zsl", "icl_switched", "gd_switched"]
    assert plan.run_settings(PAPER, "gd_linearized") == ["zsl", "icl", "gd_linearized"]


def test_icl_on_permuted_labels_is_planned_once_per_trained_task_and_seed_where_the_premise_is_read():
    """The premise's label-following test: ICL at the config's k on permuted labels, one cache per
    (model, task, seed) of the trained variant (not per method, nor per further order, nor for the
    other variants), which every run of the trained variant there scores."""
    permuted = [c for c in plan.extractions(PAPER) if c["setting"] == "icl_permuted"]
    assert len(permuted) == 6 * 3 and {c["variant"] for c in permuted} == {"trained"}
    assert plan.permuted_runs(PAPER) == {(c["model"], c["variant"], c["task"], c["seed"]) for c in permuted}
    assert plan.premise_method(PAPER) == "gd"
    spec = plan.run_spec(PAPER, "sst2", "icl_permuted", 2)
    assert spec == {**plan.run_spec(PAPER, "sst2", "icl", 2), "setting": "icl_permuted", "demo_labels": "permuted"}
    # the default config runs a further order: ICL and the methods there, not ICL on permuted labels
    assert DEFAULT["orders"] == 2 and "icl" in {c["setting"] for c in plan.order_extractions(DEFAULT)}
    assert "icl_permuted" not in {c["setting"] for c in plan.order_extractions(DEFAULT)}
    assert len([c for c in plan.extractions(DEFAULT) if c["setting"] == "icl_permuted"]) == 6  # 6 tasks, 1 seed
    # not where the premise is not read: no claims, no trained variant, or no published GD on it
    assert plan.permuted_runs(config(report={"reproduction": False})) == set()
    assert plan.permuted_runs(config(variants={"untrained": ["gd"]})) == set()
    assert plan.permuted_runs(config(variants={"trained": ["lcgd"]})) == set()
    assert plan.premise_method(config(variants={"trained": ["lcgd"]})) is None
    one = config(variants={"trained": ["gd", "lcgd"], "untrained": ["gd"]})
    assert plan.permuted_runs(one) == {("tiny", "trained", "sst2", seed) for seed in (2, 3, 4)}
    # its name is reserved: no method may take it
    with pytest.raises(cfg.ConfigError, match="methods.icl_permuted: zsl and icl.* are reserved"):
        config(methods={"icl_permuted": {"kind": "gd"}}, variants={"trained": ["icl_permuted"]})


def test_a_method_that_names_its_tasks_runs_on_those_alone():
    """Paper 003 ran clipped layer-causal GD on Subj alone: a method's ``tasks`` restricts its
    runs (and caches) to them; the other methods keep every task."""
    restricted = config(
        tasks={"sst2": None, "subj": None},
        methods={"gd": {"kind": "gd"}, "lcgd_clip": {"kind": "lcgd", "clip_grad_norm": 12.0, "tasks": ["subj"]}},
        variants={"trained": ["gd", "lcgd_clip"]},
    )
    runs = plan.runs(restricted)
    assert {r["task"] for r in runs if r["method"] == "lcgd_clip"} == {"subj"}
    assert {r["task"] for r in runs if r["method"] == "gd"} == {"sst2", "subj"}
    assert {c["task"] for c in plan.extractions(restricted) if c["setting"] == "lcgd_clip"} == {"subj"}
    with pytest.raises(cfg.ConfigError, match=r"methods.lcgd_clip.tasks names \['mr'\]"):
        config(methods={"lcgd_clip": {"kind": "lcgd", "tasks": ["mr"]}}, variants={"trained": ["lcgd_clip"]})


def test_baselines_and_the_reports_methods():
    assert plan.baseline_of(PAPER, "trained", "lcgd") == "gd" and plan.baseline_of(PAPER, "trained", "gd") is None
    no_gd = config(variants={"trained": ["lcgd"]})
    # gd is defined (the schema's default methods), but the variant does not run it
    assert plan.baseline_of(no_gd, "trained", "lcgd") is None and plan.report_baseline(no_gd) is None
    assert (plan.report_model(PAPER), plan.report_variant(PAPER)) == ("fairseq-1.3b", "trained")
    assert plan.report_methods(PAPER) == ["gd", "lcgd", "lcgd_clip", "gd_switched", "gd_linearized"]
    assert plan.report_variant(config(variants={"untrained": ["gd"]})) == "untrained"


def test_pairings_are_found_by_spec_not_by_name():
    assert plan.layer_causal_methods(PAPER, clipped=False) == ["lcgd"]
    assert plan.layer_causal_methods(PAPER, clipped=True) == ["lcgd_clip"]
    # each switched or linearized method after the method it differs from in that one respect
    assert plan.paper002_methods(PAPER) == ["gd", "gd_switched", "gd_linearized"]
    named = config(
        variants={"trained": ["plain", "wrong", "causal", "causal_wrong"]},
        methods={
            "plain": {"kind": "gd"},
            "wrong": {"kind": "gd", "demo_labels": "switched"},
            "causal": {"kind": "lcgd"},
            "causal_wrong": {"kind": "lcgd", "demo_labels": "switched"},
        },
        statistics={"baseline_method": "plain"},
    )
    assert plan.paper002_methods(named) == ["plain", "wrong", "causal", "causal_wrong"]
    assert plan.layer_causal_methods(named, clipped=False) == ["causal"]


def test_tables_and_figures_are_planned_where_the_config_has_their_data():
    assert plan.tables(PAPER) == [
        "accuracy",
        "methods",
        "intervals",
        "data",
        "variants",
        "layer_causal",
        "clipping",
        "paper002",
        "comparisons",
        "reproduction",
        "claims",
        "premise",
        "costs",
    ]
    assert plan.tables(DEFAULT) == [
        "accuracy",
        "methods",
        "intervals",
        "data",
        "variants",
        "layer_causal",
        "comparisons",
        "orders",
        "choice",  # the default's GD and LCGD choose their rates on development rows
        "reproduction",
        "claims",
        "premise",
        "costs",
    ]
    assert plan.figures(PAPER) == [
        "per_layer",
        "accuracy",
        "alpha",
        "grad_norms",
        "prediction_changes",
        "output_distributions",
        "reproduction",
        "claims",
        "premise",
    ]
    one = config(variants={"trained": ["lcgd"]}, report={"reproduction": False})
    assert plan.tables(one) == ["accuracy", "methods", "intervals", "data", "costs"]
    assert "alpha" not in plan.figures(one)
    two_models = config(models={"a": {"source": "builtin"}, "b": {"source": "builtin"}})
    assert plan.figures(two_models)[-5:] == ["models", "sizes", "reproduction", "claims", "premise"]


def test_learning_rate_sweeps_group_methods_that_differ_only_in_their_rate():
    sweep = config(
        variants={"trained": ["gd", "gd_x2", "lcgd"]},
        methods={"gd": {"kind": "gd"}, "gd_x2": {"kind": "gd", "lr_scale": 2.0}, "lcgd": {"kind": "lcgd"}},
        tasks={"sst2": None},
    )
    rows = plan.lr_sweeps(sweep)
    assert rows == [
        dict(group="GD", method="gd", task="sst2", lr=5e-4),
        dict(group="GD", method="gd_x2", task="sst2", lr=1e-3),
    ]
    assert "lr_sweep" in plan.figures(sweep) and plan.lr_sweeps(DEFAULT) == []
    sweep["methods"]["gd_x2"]["lr_scale"] = 1.0  # equal rates: nothing is swept
    assert plan.lr_sweeps(sweep) == [] and "lr_sweep" not in plan.figures(sweep)
    # rates of its own only (configs/lr-sweep-*.yaml): each group named by its kind
    own = load("configs/lr-sweep-reader.yaml")
    assert {r["group"] for r in plan.lr_sweeps(own)} == {"GD", "LCGD"}
    assert sorted({r["lr"] for r in plan.lr_sweeps(own) if r["group"] == "GD"}) == [
        1e-3,
        3e-3,
        1e-2,
        3e-2,
        0.1,
        0.3,
        1.0,
    ]


def test_the_gradient_norm_run_falls_back_only_from_the_default_task():
    assert plan.grad_norm_run(PAPER, "subj") == ("subj", 4)
    no_subj = config(tasks={"cb": None, "mr": None})
    assert plan.grad_norm_run(no_subj, "subj") == ("cb", 3)
    with pytest.raises(cfg.ConfigError, match="report.grad_norm_task: 'sst2'"):
        plan.grad_norm_run(config(tasks={"cb": None}, report={"grad_norm_task": "sst2"}), "subj")


def test_run_specs_hold_what_each_setting_depends_on():
    zsl, icl, gd = (plan.run_spec(PAPER, "sst2", s, 2) for s in ("zsl", "icl", "gd"))
    assert "k" not in zsl and "permutation" not in zsl  # ZSL uses no demonstrations
    assert (icl["k"], icl["permutation"], icl["demo_labels"]) == (32, 0, "gold")
    assert (gd["setting"], gd["kind"], gd["lr"], gd["ft_demos"]) == ("gd", "gd", 5e-4, "all")
    assert plan.run_spec(PAPER, "sst2", "icl", 4)["permutation"] == 2  # the third seed
    # a config edit changes the specs (the rerun trigger) of exactly the settings it concerns
    edited = {**PAPER, "k": 8}
    assert plan.run_spec(edited, "sst2", "zsl", 2) == zsl and plan.run_spec(edited, "sst2", "icl", 2) != icl
    for key, value in (("batch_size", 3), ("device", "cpu")):  # how a job runs, not what it computes
        assert plan.run_spec({**PAPER, key: value}, "sst2", "gd", 2) == gd
    for key, value in (
        ("dtype", "bfloat16"),
        ("cache_dtype", "float16"),
        ("max_eval", 7),
        ("record_position", "answer"),
    ):
        assert plan.run_spec({**PAPER, key: value}, "sst2", "zsl", 2) != zsl, key


class Recording(dict):
    """A run spec that records which of its keys are read."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key in self:  # an optional key left out (a spec as it was before the key: its default) is no read
            self.read.add(key)
        return super().get(key, default)


@pytest.mark.parametrize(
    "setting,order,separator",
    [("zsl", 0, "eos"), ("icl", 0, "eos"), ("gd", 0, "eos"), ("lin", 0, "eos"), ("icl", 1, "eos"), ("gd", 2, "eos")]
    + [("zsl", 0, "newline"), ("icl", 0, "newline")],
)
def test_an_extraction_reads_its_run_spec_whole_and_nothing_else_of_the_config(
    setting, order, separator, tmp_path, model_dirs
):
    """The job is handed the spec alone (no config), so it can read no value the rerun trigger
    does not see; and it reads every key of the spec, so no key reruns a job needlessly."""
    from tests.unit.activations.test_extract import _config, rows

    rows(12, 3).to_parquet(tmp_path / "train.parquet")
    rows(6, 4).to_parquet(tmp_path / "eval.parquet")
    conf = _config(
        methods={"gd": {"kind": "gd", "lr": 0.5}, "lin": {"kind": "linearized", "lr": 0.5}}, demo_separator=separator
    )
    spec = Recording(plan.run_spec(conf, "sst2", setting, 2, order=order))
    assert ("demo_separator" in spec) == (separator != "eos")
    extract.run(
        spec,
        model_name="tiny",
        variant="trained",
        model_dir=str(model_dirs["gpt2"]),
        device="cpu",
        train_path=str(tmp_path / "train.parquet"),
        eval_path=str(tmp_path / "eval.parquet"),
        out_path=str(tmp_path / "c.parquet"),
        train_log_path=str(tmp_path / "log.parquet"),
    )
    assert spec.read == set(spec), set(spec) - spec.read
    assert (
        "config"
        not in extract.run.__code__.co_varnames[
            : extract.run.__code__.co_argcount + extract.run.__code__.co_kwonlyargcount
        ]
    )
    assert run_extraction  # the tests' own helper plans its runs the same way


def test_figures_are_told_each_methods_kind():
    named = config(
        variants={"trained": ["vanilla", "causal"]},
        methods={"vanilla": {"kind": "gd"}, "causal": {"kind": "lcgd"}},
        statistics={"baseline_method": "vanilla"},
    )
    for figure in ("per_layer", "alpha"):
        assert plan.figure_params(named, figure)["kinds"] == {"vanilla": "gd", "causal": "lcgd"}
    assert "kinds" not in plan.figure_params(named, "grad_norms")


def test_the_separator_is_the_tasks_else_the_models_else_the_configs():
    conf = config(
        tasks={"sst2": None, "agnews": {"demo_separator": "eos"}, "mr": None},
        models={
            "chat": {"source": "hub", "id": "x/y", "demo_separator": "newline"},
            "base": {"source": "hub", "id": "x/z"},
        },
    )
    assert conf["demo_separator"] == "eos" and "demo_separator" not in conf["models"]["base"]
    assert cfg.demo_separator(conf, "sst2", "chat") == "newline" and cfg.demo_separator(conf, "sst2", "base") == "eos"
    assert cfg.demo_separator(conf, "agnews", "chat") == "eos"  # the task's own wins
    everywhere = {**conf, "demo_separator": "newline"}
    assert cfg.demo_separator(everywhere, "mr", "base") == "newline"
    with pytest.raises(ValueError, match="models.chat.demo_separator is set: say which model"):
        cfg.demo_separator(conf, "sst2")


def test_the_reference_separator_leaves_every_run_spec_as_it_was():
    """eos (the default) adds nothing to a spec, so a config that never names the key reruns no
    cache; newline enters every setting's spec, ZSL's too (a text's own newlines)."""
    chat = config(models={"chat": {"source": "hub", "id": "x/y", "demo_separator": "newline"}})
    plain = config(models={"chat": {"source": "hub", "id": "x/y"}})
    for setting in ("zsl", "icl", "gd"):
        before = plan.run_spec(plain, "sst2", setting, 2)
        assert "demo_separator" not in before and plan.run_spec(plain, "sst2", setting, 2, model="chat") == before
        assert plan.run_spec(chat, "sst2", setting, 2, model="chat") == {**before, "demo_separator": "newline"}


def test_development_queries_enter_every_spec_and_refuse_a_larger_k():
    """evaluate_on: evaluation (the default) leaves every spec as it was; development adds the held-out
    rows' recipe (all the task's seeds, the config's k) to ZSL's and every setting's spec, and a
    setting of more demonstrations than the held-out rows exclude is refused with the fix."""
    plain = config(n_seeds=1)
    development = {**plain, "evaluate_on": "development"}
    assert plain["evaluate_on"] == "evaluation"
    held = {"split": "development", "seeds": [2, 3, 4], "k": 32}
    for setting in ("zsl", "icl", "icl_k8", "gd"):
        before = plan.run_spec(plain, "sst2", setting, 2)
        assert "queries" not in before
        assert plan.run_spec(development, "sst2", setting, 2) == {**before, "queries": held}
    with pytest.raises(cfg.ConfigError, match="raise k to 64"):
        plan.run_spec(development, "sst2", "icl_k64", 2)


def test_a_method_that_chooses_gets_one_choice_per_model_variant_and_task():
    grid = {"lr": [0.3, 0.01], "epochs": [4, 1], "examples": 40}
    conf = config(
        tasks={"sst2": None, "cb": None},
        n_seeds=2,
        variants={"trained": ["gd", "best"], "untrained": ["best"]},
        methods={"gd": {"kind": "gd"}, "best": {"kind": "lcgd", "choose": grid}},
    )
    found = plan.choices(conf)
    assert found == [
        dict(model=m, variant=v, task=t, method="best")
        for m in conf["models"]
        for v in ("trained", "untrained")
        for t in ("sst2", "cb")
    ]
    # one job per (model, task), which makes each of its variants' choices
    assert plan.choice_jobs(conf) == [dict(model=m, task=t) for m in conf["models"] for t in ("sst2", "cb")]
    job = plan.choice_job_spec(conf, "tiny", "cb")
    assert [(c["variant"], c["method"]) for c in job["choices"]] == [("trained", "best"), ("untrained", "best")]
    spec = plan.choice_spec(conf, "tiny", "trained", "cb", "best")
    assert job["choices"][0] == {"variant": "trained", **spec}
    assert spec["grid"] == {"lr": [0.01, 0.3], "epochs": [1, 4]}  # ascending: the tie rule's order
    # each seed's own demonstrations, queries the development rows of every seed of the task
    assert [r["seed"] for r in spec["runs"]] == [3, 4] and {r["permutation"] for r in spec["runs"]} == {0, 1}
    for run in spec["runs"]:
        assert run["queries"] == {"split": "development", "seeds": [3, 4, 5], "k": 32} and run["max_eval"] == 40
        assert run["lr"] is None and "epochs" not in run and run["kind"] == "lcgd" and run["setting"] == "best"
    with pytest.raises(cfg.ConfigError, match="no choose key"):
        plan.choice_spec(conf, "tiny", "trained", "cb", "gd")
    # a job's spec carries its choice, a plan's the grid's most epochs; one epoch leaves the spec as it was
    assert plan.run_spec(conf, "cb", "best", 3, chosen={"lr": 0.3, "epochs": 4}) | {} == {
        **plan.run_spec(conf, "cb", "best", 3),
        "lr": 0.3,
        "epochs": 4,
    }
    assert plan.run_spec(conf, "cb", "best", 3)["lr"] is None and plan.run_spec(conf, "cb", "best", 3)["epochs"] == 4
    assert "epochs" not in plan.run_spec(conf, "cb", "best", 3, chosen={"lr": 0.3, "epochs": 1})
    assert "epochs" not in plan.run_spec(conf, "cb", "gd", 3)
    # a choosing method plays a published role only where no method plays it at the protocol's rate
    # (here layer-causal GD's), and is no point of a rate sweep; no role at both: no second reading
    assert plan.published_roles(conf) == {"gd": "gd", "lcgd": "best"} and plan.chosen_roles(conf) == {}
    assert plan.lr_sweeps(conf) == []
    both = config(
        variants={"trained": ["gd", "lcgd", "gd_best"]},
        methods={"gd": {"kind": "gd"}, "lcgd": {"kind": "lcgd"}, "gd_best": {"kind": "gd", "choose": grid}},
    )
    assert plan.published_roles(both) == {"gd": "gd", "lcgd": "lcgd"} and plan.chosen_roles(both) == {"gd": "gd_best"}
    assert "claims_chosen" in plan.tables(both) and "claims_chosen" not in plan.tables(conf)
    with pytest.raises(cfg.ConfigError, match="chooses its learning rate"):
        cfg.learning_rate(conf, "cb", "best")


def test_a_method_with_epochs_of_its_own_trains_that_many():
    conf = config(
        methods={"gd": {"kind": "gd"}, "gd3": {"kind": "gd", "epochs": 3}}, variants={"trained": ["gd", "gd3"]}
    )
    assert plan.run_spec(conf, "sst2", "gd3", 2)["epochs"] == 3
    assert plan.published_roles(conf) == {"gd": "gd"}


@pytest.mark.parametrize(
    "method, extra, message",
    [
        ({"kind": "gd", "lr": 0.1, "choose": {"lr": [0.1]}}, {}, "methods.best.lr sets it too"),
        ({"kind": "gd", "epochs": 2, "choose": {"lr": [0.1]}}, {}, "methods.best.epochs sets it too"),
        ({"kind": "gd", "choose": {"lr": [0.1]}}, {"evaluate_on": "development"}, "evaluate_on: development"),
        ({"kind": "gd", "choose": {"lr": []}}, {}, "methods.best.choose.lr"),
        ({"kind": "gd", "choose": {"epochs": [1]}}, {}, "'lr' is a required property"),
        ({"kind": "gd", "choose": {"lr": [0.1], "epoch": [1]}}, {}, "allowed keys here: epochs, examples, lr"),
    ],
)
def test_a_choice_that_cannot_work_stops_with_the_key_and_the_fix(method, extra, message):
    with pytest.raises(cfg.ConfigError, match=message):
        config(methods={"best": method}, variants={"trained": ["best"]}, **extra)


def test_the_premise_reads_further_seeds_that_no_claim_reads():
    """premise.seeds: the claims' seeds, then the rest of each task's, then the integers after them,
    each paired with the next demonstration permutation. On the further seeds, ZSL, ICL and ICL on
    permuted labels of the trained variant, and the finetuning of the methods premise.finetuning
    names; every other run, cache and order as without the key."""
    raw = yaml.safe_load((REPO / "configs/paper.yaml").read_text())
    plain = validation.validate({**raw, "n_seeds": 1}, SCHEMA)
    wider = validation.validate({**raw, "n_seeds": 1, "premise": {"seeds": 5}}, SCHEMA)
    assert cfg.premise_seeds(wider, "sst2") == [2, 3, 4, 5, 6] and cfg.task_seeds(wider, "sst2") == [2]
    assert cfg.premise_only_seeds(wider, "cb") == [4, 5, 6, 7] and cfg.premise_only_seeds(plain, "cb") == []
    assert [cfg.permutation_index(wider, "sst2", s) for s in (2, 4, 5, 6)] == [0, 2, 3, 4]
    assert plan.runs(wider) == plan.runs(plain) and plan.order_runs(wider) == plan.order_runs(plain)
    assert plan.premise_runs(wider) == [] and plan.premise_runs(plain) == plan.premise_icl_runs(plain) == []
    icl_only = plan.premise_icl_runs(wider)
    assert len(icl_only) == 6 * 4 and {(r["variant"], r["method"]) for r in icl_only} == {("trained", "gd")}
    added = {tuple(c.values()) for c in plan.extractions(wider)} - {tuple(c.values()) for c in plan.extractions(plain)}
    # per task and further seed: ICL, and ICL on permuted labels and on novel label words; no
    # finetuned model, no further ZSL
    assert {c[-1] for c in added} == {"icl", "icl_permuted", "icl_novel"} and len(added) == 6 * 4 * 3
    assert plan.permuted_runs(wider) - plan.permuted_runs(plain) == {
        (r["model"], r["variant"], r["task"], r["seed"]) for r in icl_only
    }
    # a finetuning method named there finetunes on the further seeds too; the premise's own method
    # then needs no run of its own without one
    both = validation.validate({**raw, "premise": {"seeds": 4, "finetuning": ["gd", "lcgd"]}}, SCHEMA)
    assert plan.premise_icl_runs(both) == []
    assert {(r["task"], r["seed"], r["method"]) for r in plan.premise_runs(both) if r["task"] == "sst2"} == {
        ("sst2", 5, "gd"),
        ("sst2", 5, "lcgd"),
    }
    assert dict(task="sst2", seed=5, setting="lcgd") in [
        {k: c[k] for k in ("task", "seed", "setting")} for c in plan.extractions(both)
    ]
    assert plan.run_spec(both, "sst2", "lcgd", 5)["permutation"] == 3


@pytest.mark.parametrize(
    "premise, extra, message",
    [
        ({"finetuning": ["gd_switched"]}, {}, "premise.finetuning names 'gd_switched', which the trained variant"),
        ({"seeds": 5}, {"report": {"reproduction": False}}, "premise.seeds: this config reads no premise"),
    ],
)
def test_a_premise_that_cannot_be_read_stops_with_the_key_and_the_fix(premise, extra, message):
    raw = {
        "tasks": {"sst2": None},
        "methods": {"gd": {"kind": "gd"}, "gd_switched": {"kind": "gd"}},
        "variants": {"trained": ["gd"]},
    }
    with pytest.raises(cfg.ConfigError, match=message):
        validation.check_names(checked := validation.validate({**raw, "premise": premise, **extra}, SCHEMA))
        plan.extractions(checked)
