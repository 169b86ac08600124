"""benchmarks/icl_k_sweep.py: the caches it asks the workflow for, its verdict, and its table read
from hand-made caches (one task where ICL learns, one where it collapses onto one class)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests import benchmark_scripts

REPO = Path(__file__).resolve().parents[2]


def _sweep():
    return benchmark_scripts.load("icl_k_sweep")


CONFIG = {"models": {"m": {}}, "tasks": {"sst2": {}, "agnews": {}}, "k": 32}


def test_targets_name_the_workflows_settings():
    sweep = _sweep()
    paths = [r["path"] for r in sweep.cache_paths(CONFIG, ks=(8, 32))]
    # ZSL once per task, in its first seed's folder; ICL at the config's k is plain icl
    assert paths[:3] == [
        "results/activations/m/trained/sst2/seed2/zsl.arrow",
        "results/activations/m/trained/sst2/seed2/icl_k8.arrow",
        "results/activations/m/trained/sst2/seed2/icl.arrow",
    ]
    assert len(paths) == 2 * (1 + 3 * 2)
    assert "results/activations/m/trained/agnews/seed5/icl_k8.arrow" in paths
    assert sum(p.endswith("zsl.arrow") for p in paths) == 2


@pytest.mark.parametrize(
    ("icl", "baseline", "verdict"),
    [
        ([0.80, 0.82, 0.84], 0.60, True),  # every seed above, small spread
        ([0.95, 0.55, 0.90], 0.60, False),  # one seed below
        ([0.62, 0.70, 0.90], 0.60, False),  # above, but the spread swallows the gain (t < 2.92)
        ([0.70, 0.70, 0.70], 0.60, True),  # no spread at all
        ([0.27, 0.27, 0.27], 0.59, False),
    ],
)
def test_the_verdict_needs_every_seed_and_the_seeds_noise(icl, baseline, verdict):
    gain, _, learns = _sweep().learns(icl, baseline)
    assert learns is verdict
    assert gain == pytest.approx(np.mean(icl) - baseline)


def _write(path: Path, gold: np.ndarray, pred: np.ndarray, true_k: int | None) -> None:
    benchmark_scripts.write_predictions(path, gold, pred, {"true_k": true_k} if true_k else {})


def test_the_table_from_hand_made_caches(tmp_path, capsys):
    sweep = _sweep()
    rng = np.random.default_rng(0)
    sst2 = np.array([0] * 10 + [1] * 10)
    agnews = np.array([0] * 5 + [1] * 7 + [2] * 5 + [3] * 3)
    for row in sweep.cache_paths(CONFIG, ks=(8, 32)):
        gold = sst2 if row["task"] == "sst2" else agnews
        if row["setting"] == "zsl":
            pred = np.where(np.arange(len(gold)) < 12, gold, (gold + 1) % (gold.max() + 1))  # 12 of 20 right
        elif row["task"] == "sst2":  # learns: 17-19 of 20 right
            pred = gold.copy()
            wrong = rng.choice(len(gold), 1 + row["seed"] % 3, replace=False)
            pred[wrong] = 1 - pred[wrong]
        else:  # collapses onto class 1
            pred = np.ones_like(gold)
        _write(tmp_path / row["path"], gold, pred, row["k"])
    out = tmp_path / "table.csv"
    sweep.main(["--dir", str(tmp_path), "--ks", "8,32", "--out", str(out), "--config", str(_config(tmp_path))])
    printed = capsys.readouterr().out
    table = sweep.summarise(sweep.measure(CONFIG, tmp_path, ks=(8, 32)), ks=(8, 32))
    sst2_rows = [r for r in table if r["task"] == "sst2"]
    agnews_rows = [r for r in table if r["task"] == "agnews"]
    assert all(r["learns"] for r in sst2_rows) and not any(r["learns"] for r in agnews_rows)
    assert all(r["zsl"] == pytest.approx(0.6) and r["majority"] == 0.5 for r in sst2_rows)
    assert all(r["majority"] == pytest.approx(0.35) for r in agnews_rows)
    assert all(share == 1.0 and label == 1 for r in agnews_rows for label, share in r["collapse"])
    assert all(r["icl_mean"] == pytest.approx(0.35) and r["icl_sd"] == 0 for r in agnews_rows)
    assert "| m | agnews | 32 | 60 | 35 | 35.0 ± 0.0 | 35, 35, 35 | 1: 1.00, 1: 1.00, 1: 1.00 | 32, 32, 32 |" in printed
    wide = sweep.wide(table, ks=(8, 32)).splitlines()
    assert wide[2].startswith("| m | eos | sst2 | 60 | 50 | **") and "35.0 ± 0.0 (1.00-1.00)" in wide[3]
    lines = out.read_text().splitlines()
    assert lines[0].startswith("model,task,k,seed,true_k") and len(lines) == 1 + 2 * 2 * 3


def test_evaluation_examples_must_match(tmp_path):
    sweep = _sweep()
    gold = np.array([0, 1] * 5)
    config = {"models": {"m": {}}, "tasks": {"sst2": {}}, "k": 32}
    for row in sweep.cache_paths(config, ks=(32,)):
        _write(tmp_path / row["path"], gold, gold, 32)
    rows = sweep.measure(config, tmp_path, ks=(32,))
    rows[1]["example_ids"] = tuple(range(1, 11))
    with pytest.raises(ValueError, match="different examples"):
        sweep.summarise(rows, ks=(32,))


def _config(folder: Path) -> Path:
    import yaml

    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    return path
