"""benchmarks/setting_choice.py: the development caches it asks for, the choice it reads from
hand-made ones (and its refusal of a cache of the other separator or of the evaluation examples),
and the premise at the chosen setting read from hand-made evaluation caches with ten seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests import benchmark_scripts

SEEDS = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
CONFIG = {"models": {"m": {}}, "tasks": {"sst2": {"seeds": SEEDS}}, "k": 32, "n_seeds": 3}
GOLD = np.array([0, 1] * 20)


def _script():
    return benchmark_scripts.load("setting_choice")


def _write(folder: Path, path: str, pred: np.ndarray, separator: str, split: str, gold=GOLD, **meta) -> None:
    queries = {"split": split} if split == "evaluation" else {"split": split, "seeds": SEEDS, "k": 32}
    benchmark_scripts.write_predictions(
        folder / path, gold, pred, {"demo_separator": separator, "queries": queries, **meta}
    )


def _right(share: float, rng) -> np.ndarray:
    """Predictions right on ``share`` of the examples, wrong on the rest."""
    right = rng.permutation(len(GOLD)) < round(share * len(GOLD))
    return np.where(right, GOLD, 1 - GOLD)


def test_the_development_caches_are_the_k_sweeps_with_the_protocols_seeds():
    script = _script()
    paths = script.sweep.cache_paths(CONFIG, script.KS)
    assert [r["path"] for r in paths][:2] == [
        "results/activations/m/trained/sst2/seed2/zsl.arrow",
        "results/activations/m/trained/sst2/seed2/icl_k4.arrow",
    ]
    assert len(paths) == 1 + 3 * 4 and {r["seed"] for r in paths} == {2, 3, 4}


def test_the_choice_from_hand_made_development_caches(tmp_path, capsys):
    """newline at k = 8 gains most; a folder holding the other separator's caches is refused."""
    script = _script()
    rng = np.random.default_rng(0)
    folders = {s: tmp_path / s for s in script.SEPARATORS}
    for separator, folder in folders.items():
        for row in script.sweep.cache_paths(CONFIG, script.KS):
            best = separator == "newline" and row["k"] == 8
            share = 0.5 if row["setting"] == "zsl" else (0.9 if best else 0.6)
            _write(folder, row["path"], _right(share, rng), separator, "development")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    script.main(
        [
            "--config",
            str(tmp_path / "config.yaml"),
            "--choose",
            *(f"{s}={f}" for s, f in folders.items()),
            "--out",
            str(tmp_path / "choice.csv"),
        ]
    )
    choice = pd.read_csv(tmp_path / "choice.csv")
    assert choice[["separator", "k"]].values.tolist() == [["newline", 8]] and choice["gain"].iloc[0] == pytest.approx(
        0.4
    )
    assert "newline, k = 8" in capsys.readouterr().out
    with pytest.raises(ValueError, match="'eos'.*'newline'"):
        script.development_table(CONFIG, {"newline": folders["eos"]})
    targets = script.premise_targets(CONFIG, choice, "newline")
    assert len(targets) == 1 + 2 * len(SEEDS) and targets[-1].endswith("seed11/icl_permuted_k8.arrow")
    assert script.premise_targets(CONFIG, choice, "eos") == []


@pytest.mark.parametrize("learns", [True, False])
def test_the_premise_at_the_chosen_setting_reads_all_ten_seeds(tmp_path, learns):
    """ICL right on 90% of 40 examples in every seed against ZSL's 50% and labels followed: it
    learns; ICL at ZSL's accuracy: it does not. Ten seeds each, read as the workflow's premise."""
    script = _script()
    rng = np.random.default_rng(1)
    choice = pd.DataFrame([dict(model="m", task="sst2", separator="eos", k=16, gain=0.3, gains=True)])
    folder = tmp_path / "eos"
    root = "results/activations/m/trained/sst2"
    _write(folder, f"{root}/seed2/zsl.arrow", _right(0.5, rng), "eos", "evaluation")
    for seed in SEEDS:
        _write(folder, f"{root}/seed{seed}/icl_k16.arrow", _right(0.9 if learns else 0.5, rng), "eos", "evaluation")
        permuted = 1 - GOLD
        _write(
            folder,
            f"{root}/seed{seed}/icl_permuted_k16.arrow",
            np.where(rng.random(len(GOLD)) < 0.9, permuted, GOLD),
            "eos",
            "evaluation",
            gold=permuted,
            demo_labels="permuted",
        )
    table = script.premise_reading(CONFIG, choice, {"eos": folder})
    row = table.iloc[0]
    assert (row["separator"], row["k"], row["n_seeds"], row["n_examples"]) == ("eos", 16, 10, 40)
    assert bool(row["learns"]) is learns and row["icl_permuted_majority_status"] == "holds"
    assert row["level"] == pytest.approx(1 - 0.05 / 3)  # one task, three cells
    cells = script.premise_markdown(table).splitlines()[2].split(" | ")
    assert cells[4:7] == [f"{row['zsl']:.1f}", f"{row['icl']:.1f}", f"{row['majority']:.1f}"]  # in points
    assert 0 < row["zsl"] <= 100 and 0 < row["icl"] <= 100
    with pytest.raises(ValueError, match="'evaluation'.*'development'"):  # not a development run's folder
        script.development_table(CONFIG, {"eos": folder})
