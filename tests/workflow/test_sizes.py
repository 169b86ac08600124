"""Metrics against model size: each model's parameter count from its own folder, the sizes figure,
and a size sweep through the whole workflow on built-in models of two sizes."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from icl_gd.config import validation
from icl_gd.models import loading
from icl_gd.planning import plan
from icl_gd.report import figures  # noqa: E402
from tests.workflow.test_workflow import REPO, TINY, checkout, snakemake  # noqa: E402


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_the_parameter_count_is_what_the_model_holds(model_dirs, load_tiny, arch):
    """Counted from the safetensors headers, without loading a weight: tied embeddings once."""
    model = load_tiny(arch)
    assert loading.parameter_count(model_dirs[arch]) == sum(p.numel() for p in model.parameters())
    stats = loading.model_statistics("m", model_dirs[arch])
    assert (stats["n_layers"], stats["hidden_size"]) == (model.config.num_hidden_layers, model.config.hidden_size)


def test_a_folder_without_safetensors_is_named(tmp_path):
    with pytest.raises(loading.UnsupportedModelError, match="no .safetensors file"):
        loading.parameter_count(tmp_path)


def test_the_sizes_figure_puts_each_model_at_its_parameter_count():
    rows = []
    for model, acc in (("small", 0.6), ("large", 0.8)):
        for task in ("sst2", "cb"):
            for metric in ("acc_zsl", "acc_icl", "acc_ft", "simaou_norm", "simam_delta"):
                rows.append(
                    dict(
                        model=model,
                        variant="trained",
                        task=task,
                        method="gd",
                        metric=metric,
                        layer=pd.NA,
                        mean=acc,
                        std=np.nan,
                        n=1,
                        ci_low=acc - 0.05,
                        ci_high=acc + 0.05,
                    )
                )
    sizes = pd.DataFrame({"model": ["small", "large"], "n_parameters": [1_000_000, 30_000_000]})
    fig = figures.sizes_figure(pd.DataFrame(rows), sizes)
    line = fig.axes[1].containers[0].lines[0]
    assert list(line.get_xdata()) == [1_000_000, 30_000_000] and list(line.get_ydata()) == pytest.approx([60, 80])
    assert fig.axes[1].get_xlabel() == "Parameters" and fig.axes[1].get_xscale() == "log"


@pytest.mark.slow
def test_a_size_sweep_of_built_in_models(tmp_path):
    base = TINY["models"]["tiny"]
    config = {
        **TINY,
        "models": {"small": {**base, "n_embd": 16}, "large": {**base, "n_embd": 48, "n_layer": 3}},
        "variants": {"trained": ["gd"]},
        "tasks": {"sst2": {"source": "synthetic"}},
        "n_seeds": 1,
        "report": {"reproduction": False},
    }
    assert plan.figures(
        validation.validate(dict(config), yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text()))
    )[-2:] == ["models", "sizes"]
    workdir = checkout(tmp_path / "clone")
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake(workdir, "--cores", "2")
    sizes = pd.read_parquet(workdir / "results/metrics/models.parquet").set_index("model")
    assert sizes.loc[["small", "large"], "n_layers"].tolist() == [2, 3]
    assert sizes.loc[["small", "large"], "hidden_size"].tolist() == [16, 48]
    for name in ("small", "large"):
        model = loading.load_model(workdir / f"resources/models/{name}/trained", device="cpu")
        assert sizes.loc[name, "n_parameters"] == sum(p.numel() for p in model.parameters())
    assert (workdir / "results/reports/figures/sizes.png").stat().st_size > 10_000
