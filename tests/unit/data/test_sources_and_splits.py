"""Tests of icl_gd.data.splits: normalising, local loading, and the protocol's selection."""

import os

# Never touch the network: the local loaders must work offline (set before datasets is imported).
os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from icl_gd.config.resolve import TASK_PRESETS, TaskSpec  # noqa: E402
from icl_gd.data.sources import load_task_splits, normalise_split  # noqa: E402
from icl_gd.data.splits import permutation_seed, select_demos, select_dev, select_eval  # noqa: E402
from icl_gd.data.twins import make_synthetic_task  # noqa: E402


def spec_for(task: str, **overrides) -> TaskSpec:
    preset = TASK_PRESETS[task]
    values = dict(
        name=task,
        source="local",
        template=preset["template"],
        label_words=tuple(preset["label_words"]),
        seeds=tuple(preset["seeds"]),
        lr=preset["lr"],
        splits=dict(preset["splits"]),
        hub_id=preset["hub_id"],
        hub_config=preset["hub_config"],
    )
    values.update(overrides)
    return TaskSpec(**values)


# --------------------------------------------------------------------------------------------------
# normalise_split
# --------------------------------------------------------------------------------------------------


def glue_sst2_frame() -> pd.DataFrame:
    return pd.DataFrame({"sentence": ["a fine film ", "dull ."], "label": [1, 0], "idx": [7, 3]})


def test_normalise_glue_sst2_uses_idx():
    out = normalise_split(glue_sst2_frame(), spec_for("sst2"), "validation")
    assert list(out.columns) == ["sentence", "label", "example_id"]
    assert out["label"].dtype == np.int64 and out["example_id"].dtype == np.int64
    assert out["example_id"].tolist() == [7, 3]
    assert out["sentence"].tolist() == ["a fine film ", "dull ."]


def test_normalise_setfit_sst5_drops_extra_columns_and_numbers_rows():
    raw = pd.DataFrame(
        {
            "text": ["awful", "great", "ok"],
            "label": np.array([0, 4, 2], dtype=np.int32),
            "label_text": ["very negative", "very positive", "neutral"],
        },
        index=[10, 11, 12],
    )
    out = normalise_split(raw, spec_for("sst5"), "train")
    assert list(out.columns) == ["text", "label", "example_id"]
    assert out["example_id"].tolist() == [0, 1, 2]
    assert out["label"].dtype == np.int64 and out["label"].tolist() == [0, 4, 2]
    assert out.index.tolist() == [0, 1, 2]


def test_normalise_super_glue_cb_keeps_template_order():
    raw = pd.DataFrame({"hypothesis": ["it rained"], "idx": [0], "label": [2], "premise": ["Maybe it rained."]})
    out = normalise_split(raw, spec_for("cb"), "validation")
    assert list(out.columns) == ["premise", "hypothesis", "label", "example_id"]


def test_normalise_missing_field():
    raw = glue_sst2_frame().rename(columns={"sentence": "text"})
    with pytest.raises(ValueError) as info:
        normalise_split(raw, spec_for("sst2"), "validation")
    message = str(info.value)
    for part in ("'sst2'", "'validation'", "'sentence'", "'text'", "Fix"):
        assert part in message


def test_normalise_missing_label_column():
    with pytest.raises(ValueError, match="'label' is missing"):
        normalise_split(glue_sst2_frame().drop(columns="label"), spec_for("sst2"), "train")


def test_normalise_empty_split():
    with pytest.raises(ValueError, match=r"task 'sst2', split 'train': the split is empty"):
        normalise_split(glue_sst2_frame().iloc[:0], spec_for("sst2"), "train")


def test_normalise_null_text_names_row_and_field():
    raw = pd.DataFrame(
        {"premise": ["p0", "p1", "p2"], "hypothesis": ["h0", None, "h2"], "label": [0, 1, 2], "idx": [5, 6, 7]}
    )
    with pytest.raises(ValueError) as info:
        normalise_split(raw, spec_for("cb"), "train")
    message = str(info.value)
    for part in ("'cb'", "'train'", "row 1", "example_id 6", "'hypothesis'", "Fix"):
        assert part in message


def test_normalise_label_out_of_range_names_row():
    raw = pd.DataFrame({"sentence": ["a", "b", "c"], "label": [0, 1, -1]})
    with pytest.raises(ValueError) as info:
        normalise_split(raw, spec_for("sst2"), "test")
    message = str(info.value)
    for part in ("'sst2'", "'test'", "row 2", "label -1", "'label'", "0..1", "Negative", "Fix"):
        assert part in message


def test_normalise_non_integer_label():
    raw = pd.DataFrame({"sentence": ["a", "b"], "label": ["positive", "negative"]})
    with pytest.raises(ValueError, match=r"row 0 has label 'positive'"):
        normalise_split(raw, spec_for("sst2"), "train")


