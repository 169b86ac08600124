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
