"""The rule that picks a setting on the development set (icl_gd.metrics.setting_choice), on hand-made tables."""

import pandas as pd
import pytest

from icl_gd.metrics import setting_choice


def dev(rows):
    """(model, task, separator, k, [ICL per seed], ZSL) -> one row per seed."""
    out = []
    for model, task, separator, k, icl, zsl in rows:
        out += [
            dict(model=model, task=task, separator=separator, k=k, seed=s, icl=a, zsl=zsl) for s, a in enumerate(icl)
        ]
    return pd.DataFrame(out)


def test_the_largest_mean_gain_over_seeds_is_chosen_per_model_and_task():
    table = dev(
        [
            ("m", "sst2", "eos", 4, [0.60, 0.70, 0.80], 0.60),  # +0.10
            ("m", "sst2", "newline", 16, [0.90, 0.50, 0.85], 0.55),  # +0.20 on average, one seed below ZSL
            ("m", "sst2", "eos", 32, [0.62, 0.61, 0.63], 0.60),
            ("m", "mr", "eos", 4, [0.55, 0.56, 0.57], 0.50),  # +0.06
            ("m", "mr", "newline", 4, [0.52, 0.53, 0.54], 0.50),
        ]
    )
    chosen = setting_choice.choose(table).set_index("task")
    assert (chosen.loc["sst2", "separator"], chosen.loc["sst2", "k"]) == ("newline", 16)
    assert chosen.loc["sst2", "gain"] == pytest.approx(0.20) and chosen.loc["sst2", "n_candidates"] == 3
    assert (chosen.loc["mr", "separator"], chosen.loc["mr", "k"]) == ("eos", 4) and chosen.loc["mr", "gains"]
    gains = setting_choice.candidate_gains(table)
    assert len(gains) == 5 and gains["gain"].max() == pytest.approx(0.20)


def test_a_tie_goes_to_the_setting_nearer_the_protocol():
    table = dev(
        [
            ("m", "cb", "newline", 32, [0.7], 0.5),
            ("m", "cb", "eos", 4, [0.7], 0.5),
            ("m", "cb", "eos", 16, [0.7], 0.5),
            ("m", "cb", "eos", 8, [0.6], 0.5),
        ]
    )
    row = setting_choice.choose(table).iloc[0]
    # the reference's separator first, then the k nearest 32
    assert (row["separator"], row["k"], row["tied"]) == ("eos", 16, 3)
    # equally far from the protocol's k: the larger
    row = setting_choice.choose(dev([("m", "cb", "eos", 8, [0.7], 0.5), ("m", "cb", "eos", 24, [0.7], 0.5)]), 16).iloc[
        0
    ]
    assert row["k"] == 24


def test_where_nothing_gains_the_protocols_setting_stands():
    table = dev(
        [
            ("m", "agnews", "newline", 4, [0.50, 0.60], 0.60),  # -0.05
            ("m", "agnews", "eos", 32, [0.27, 0.27], 0.59),
            ("m", "agnews", "eos", 8, [0.59, 0.59], 0.59),  # 0: no gain
        ]
    )
    row = setting_choice.choose(table).iloc[0]
    assert (row["separator"], row["k"], row["gains"], row["tied"]) == ("eos", 32, False, 0)
    assert row["gain"] == pytest.approx(-0.32)
    with pytest.raises(ValueError, match=r"lacks columns \['zsl'\]"):
        setting_choice.choose(table.drop(columns="zsl"))


def _grid(points: dict) -> pd.DataFrame:
    """(lr, epochs) -> per-seed development accuracies."""
    return pd.DataFrame(
        [
            dict(seed=seed, lr=lr, epochs=e, accuracy=a)
            for (lr, e), accs in points.items()
            for seed, a in enumerate(accs)
        ]
    )


def test_the_finetuning_choice_is_the_best_mean_over_seeds():
    # 0.1 wins on the mean (0.7) though 1.0 has the best single seed
    grid = _grid({(0.01, 1): [0.5, 0.5], (0.1, 1): [0.7, 0.7], (1.0, 1): [0.9, 0.3]})
    assert setting_choice.finetuning_choice(grid) == (0.1, 1)


def test_a_tie_goes_to_the_smaller_rate_then_the_fewer_epochs():
    grid = _grid({(1.0, 1): [0.8, 0.6], (0.1, 4): [0.7, 0.7], (0.1, 2): [0.6, 0.8], (0.3, 1): [0.7, 0.7]})
    assert setting_choice.finetuning_choice(grid) == (0.1, 2)
    # a difference within the tolerance is a tie; beyond it, not
    grid = _grid({(0.1, 1): [0.7], (0.3, 1): [0.7 + 1e-12]})
    assert setting_choice.finetuning_choice(grid) == (0.1, 1)
    grid = _grid({(0.1, 1): [0.7], (0.3, 1): [0.71]})
    assert setting_choice.finetuning_choice(grid) == (0.3, 1)


def test_the_choice_table_marks_one_point_and_keeps_every_seed():
    grid = _grid({(0.01, 1): [0.5, 0.6], (0.01, 2): [0.6, 0.8], (0.1, 1): [0.7, 0.3]}).assign(
        model="m",
        variant="trained",
        task="sst2",
        method="gd",
        kind="gd",
        n_examples=50,
        zsl_accuracy=0.4,
        loss=1.0,
        skipped=0,
    )
    table = setting_choice.mark_finetuning_choice(grid)
    assert list(table.columns) == setting_choice.FINETUNING_COLUMNS
    assert len(table) == 6 and table["chosen"].sum() == 2  # the chosen point's rows, one per seed
    assert setting_choice.chosen_of(table) == {"lr": 0.01, "epochs": 2}
    assert table.loc[table["chosen"], "mean_accuracy"].tolist() == pytest.approx([0.7, 0.7])
    with pytest.raises(ValueError, match="no single chosen"):
        setting_choice.chosen_of(table.assign(chosen=False))