def test_normalise_duplicate_idx():
    raw = pd.DataFrame({"sentence": ["a", "b"], "label": [0, 1], "idx": [4, 4]})
    with pytest.raises(ValueError, match=r"row 1 repeats idx 4"):
        normalise_split(raw, spec_for("sst2"), "train")


# --------------------------------------------------------------------------------------------------
# Local loading
# --------------------------------------------------------------------------------------------------


def raw_splits() -> dict[str, pd.DataFrame]:
    """Tiny raw sst2 splits; the eval texts include a newline and the string "NA"."""
    train = pd.DataFrame({"sentence": ["good one", "bad one", "fine"], "label": [1, 0, 1], "idx": [0, 1, 2]})
    evaluation = pd.DataFrame({"sentence": ["two\nlines", "NA"], "label": [0, 1], "idx": [10, 11]})
    return {"train": train, "validation": evaluation}


def check_loaded(out: dict[str, pd.DataFrame]) -> None:
    assert set(out) == {"train", "eval"}
    assert list(out["train"].columns) == ["sentence", "label", "example_id"]
    assert out["train"]["sentence"].tolist() == ["good one", "bad one", "fine"]
    assert out["eval"]["sentence"].tolist() == ["two\nlines", "NA"]
    assert out["eval"]["example_id"].tolist() == [10, 11]
    assert out["eval"]["label"].dtype == np.int64


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_load_local_files(tmp_path, fmt):
    for name, df in raw_splits().items():
        path = tmp_path / f"{name}.{fmt}"
        if fmt == "parquet":
            df.to_parquet(path)
        elif fmt == "jsonl":
            df.to_json(path, orient="records", lines=True)
        else:
            df.to_csv(path, index=False)
    check_loaded(load_task_splits(spec_for("sst2", path=str(tmp_path))))


def test_load_local_save_to_disk_dataset_dict(tmp_path):
    import datasets

    saved = datasets.DatasetDict(
        {name: datasets.Dataset.from_pandas(df, preserve_index=False) for name, df in raw_splits().items()}
    )
    saved.save_to_disk(str(tmp_path / "sst2"))
    check_loaded(load_task_splits(spec_for("sst2", path=str(tmp_path / "sst2"))))
    with pytest.raises(ValueError, match=r"no split 'test'.*splits\.eval"):
        load_task_splits(spec_for("sst2", path=str(tmp_path / "sst2"), splits={"train": "train", "eval": "test"}))


def test_load_local_save_to_disk_one_folder_per_split(tmp_path):
    import datasets

    for name, df in raw_splits().items():
        datasets.Dataset.from_pandas(df, preserve_index=False).save_to_disk(str(tmp_path / name))
    check_loaded(load_task_splits(spec_for("sst2", path=str(tmp_path))))
    with pytest.raises(ValueError, match="single Dataset"):
        load_task_splits(spec_for("sst2", path=str(tmp_path / "train")))


def test_load_local_errors(tmp_path):
    raw_splits()["train"].to_parquet(tmp_path / "train.parquet")
    with pytest.raises(FileNotFoundError, match=r"split 'validation' not found.*validation\.parquet"):
        load_task_splits(spec_for("sst2", path=str(tmp_path)))
    raw_splits()["validation"].to_parquet(tmp_path / "validation.parquet")
    raw_splits()["validation"].to_csv(tmp_path / "validation.csv", index=False)
    with pytest.raises(ValueError, match="ambiguous"):
        load_task_splits(spec_for("sst2", path=str(tmp_path)))
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_task_splits(spec_for("sst2", path=str(tmp_path / "nowhere")))
    with pytest.raises(ValueError, match="no path"):
        load_task_splits(spec_for("sst2"))
    with pytest.raises(ValueError, match=r"splits must name the 'eval' split"):
        load_task_splits(spec_for("sst2", path=str(tmp_path), splits={"train": "train"}))


def test_load_unknown_source_and_synthetic():
    with pytest.raises(ValueError, match=r"unknown source 'ftp'.*'hub', 'local'"):
        load_task_splits(spec_for("sst2", source="ftp"))
    with pytest.raises(ValueError, match="make_synthetic_task"):
        load_task_splits(spec_for("sst2", source="synthetic"))
    with pytest.raises(ValueError, match="no hub_id"):
        load_task_splits(spec_for("sst2", source="hub", hub_id=None))


