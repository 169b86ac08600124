"""A choice job on a tiny model: it reads development rows only, and scores each grid point on
the weights that a run of that rate and those epochs trains."""

import numpy as np
import pandas as pd
import pytest
import torch

from icl_gd.activations import cache, choice, training
from icl_gd.planning import plan
from tests.conftest import run_extraction
from tests.unit.activations.test_extract import _config, rows

GRID = {"lr": [0.05, 0.5, 5.0], "epochs": [1, 2], "examples": 6}


def _choosing(**overrides):
    config = _config(tasks={"sst2": {"seeds": [2, 3]}}, **overrides)
    config["methods"] = {"gd": {"kind": "gd", "choose": GRID}}
    return config


@pytest.fixture
def files(tmp_path):
    train, evaluation = tmp_path / "train.parquet", tmp_path / "eval.parquet"
    rows(30, 3).to_parquet(train)
    rows(9, 4).to_parquet(evaluation)
    return train, evaluation


def grid_of(config, model_dir, train, evaluation) -> pd.DataFrame:
    spec = plan.choice_spec(config, "tiny", "trained", "sst2", "gd")
    return choice.run_grid(
        spec, model_dir=str(model_dir), train_path=str(train), eval_path=str(evaluation), device="cpu"
    )


def test_a_choice_reads_no_evaluation_example(tmp_path, model_dirs, files):
    """Evaluation rows poisoned (other texts, every label flipped), or no evaluation file at all:
    the same table, to the last digit."""
    train, evaluation = files
    config = _choosing()
    table = grid_of(config, model_dirs["gpt2"], train, evaluation)
    poisoned = rows(9, 99).assign(label=lambda f: 1 - f["label"])
    poisoned.to_parquet(tmp_path / "poisoned.parquet")
    pd.testing.assert_frame_equal(grid_of(config, model_dirs["gpt2"], train, tmp_path / "poisoned.parquet"), table)
    pd.testing.assert_frame_equal(grid_of(config, model_dirs["gpt2"], train, tmp_path / "absent.parquet"), table)
    # every (seed, rate, epochs) of the grid, each on the six development rows
    assert len(table) == 2 * 3 * 2 and (table["n_examples"] == 6).all()
    assert set(zip(table["lr"], table["epochs"])) == {(lr, e) for lr in GRID["lr"] for e in GRID["epochs"]}
    assert table["zsl_accuracy"].nunique() == 1  # the model as it is: one score, the same rows


def test_a_grid_point_is_scored_on_the_weights_its_run_trains(tmp_path, model_dirs, files):
    """The choice's accuracy at (lr, 2 epochs) is that of the extraction job at that rate and two
    epochs, read on the development rows."""
    train, evaluation = files
    table = grid_of(_choosing(), model_dirs["gpt2"], train, evaluation)
    config = _config(tasks={"sst2": {"seeds": [2, 3]}}, evaluate_on="development", max_eval=GRID["examples"])
    for lr in (0.5, 5.0):
        config["methods"] = {"gd": {"kind": "gd", "lr": lr, "epochs": 2}}
        out = tmp_path / f"gd{lr}.arrow"
        run_extraction(
            config,
            model_name="tiny",
            variant="trained",
            task="sst2",
            seed=3,
            setting="gd",
            model_dir=str(model_dirs["gpt2"]),
            train_path=str(train),
            eval_path=str(evaluation),
            out_path=str(out),
        )
        run = cache.read_cache(out)
        assert run.meta["epochs"] == 2 and run.meta["n_train_steps"] == 2 * 3
        point = table[(table["seed"] == 3) & (table["lr"] == lr) & (table["epochs"] == 2)]
        assert point["accuracy"].item() == float(np.mean(run.pred == run.gold))


def test_epochs_are_passes_in_one_order_on_one_set_of_weights(load_tiny, sentences):
    """Two passes of finetune_epochs are finetune over the sequences twice, step for step."""
    once, twice = load_tiny("gpt2"), load_tiny("gpt2")
    seen = []
    log = training.finetune_epochs(
        once, sentences, 2, lr=0.3, kind="gd", after_epoch=lambda e, pass_log: seen.append((e, len(pass_log["loss"])))
    )
    training.finetune(twice, sentences + sentences, lr=0.3, kind="gd")
    for a, b in zip(training.kv_parameters(once), training.kv_parameters(twice)):
        torch.testing.assert_close(a.param, b.param, rtol=0, atol=0)
    assert seen == [(1, 3), (2, 3)] and len(log["loss"]) == 6
