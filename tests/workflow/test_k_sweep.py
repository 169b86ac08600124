"""A sweep over the number of demonstrations: ``methods.<name>.k``, its own ICL setting, the plan
that reruns only what a new k needs, and the k_sweep table and figure."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from icl_gd.activations import cache  # noqa: E402
from icl_gd.config import resolve as cfg  # noqa: E402
from icl_gd.config import validation
from icl_gd.config.resolve import ConfigError  # noqa: E402
from icl_gd.planning import plan
from icl_gd.report import figures, outputs, tables
from tests.conftest import run_extraction  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
SWEEP = {
    "gd_k2": {"kind": "gd", "k": 2},
    "gd": {"kind": "gd"},
    "gd_k8": {"kind": "gd", "k": 8},
    "lcgd_k2": {"kind": "lcgd", "k": 2},
    "lcgd": {"kind": "lcgd"},
    "gd_sw_k2": {"kind": "gd", "k": 2, "demo_labels": "switched"},
}


def config(**raw) -> dict:
    return validation.validate({"tasks": {"sst2": {}, "cb": {}}, "k": 4, **raw}, SCHEMA)


def test_a_method_with_its_own_k_is_compared_with_icl_on_the_same_demonstrations():
    c = config(methods=SWEEP, variants={"trained": list(SWEEP)})
    assert [cfg.icl_setting(c, m) for m in SWEEP] == ["icl_k2", "icl", "icl_k8", "icl_k2", "icl", "icl_switched_k2"]
    assert plan.run_settings(c, "gd_k8") == ["zsl", "icl_k8", "gd_k8"]
    spec = plan.run_spec(c, "sst2", "icl_switched_k2", 2)
    assert (spec["k"], spec["demo_labels"]) == (2, "switched")
    assert plan.run_spec(c, "sst2", "gd_k8", 2)["k"] == plan.run_spec(c, "sst2", "icl_k8", 2)["k"] == 8
    settings = {x["setting"] for x in plan.extractions(c)}
    # and the premise's ICL on permuted labels and on novel label words, at the top-level k only
    assert settings == {"zsl", "icl", "icl_k2", "icl_k8", "icl_switched_k2", "icl_permuted", "icl_novel", *SWEEP}
    # a method whose k is the top-level k is the plain one: the same ICL setting, the same caches
    same = config(
        methods={"gd": {"kind": "gd"}, "gd_k4": {"kind": "gd", "k": 4}}, variants={"trained": ["gd", "gd_k4"]}
    )
    assert cfg.icl_setting(same, "gd_k4") == "icl"


def test_adding_a_k_reruns_only_its_own_jobs():
    """Every job's parameters (plan.run_spec: Snakemake's params trigger) are unchanged for the
    settings that were there before a k was added."""
    before = config(methods={"gd": {"kind": "gd"}}, variants={"trained": ["gd"]})
    after = config(
        methods={"gd": {"kind": "gd"}, "gd_k2": {"kind": "gd", "k": 2}}, variants={"trained": ["gd", "gd_k2"]}
    )
    old = {(x["task"], x["seed"], x["setting"]) for x in plan.extractions(before)}
    new = {(x["task"], x["seed"], x["setting"]) for x in plan.extractions(after)}
    assert {s for _, _, s in new - old} == {"icl_k2", "gd_k2"}
    for task, seed, setting in old:
        assert plan.run_spec(before, task, seed=seed, setting=setting) == plan.run_spec(
            after, task, seed=seed, setting=setting
        )


def test_setting_names_of_the_sweep_are_reserved():
    for name in ("icl_k8", "icl_switched_k2", "icl_permuted", "icl_novel", "zsl"):
        with pytest.raises(ConfigError, match=f"methods.{name}: zsl and icl.* are reserved"):
            config(methods={name: {"kind": "gd"}}, variants={"trained": [name]})
    with pytest.raises(ConfigError, match="methods.gd.k"):
        config(methods={"gd": {"kind": "gd", "k": 0}}, variants={"trained": ["gd"]})
    assert cfg.is_base_setting("icl_k16") and not cfg.is_base_setting("icl_k") and not cfg.is_base_setting("gd_k8")


def test_k_sweeps_group_methods_that_differ_only_in_k():
    c = config(methods=SWEEP, variants={"trained": list(SWEEP)})
    rows = pd.DataFrame(plan.k_sweeps(c))
    assert {g: sorted(set(r["k"])) for g, r in rows.groupby("group")} == {"GD": [2, 4, 8], "LCGD": [2, 4]}
    assert set(rows["task"]) == {"sst2", "cb"} and "gd_sw_k2" not in set(rows["method"])  # alone in its group
    assert "k_sweep" in plan.tables(c) and "k_sweep" in plan.figures(c) and not plan.lr_sweeps(c)
    plain = config(methods={"gd": {"kind": "gd"}}, variants={"trained": ["gd"]})
    assert plan.k_sweeps(plain) == [] and "k_sweep" not in plan.tables(plain) + plan.figures(plain)


def test_an_icl_setting_with_its_own_k_runs_the_first_k_demonstrations(tmp_path, model_dirs):
    from tests.unit.activations.test_extract import _config, rows

    train, evaluation = tmp_path / "train.parquet", tmp_path / "eval.parquet"
    rows(12, 3).to_parquet(train)
    rows(5, 4).to_parquet(evaluation)
    common = dict(
        model_name="tiny",
        variant="trained",
        task="sst2",
        seed=2,
        model_dir=str(model_dirs["gpt2"]),
        train_path=str(train),
        eval_path=str(evaluation),
    )
    methods = {"gd": {"kind": "gd", "lr": 0.5}, "gd_k1": {"kind": "gd", "lr": 0.5, "k": 1}}
    run_extraction(_config(methods=methods), setting="icl", out_path=str(tmp_path / "icl.arrow"), **common)
    run_extraction(_config(methods=methods), setting="icl_k1", out_path=str(tmp_path / "icl_k1.arrow"), **common)
    run_extraction(_config(methods=methods), setting="gd_k1", out_path=str(tmp_path / "gd_k1.arrow"), **common)
    icl, icl_k1, gd_k1 = (cache.read_cache(tmp_path / f"{s}.arrow") for s in ("icl", "icl_k1", "gd_k1"))
    assert (icl.meta["k"], icl_k1.meta["k"], gd_k1.meta["k"]) == (3, 1, 1)
    assert icl_k1.meta["demo_ids"] == icl.meta["demo_ids"][:1] == gd_k1.meta["demo_ids"]
    assert icl_k1.meta["n_context"] < icl.meta["n_context"]


def _summary():
    out = []
    for task in ("sst2", "cb"):
        for method, k in (("gd_k2", 2), ("gd", 4), ("gd_k8", 8)):
            for metric, value in (
                ("acc_zsl", 0.5),
                ("acc_icl", 0.5 + 0.05 * k),
                ("acc_ft", 0.6),
                ("simaou_norm", 0.02 * k),
                ("simam_delta", 0.1),
            ):
                out.append(
                    dict(
                        model="m",
                        variant="trained",
                        task=task,
                        method=method,
                        metric=metric,
                        layer=pd.NA,
                        mean=value,
                        std=np.nan,
                        n=1,
                        ci_low=value - 0.01,
                        ci_high=value + 0.01,
                    )
                )
    return pd.DataFrame(out)


def test_the_k_sweep_table_and_figure(tmp_path):
    sweep = [
        dict(group="GD", method=m, task=t, k=k)
        for m, k in (("gd_k8", 8), ("gd_k2", 2), ("gd", 4))
        for t in ("sst2", "cb")
    ]
    table = tables.k_sweep_table(_summary(), "m", "trained", sweep)
    assert list(table.index)[:3] == [
        ("ZSL Accuracy (%)", "GD, k = 2"),
        ("ZSL Accuracy (%)", "GD, k = 4"),
        ("ZSL Accuracy (%)", "GD, k = 8"),
    ]
    assert table.loc[("ICL Accuracy (%)", "GD, k = 8"), "SST2"] == "90.00 [89.00, 91.00]"
    assert table.loc[("SimAOU_norm", "GD, k = 2"), "CB"] == "0.04 [0.03, 0.05]"
    fig = figures.k_sweep_figure(_summary(), "m", pd.DataFrame(sweep))
    icl_axis = fig.axes[1]
    line = icl_axis.containers[0]
    assert list(line.lines[0].get_xdata()) == [2, 4, 8] and list(line.lines[0].get_ydata()) == pytest.approx(
        [60, 70, 90]
    )
    assert icl_axis.get_xlabel() == "Demonstrations (k)" and icl_axis.get_xscale() == "log"
    _summary().to_parquet(tmp_path / "summary.parquet")
    paths = [str(tmp_path / f"k_sweep.{ext}") for ext in ("png", "pdf")]
    outputs.write_figures(
        None,
        str(tmp_path / "summary.parquet"),
        paths,
        model="m",
        variant="trained",
        methods=["gd_k2", "gd", "gd_k8"],
        k_sweep=sweep,
    )
    assert (tmp_path / "k_sweep.png").stat().st_size > 10_000