def test_load_package_errors(tmp_path):
    """A package corpus (source: package; tests/unit/data/test_corpora.py has the rest): what the data stage
    refuses, with the key or the set-up line that fixes it."""
    with pytest.raises(ValueError, match=r"source 'package' but no corpus. Fix: set tasks.sst2.corpus"):
        load_task_splits(spec_for("sst2", source="package"))
    with pytest.raises(ValueError, match=r"tasks.sst2.corpus: unknown corpus 'imdb'"):
        load_task_splits(spec_for("sst2", source="package", corpus="imdb"))
    with pytest.raises(ValueError, match=r"reads \['premise', 'hypothesis'\]. Fix: use a template with one \{field\}"):
        load_task_splits(spec_for("cb", source="package", corpus="vader_movie_reviews", label_rule="sst5"))
    with pytest.raises(ValueError, match=r"label rule 'sst5' has 5 classes, the task 2 label words"):
        load_task_splits(spec_for("sst2", source="package", corpus="vader_movie_reviews", label_rule="sst5"))
    missing = tmp_path / "vaderSentiment-3.3.2.tar.gz"
    with pytest.raises(
        FileNotFoundError,
        match=r"is not at .*Fix: run the README's set-up line `pip download "
        r"--no-deps --no-binary :all: vaderSentiment==3.3.2 -d ",
    ):
        load_task_splits(spec_for("sst2", source="package", corpus="vader_movie_reviews"), archive=str(missing))


def test_load_hub_failure_is_explained(tmp_path):
    """Only the failure path: the success path needs the network (or a pre-filled hub cache)."""
    import huggingface_hub.constants

    if not huggingface_hub.constants.HF_HUB_OFFLINE:
        pytest.skip("huggingface_hub was imported before HF_HUB_OFFLINE was set; not risking the network")
    spec = spec_for("sst2", source="hub", hub_id="no-such-owner/no-such-dataset")
    with pytest.raises(RuntimeError, match=r"task 'sst2': could not load split 'train'.*source: local"):
        load_task_splits(spec, cache_dir=str(tmp_path))


# --------------------------------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool():
    return make_synthetic_task("sst2", n_train=100, n_eval=50, seed=2)


def test_select_eval(pool):
    chosen = select_eval(pool["eval"], max_eval=20)
    assert len(chosen) == 20 and chosen.index.tolist() == list(range(20))
    expected = np.random.RandomState(1).permutation(50)[:20]
    assert chosen["example_id"].tolist() == expected.tolist()
    pd.testing.assert_frame_equal(chosen, select_eval(pool["eval"], max_eval=20))
    assert len(select_eval(pool["eval"], max_eval=2000)) == 50
    assert not chosen["example_id"].equals(select_eval(pool["eval"], max_eval=20, seed=2)["example_id"])
    with pytest.raises(ValueError, match="max_eval"):
        select_eval(pool["eval"], max_eval=0)


def test_select_demos(pool):
    train = pool["train"]
    demos = select_demos(train, seed=2, k=8, permutation=0)
    assert len(demos) == 8 and demos.index.tolist() == list(range(8))
    assert list(demos.columns) == list(train.columns)
    assert demos["example_id"].tolist() == np.random.RandomState(2).permutation(100)[:8].tolist()
    pd.testing.assert_frame_equal(demos, select_demos(train, seed=2, k=8, permutation=0))
    # Different seeds pick different demonstrations.
    assert set(demos["example_id"]) != set(select_demos(train, seed=3, k=8, permutation=0)["example_id"])
    # Permutations reorder the same set, deterministically, and differently from each other.
    first = select_demos(train, seed=2, k=8, permutation=1)
    second = select_demos(train, seed=2, k=8, permutation=2)
    assert sorted(first["example_id"]) == sorted(demos["example_id"]) == sorted(second["example_id"])
    assert first["example_id"].tolist() != demos["example_id"].tolist()
    assert first["example_id"].tolist() != second["example_id"].tolist()
    pd.testing.assert_frame_equal(first, select_demos(train, seed=2, k=8, permutation=1))
    assert permutation_seed(2, 1) == permutation_seed(2, 1) != permutation_seed(3, 1)
    assert len(select_demos(train, seed=2, k=0, permutation=0)) == 0
    with pytest.raises(ValueError, match="only 100 rows"):
        select_demos(train, seed=2, k=101, permutation=0)
    with pytest.raises(ValueError, match="permutation"):
        select_demos(train, seed=2, k=8, permutation=-1)


def test_a_development_set_is_disjoint_from_every_seeds_demonstrations():
    train = pd.DataFrame({"example_id": np.arange(100), "sentence": [f"s{i}" for i in range(100)], "label": 0})
    seeds = range(2, 12)  # the protocol's three and seven more
    dev = select_dev(train, seeds, k=8, n=15)
    used = {i for s in seeds for p in (0, 1) for i in select_demos(train, s, 8, p)["example_id"]}
    assert len(dev) == 15 and dev["example_id"].is_unique and not set(dev["example_id"]) & used
    assert len(used) > 8  # the seeds' demonstrations differ: each excluded
    pd.testing.assert_frame_equal(dev, select_dev(train, seeds, k=8, n=15))  # seeded
    assert list(select_dev(train, seeds, k=8, n=15, seed=2)["example_id"]) != list(dev["example_id"])
    with pytest.raises(ValueError, match=r"asked for, but the train split has \d+ that no run of seeds \[2, 3,"):
        select_dev(train, seeds, k=8, n=len(train) - len(used) + 1)
