"""The data stage against docs/protocol.md ("Tasks and data", "The three settings"), on tiny offline
hub look-alikes.

Each of the six tasks gets a few rows in its hub dataset's own schema (column names, dtypes, class
labels, configs, splits), written as a local dataset repository laid out like the hub one: parquet
files per config and split, and a README.md whose YAML front matter declares ``configs`` (with
``data_files`` per split) and ``dataset_info`` (features). ``datasets.load_dataset`` reads such a
folder with the same metadata-config logic it applies to a hub repository, so
``sources.load_task_splits`` runs its real hub code path (``source: hub``) with no network. The task
presets (hub config, splits, template, label words, seeds) are used as shipped; only ``hub_id``
points at the folder.

Then: exact prompt strings typed from docs/protocol.md's template table, exact token ids of ZSL, ICL and
FT, the evaluation set, demonstrations and their permutations, label switching (alone and through
``extract.run``), ``ft_demos``, and the errors of bad data.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

from icl_gd.activations import cache, extract  # noqa: E402
from icl_gd.config import resolve as cfg
from icl_gd.data import prompts, sources, splits
from icl_gd.data.prompts import PromptError  # noqa: E402
from icl_gd.planning import plan
from tests.conftest import run_extraction  # noqa: E402

# --------------------------------------------------------------------------------------------------
# Hub look-alikes
# --------------------------------------------------------------------------------------------------

STRING = pa.string()
INT32 = pa.int32()
INT64 = pa.int64()


def class_label(*names: str) -> dict:
    return {"class_label": {"names": {str(i): name for i, name in enumerate(names)}}}


def texts(prefix: str, n: int) -> list[str]:
    return [f"{prefix} example number {i} ." for i in range(n)]


# The first evaluation row of each task is a real example of its data set (the first one of the
# split), typed here; the other rows are filler in the same schema.
SST2_PROBE = "it 's a charming and often affecting journey ."
SST5_PROBE = "a gorgeous , witty , seductive movie ."
MR_PROBE = "lovingly photographed in the manner of a golden book sprung to life ."
SUBJ_PROBE = "smart and alert , thirteen conversations about one thing is a small gem ."
AGNEWS_PROBE = (
    "Fears for T N pension after talks Unions representing workers at Turner   Newall say they are "
    "'disappointed' after talks with stricken parent firm Federal Mogul."
)
CB_PROBE_PREMISE = (
    "Valence the void-brain, Valence the virtuous valet. Why couldn't the figger choose his own portion "
    "of titanic anatomy to shaft? Did he think he was helping?"
)
CB_PROBE_HYPOTHESIS = "Valence was helping"

# docs/protocol.md's template table, applied by hand to the probe rows.
EXPECTED_PROMPTS = {
    "sst2": "Sentence: it 's a charming and often affecting journey . Label:",
    "sst5": "Sentence: a gorgeous , witty , seductive movie . Label:",
    "mr": "Review: lovingly photographed in the manner of a golden book sprung to life . Sentiment:",
    "subj": "Input: smart and alert , thirteen conversations about one thing is a small gem . Type:",
    "agnews": (
        "Classify the news articles into the categories of World, Sports, Business, and Technology. "
        "Article: Fears for T N pension after talks Unions representing workers at Turner   Newall say "
        "they are 'disappointed' after talks with stricken parent firm Federal Mogul. Answer:"
    ),
    "cb": (
        "Valence the void-brain, Valence the virtuous valet. Why couldn't the figger choose his own "
        "portion of titanic anatomy to shaft? Did he think he was helping? Question: Valence was helping. "
        "True, False, or Neither? Answer:"
    ),
}

# Two CB training rows with hand-picked idx, one with a newline inside its premise (the reference
# turns it into </s>); the token-id test below spells out their prompts by hand.
CB_DEMO_A = {
    "premise": "B: I don't know.\nA: Well, I think it's a good idea.",
    "hypothesis": "it's a good idea",
    "idx": 41,
    "label": 0,
}
CB_DEMO_B = {
    "premise": "It was late and the shop was closed.",
    "hypothesis": "the shop was open",
    "idx": 17,
    "label": 1,
}


def _glue_sst2() -> dict:
    sentences = [SST2_PROBE, *texts("sst2 validation", 6)]
    return {
        "train": {"sentence": texts("sst2 train", 10), "label": [0, 1] * 5, "idx": list(range(100, 110))},
        # a subset of the split: idx differ from row numbers, so example ids must come from idx
        "validation": {"sentence": sentences, "label": [1, 0, 1, 1, 0, 0, 1], "idx": [12, 3, 40, 7, 25, 0, 33]},
        "test": {"sentence": texts("sst2 test", 3), "label": [-1, -1, -1], "idx": [0, 1, 2]},  # unlabelled
    }


def _glue_cola() -> dict:
    return {
        split: {"sentence": texts(f"cola {split}", 3), "label": [1, 0, 1], "idx": [0, 1, 2]}
        for split in ("train", "validation", "test")
    }


def _super_glue_cb() -> dict:
    train = {
        "premise": texts("cb premise", 8),
        "hypothesis": texts("cb hypothesis", 8),
        "idx": list(range(8)),
        "label": [0, 1, 2, 0, 1, 2, 0, 1],
    }
    for row in (CB_DEMO_A, CB_DEMO_B):
        for key, value in row.items():
            train[key].append(value)
    return {
        "train": train,
        "validation": {
            "premise": [CB_PROBE_PREMISE, *texts("cb premise", 4)],
            "hypothesis": [CB_PROBE_HYPOTHESIS, *texts("cb hypothesis", 4)],
            "idx": [0, 1, 2, 3, 4],
            "label": [1, 0, 2, 1, 0],
        },
        "test": {"premise": ["p"], "hypothesis": ["h"], "idx": [0], "label": [-1]},
    }


def _super_glue_boolq() -> dict:
    return {split: {"question": ["q"], "passage": ["p"], "idx": [0], "label": [1]} for split in ("train", "validation")}


def _setfit(prefix: str, splits: tuple[str, ...], n_labels: int, names: list[str], probe: str) -> dict:
    out = {}
    for split in splits:
        n = 10 if split == "train" else 6
        labels = [i % n_labels for i in range(n)]
        rows = texts(f"{prefix} {split}", n)
        if split != "train":
            rows[0] = probe
        out[split] = {"text": rows, "label": labels, "label_text": [names[y] for y in labels]}
    return out


def _text_label(prefix: str, splits: tuple[str, ...], n_labels: int, probe: str) -> dict:
    out = {}
    for split in splits:
        n = 10 if split == "train" else 6
        rows = texts(f"{prefix} {split}", n)
        if split != "train":
            rows[0] = probe
        out[split] = {"text": rows, "label": [(i * 3 + 1) % n_labels for i in range(n)]}
    return out


# task -> (repository folder name, {config name (None: default): (file prefix, splits, column types, features)})
GLUE_FEATURES = [
    {"name": "sentence", "dtype": "string"},
    {"name": "label", "dtype": class_label("negative", "positive")},
    {"name": "idx", "dtype": "int32"},
]
CB_FEATURES = [
    {"name": "premise", "dtype": "string"},
    {"name": "hypothesis", "dtype": "string"},
    {"name": "idx", "dtype": "int32"},
    {"name": "label", "dtype": class_label("entailment", "contradiction", "neutral")},
]
REPOS = {
    "sst2": (
        "glue",
        {
            "cola": ("cola", _glue_cola(), {"sentence": STRING, "label": INT64, "idx": INT32}, GLUE_FEATURES),
            "sst2": ("sst2", _glue_sst2(), {"sentence": STRING, "label": INT64, "idx": INT32}, GLUE_FEATURES),
        },
    ),
    "sst5": (
        "sst5",
        {
            None: (
                "",
                _setfit(
                    "sst5",
                    ("train", "validation", "test"),
                    5,
                    ["very negative", "negative", "neutral", "positive", "very positive"],
                    SST5_PROBE,
                ),
                {"text": STRING, "label": INT64, "label_text": STRING},
                None,
            ),
        },
    ),
    "mr": (
        "rotten_tomatoes",
        {
            None: (
                "data",
                _text_label("mr", ("train", "validation", "test"), 2, MR_PROBE),
                {"text": STRING, "label": INT64},
                [{"name": "text", "dtype": "string"}, {"name": "label", "dtype": class_label("neg", "pos")}],
            ),
        },
    ),
    "subj": (
        "subj",
        {
            None: (
                "",
                _setfit("subj", ("train", "test"), 2, ["objective", "subjective"], SUBJ_PROBE),
                {"text": STRING, "label": INT64, "label_text": STRING},
                None,
            ),
        },
    ),
    "agnews": (
        "ag_news",
        {
            None: (
                "data",
                _text_label("agnews", ("train", "test"), 4, AGNEWS_PROBE),
                {"text": STRING, "label": INT64},
                [
                    {"name": "text", "dtype": "string"},
                    {"name": "label", "dtype": class_label("World", "Sports", "Business", "Sci/Tech")},
                ],
            ),
        },
    ),
    "cb": (
        "super_glue",
        {
            "boolq": (
                "boolq",
                _super_glue_boolq(),
                {"question": STRING, "passage": STRING, "idx": INT32, "label": INT64},
                [
                    {"name": "question", "dtype": "string"},
                    {"name": "passage", "dtype": "string"},
                    {"name": "idx", "dtype": "int32"},
                    {"name": "label", "dtype": class_label("False", "True")},
                ],
            ),
            "cb": (
                "cb",
                _super_glue_cb(),
                {"premise": STRING, "hypothesis": STRING, "idx": INT32, "label": INT64},
                CB_FEATURES,
            ),
        },
    ),
}


def write_repo(root: Path, configs: dict) -> Path:
    """A local dataset repository: parquet per config and split, README.md with configs and features."""
    card = {"dataset_info": [], "configs": []}
    for config_name, (prefix, split_columns, types, features) in configs.items():
        name = config_name or "default"
        files = []
        for split, columns in split_columns.items():
            path = f"{prefix}/{split}-00000-of-00001.parquet" if prefix else f"{split}.parquet"
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            table = pa.table({col: pa.array(values, type=types[col]) for col, values in columns.items()})
            pq.write_table(table, root / path)
            files.append({"split": split, "path": path.replace("-00000-of-00001", "-*")})
        card["configs"].append({"config_name": name, "data_files": files})
        if features is not None:
            card["dataset_info"].append({"config_name": name, "features": features})
    if not card["dataset_info"]:
        del card["dataset_info"]
    (root / "README.md").write_text(f"---\n{yaml.safe_dump(card, sort_keys=False)}---\n\n# {root.name}\n")
    return root


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("hub")
    return {task: write_repo(base / folder, configs) for task, (folder, configs) in REPOS.items()}


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("datasets_cache"))


def hub_spec(task: str, folder: Path, **overrides) -> cfg.TaskSpec:
    """The task's shipped preset with source hub, hub_id pointing at the local repository."""
    return cfg.task_spec({"tasks": {task: {"source": "hub", "hub_id": str(folder), **overrides}}}, task)


@pytest.fixture(scope="module")
def loaded(repos, hub_cache) -> dict[str, dict[str, pd.DataFrame]]:
    return {task: sources.load_task_splits(hub_spec(task, repos[task]), cache_dir=hub_cache) for task in REPOS}


def raw_split(task: str, role: str) -> dict:
    """The raw columns of the split a task's preset uses for ``role`` ("train" or "eval")."""
    spec = cfg.TASK_PRESETS[task]
    _, configs = REPOS[task]
    return configs[spec["hub_config"]][1][spec["splits"][role]]


# --------------------------------------------------------------------------------------------------
# Loading through datasets.load_dataset
# --------------------------------------------------------------------------------------------------


def test_presets_name_the_protocol_splits_and_configs():
    expected = {
        "sst2": ("sst2", "train", "validation"),
        "sst5": (None, "train", "validation"),
        "mr": (None, "train", "validation"),
        "subj": (None, "train", "test"),
        "agnews": (None, "train", "test"),
        "cb": ("cb", "train", "validation"),
    }
    for task, (config_name, train, evaluation) in expected.items():
        spec = cfg.task_spec({"tasks": {task: {"source": "hub"}}}, task)
        assert (spec.hub_config, spec.splits) == (config_name, {"train": train, "eval": evaluation}), task


@pytest.mark.parametrize("task", sorted(REPOS))
def test_load_task_splits_from_a_hub_repository(task, loaded):
    spec = cfg.task_spec({"tasks": {task: {"source": "hub"}}}, task)
    out = loaded[task]
    assert set(out) == {"train", "eval"}
    for role in ("train", "eval"):
        df, raw = out[role], raw_split(task, role)
        assert list(df.columns) == [*spec.text_fields, "label", "example_id"]
        assert df.index.tolist() == list(range(len(df)))
        assert df["label"].dtype == np.int64 and df["example_id"].dtype == np.int64
        for name in spec.text_fields:
            assert df[name].tolist() == raw[name], (role, name)
        assert df["label"].tolist() == raw["label"]
        assert df["label"].between(0, spec.n_labels - 1).all()
        # example ids: the hub idx where the data has one (glue, super_glue), else the row number
        assert df["example_id"].tolist() == raw.get("idx", list(range(len(raw["label"]))))
    # the right config of multi-config repositories (glue has cola, super_glue has boolq)
    assert len(out["train"]) == len(raw_split(task, "train")["label"])


def test_load_reads_the_configured_config_and_split(repos, hub_cache):
    out = sources.load_task_splits(hub_spec("sst2", repos["sst2"]), cache_dir=hub_cache)
    assert out["eval"]["example_id"].tolist() == [12, 3, 40, 7, 25, 0, 33]  # idx, not row numbers
    assert out["eval"]["sentence"].iloc[0] == SST2_PROBE
    assert not out["train"]["sentence"].str.startswith("cola").any()
    assert out["eval"]["sentence"].iloc[0] != out["train"]["sentence"].iloc[0]


def test_example_prompt_strings_follow_the_protocol_table(loaded):
    for task, expected in EXPECTED_PROMPTS.items():
        spec = cfg.task_spec({"tasks": {task: None}}, task)
        row = loaded[task]["eval"].iloc[0]
        assert prompts.format_prompt(spec, row) == expected, task


# --------------------------------------------------------------------------------------------------
# Exact token ids (cb: two fields, a newline inside a premise)
# --------------------------------------------------------------------------------------------------


def enc(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def test_token_ids_of_zsl_icl_and_ft(tokenizer, loaded):
    spec = cfg.task_spec({"tasks": {"cb": None}}, "cb")
    train = loaded["cb"]["train"].set_index("example_id", drop=False)
    demos = train.loc[[CB_DEMO_A["idx"], CB_DEMO_B["idx"]]].reset_index(drop=True)
    query = loaded["cb"]["eval"].iloc[[0]]
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    true, false, neither = (enc(tokenizer, w) for w in (" True", " False", " Neither"))
    assert len(true) == len(false) == len(neither) == 1
    label_ids = prompts.label_token_ids(tokenizer, spec)
    assert label_ids == true + false + neither

    # demonstration A: the newline of its premise is </s> between the two lines
    demo_a = (
        enc(tokenizer, "B: I don't know.")
        + [eos]
        + enc(
            tokenizer, "A: Well, I think it's a good idea. Question: it's a good idea. True, False, or Neither? Answer:"
        )
    )
    demo_b = enc(
        tokenizer, "It was late and the shop was closed. Question: the shop was open. True, False, or Neither? Answer:"
    )
    q = enc(tokenizer, EXPECTED_PROMPTS["cb"])
    assert prompts.demonstration_ids(tokenizer, spec, demos, label_ids) == [demo_a + true, demo_b + false]

    (at_answer,) = prompts.build_queries(tokenizer, spec, query, label_ids, "answer")
    (at_label,) = prompts.build_queries(tokenizer, spec, query, label_ids, "label_word")
    assert (at_answer.example_id, at_answer.gold) == (0, 1)
    # ZSL: <s> + query prompt (+ the first class's label word when recording at the label word)
    assert [bos] + at_answer.ids == [bos] + q
    assert [bos] + at_label.ids == [bos] + q + true
    assert at_label.answer_offset == len(q) - 1 and at_label.record_offset == len(q)
    # ICL: <s> + (prompt + label word + </s>) per demonstration + query prompt; one <s> only
    context = prompts.icl_context(tokenizer, [demo_a + true, demo_b + false])
    assert context + at_answer.ids == [bos] + demo_a + true + [eos] + demo_b + false + [eos] + q
    assert (context + at_label.ids).count(bos) == 1
    # FT: one sequence per demonstration, <s> + prompt + label word, no </s> at the end
    assert prompts.ft_sequences(tokenizer, [demo_a + true, demo_b + false]) == [
        [bos] + demo_a + true,
        [bos] + demo_b + false,
    ]


# --------------------------------------------------------------------------------------------------
# Evaluation set, demonstrations and permutations
# --------------------------------------------------------------------------------------------------


def test_evaluation_set_is_the_eval_split_shuffled_with_seed_1(loaded):
    evaluation = loaded["sst2"]["eval"]  # example ids are idx values, not row numbers
    ids = evaluation["example_id"].to_numpy()
    order = np.random.RandomState(1).permutation(len(evaluation))
    capped = splits.select_eval(evaluation, max_eval=4)
    assert capped["example_id"].tolist() == ids[order[:4]].tolist()
    assert capped["sentence"].tolist() == evaluation["sentence"].to_numpy()[order[:4]].tolist()
    assert capped.index.tolist() == [0, 1, 2, 3]
    whole = splits.select_eval(evaluation, max_eval=2000)
    assert whole["example_id"].tolist() == ids[order].tolist()  # the cap only cuts, never reorders


@pytest.mark.parametrize("task", sorted(REPOS))
def test_seed_i_uses_permutation_i_minus_1(task, loaded):
    config = {"tasks": {task: {"source": "hub"}}}
    seeds = cfg.task_seeds(config, task)
    assert [cfg.permutation_index(config, task, s) for s in seeds] == [0, 1, 2]
    train, k = loaded[task]["train"], 6
    ids = train["example_id"].to_numpy()
    for i, seed in enumerate(seeds):
        demos = splits.select_demos(train, seed, k, cfg.permutation_index(config, task, seed))
        shuffled = ids[np.random.RandomState(seed).permutation(len(train))[:k]].tolist()
        if i == 0:
            assert demos["example_id"].tolist() == shuffled  # permutation 0: the shuffled order as is
        else:
            assert sorted(demos["example_id"]) == sorted(shuffled)  # the same set ...
            assert demos["example_id"].tolist() != shuffled  # ... reordered
            other = splits.select_demos(train, seed, k, 3 - i)
            assert other["example_id"].tolist() != demos["example_id"].tolist()  # permutations 1 and 2 differ
        # the rows travel whole: texts and labels stay with their ids
        pd.testing.assert_frame_equal(
            demos, train.set_index("example_id", drop=False).loc[demos["example_id"]].reset_index(drop=True)
        )


# --------------------------------------------------------------------------------------------------
# Label switching
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_labels", [2, 3, 4, 5])
def test_switch_labels_gives_every_demo_a_wrong_label(n_labels):
    demos = pd.DataFrame(
        {"text": [f"t{i}" for i in range(40)], "label": np.arange(40) % n_labels, "example_id": np.arange(100, 140)}
    )
    before = demos.copy()
    switched = splits.switch_labels(demos, n_labels, seed=3)
    pd.testing.assert_frame_equal(demos, before)  # the input is left alone
    pd.testing.assert_frame_equal(switched.drop(columns="label"), demos.drop(columns="label"))
    assert (switched["label"].to_numpy() != demos["label"].to_numpy()).all()
    assert switched["label"].between(0, n_labels - 1).all()
    pd.testing.assert_frame_equal(switched, splits.switch_labels(demos, n_labels, seed=3))  # seeded
    if n_labels == 2:
        assert (switched["label"] == 1 - demos["label"]).all()  # binary: the flip, whatever the seed
    else:
        assert not switched["label"].equals(splits.switch_labels(demos, n_labels, seed=4)["label"])


def test_switch_labels_is_uniform_over_the_wrong_classes():
    n, n_labels = 10000, 5
    demos = pd.DataFrame({"label": np.arange(n) % n_labels})
    switched = splits.switch_labels(demos, n_labels, seed=5)["label"].to_numpy()
    for y in range(n_labels):
        counts = np.bincount(switched[demos["label"].to_numpy() == y], minlength=n_labels)
        assert counts[y] == 0
        share = np.delete(counts, y) / counts.sum()
        assert np.abs(share - 0.25).max() < 0.04, (y, share)  # 2000 draws a class: sd ~0.01
    with pytest.raises(ValueError, match="at least two classes"):
        splits.switch_labels(demos, 1, seed=5)


# --------------------------------------------------------------------------------------------------
# The labels' consistent permutation (setting icl_permuted: the premise's label-following test)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_labels", [2, 3, 5])
def test_permute_labels_gives_every_demonstration_the_next_class_one_derangement(n_labels):
    demos = pd.DataFrame(
        {"text": [f"t{i}" for i in range(40)], "label": np.arange(40) % n_labels, "example_id": np.arange(100, 140)}
    )
    before = demos.copy()
    permuted = splits.permute_labels(demos, n_labels)
    pd.testing.assert_frame_equal(demos, before)  # the input is left alone
    pd.testing.assert_frame_equal(permuted.drop(columns="label"), demos.drop(columns="label"))
    # one mapping for the whole context: each class always goes to the same class, (y + 1) mod n
    mapping = {y: set(permuted.loc[demos["label"] == y, "label"]) for y in range(n_labels)}
    assert mapping == {y: {(y + 1) % n_labels} for y in range(n_labels)}
    targets = [next(iter(m)) for m in mapping.values()]
    assert sorted(targets) == list(range(n_labels))  # a permutation of the classes
    assert all(t != y for y, t in enumerate(targets))  # a derangement: no class keeps its word
    if n_labels == 2:
        assert (permuted["label"] == 1 - demos["label"]).all()  # the swap
    if n_labels == 3:
        assert mapping == {0: {1}, 1: {2}, 2: {0}}  # the cycle
    # unlike switch_labels, no randomness: the same for every seed and run
    pd.testing.assert_frame_equal(permuted, splits.permute_labels(demos, n_labels))


def test_the_permuted_gold_is_the_class_whose_word_the_permuted_demonstrations_give_the_gold():
    np.testing.assert_array_equal(splits.permuted_gold([0, 1], 2), [1, 0])
    np.testing.assert_array_equal(splits.permuted_gold([0, 1, 2, 2], 3), [1, 2, 0, 0])
    np.testing.assert_array_equal(splits.permuted_gold(np.arange(5), 5), [1, 2, 3, 4, 0])
    demos = pd.DataFrame({"label": np.arange(10) % 5})
    np.testing.assert_array_equal(splits.permute_labels(demos, 5)["label"], splits.permuted_gold(demos["label"], 5))
    with pytest.raises(ValueError, match="at least two classes"):
        splits.permuted_gold([0, 0], 1)


# --------------------------------------------------------------------------------------------------
# Through extract.run: switched and permuted labels, the permutation of the run seed, ft_demos
# --------------------------------------------------------------------------------------------------

WORDS = ["good", "bad", "dull", "fun", "odd", "warm", "slow", "loud"]
K = 8
MAX_EVAL = 5
SEED = 3  # sst2's second protocol seed: demonstration permutation 1


def extract_config(**overrides) -> dict:
    base = {
        "tasks": {"sst2": {}},
        "methods": {
            "gd": {"kind": "gd", "lr": 0.1},
            "gd_switched": {"kind": "gd", "lr": 0.1, "demo_labels": "switched"},
        },
        "k": K,
        "max_eval": MAX_EVAL,
        "record_position": "label_word",
        "ft_demos": "all",
        "dtype": "float32",
        "cache_dtype": "float32",
        "batch_size": 4,
        "device": "cpu",
        "min_true_k": 1,
    }
    return {**base, **overrides}


def sst2_rows(n: int, seed: int, first_id: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sentences = [" ".join(rng.choice(WORDS, size=rng.integers(1, 4))) for _ in range(n)]
    return pd.DataFrame(
        {
            "sentence": sentences,
            "label": rng.integers(0, 2, n).astype(np.int64),
            "example_id": np.arange(first_id, first_id + n, dtype=np.int64),
        }
    )


@pytest.fixture(scope="module")
def extracted(tmp_path_factory, model_dirs):
    """Caches of icl, icl_switched, icl_permuted, gd, gd_switched (ft_demos all) and gd (ft_demos
    same_as_icl)."""
    tmp = tmp_path_factory.mktemp("extract")
    train, evaluation = sst2_rows(16, 0, 500), sst2_rows(9, 1, 900)
    train.to_parquet(tmp / "train.parquet")
    evaluation.to_parquet(tmp / "eval.parquet")
    common = dict(
        model_name="tiny",
        variant="trained",
        task="sst2",
        seed=SEED,
        model_dir=str(model_dirs["gpt2"]),
        train_path=str(tmp / "train.parquet"),
        eval_path=str(tmp / "eval.parquet"),
    )
    runs = {
        "icl": (extract_config(), "icl"),
        "icl_switched": (extract_config(), "icl_switched"),
        "icl_permuted": (extract_config(), "icl_permuted"),
        "gd": (extract_config(), "gd"),
        "gd_switched": (extract_config(), "gd_switched"),
        "gd_same_as_icl": (extract_config(ft_demos="same_as_icl"), "gd"),
    }
    out = {}
    for name, (config, setting) in runs.items():
        torch.manual_seed(0)
        log = str(tmp / f"{name}_log.parquet") if setting.startswith("gd") else None
        run_extraction(config, setting=setting, out_path=str(tmp / f"{name}.arrow"), train_log_path=log, **common)
        out[name] = cache.read_cache(tmp / f"{name}.arrow")
        if log:
            out[name + "_log"] = cache.read_train_log(log)
    return {"caches": out, "train": train, "eval": evaluation}


def test_icl_setting_pairs_each_method_with_icl_on_the_same_labels():
    config = extract_config()
    assert cfg.icl_setting(config, "gd") == "icl"
    assert cfg.icl_setting(config, "gd_switched") == "icl_switched"
    assert cfg.demo_labels(config, "icl") == cfg.demo_labels(config, "gd") == "gold"
    assert cfg.demo_labels(config, "icl_switched") == cfg.demo_labels(config, "gd_switched") == "switched"
    assert cfg.demo_labels(config, "icl_permuted") == "permuted" and cfg.setting_k(config, "icl_permuted") == K


def test_run_uses_the_evaluation_set_and_the_seeds_permutation(extracted):
    icl = extracted["caches"]["icl"]
    evaluation, train = extracted["eval"], extracted["train"]
    order = np.random.RandomState(1).permutation(len(evaluation))[:MAX_EVAL]
    assert icl.example_id.tolist() == evaluation["example_id"].to_numpy()[order].tolist()
    shuffled = train["example_id"].to_numpy()[np.random.RandomState(SEED).permutation(len(train))[:K]].tolist()
    assert icl.meta["demo_ids"] == splits.select_demos(train, SEED, K, 1)["example_id"].tolist()
    assert sorted(icl.meta["demo_ids"]) == sorted(shuffled) and icl.meta["demo_ids"] != shuffled


def test_switched_demonstrations_in_icl_and_gd(extracted):
    c = extracted["caches"]
    train = extracted["train"].set_index("example_id")
    icl, icl_sw, gd, gd_sw = c["icl"], c["icl_switched"], c["gd"], c["gd_switched"]
    ids = icl.meta["demo_ids"]
    assert len(ids) == K
    assert ids == icl_sw.meta["demo_ids"] == gd.meta["demo_ids"] == gd_sw.meta["demo_ids"]
    gold = train.loc[ids, "label"].tolist()
    assert icl.meta["demo_label_ids"] == gd.meta["demo_label_ids"] == gold
    assert icl.meta["demo_labels"] == gd.meta["demo_labels"] == "gold"
    assert icl_sw.meta["demo_labels"] == gd_sw.meta["demo_labels"] == "switched"
    switched = icl_sw.meta["demo_label_ids"]
    assert switched == gd_sw.meta["demo_label_ids"]
    assert all(s != g for s, g in zip(switched, gold, strict=True))
    assert switched == [1 - g for g in gold]  # sst2 is binary: the flip
    # the evaluation examples keep their gold labels; the answers change with the demonstrations
    np.testing.assert_array_equal(icl.gold, icl_sw.gold)
    assert not np.allclose(icl.label_logprobs, icl_sw.label_logprobs)
    assert icl.meta["n_context"] == icl_sw.meta["n_context"]  # the same tokens but for the label words
    # finetuning on switched labels is a different training run
    assert not np.allclose(c["gd_log"][1]["loss"], c["gd_switched_log"][1]["loss"])


def test_permuted_demonstrations_and_the_permuted_gold_in_the_cache(extracted):
    """ICL on permuted labels: the same demonstrations and queries as ICL's, each demonstration's
    label the next class's, and the cache's gold the permuted gold, so that an accuracy computed
    from the cache (pred against gold) is against it."""
    c = extracted["caches"]
    icl, permuted = c["icl"], c["icl_permuted"]
    assert permuted.meta["setting"] == "icl_permuted" and permuted.meta["demo_labels"] == "permuted"
    assert permuted.meta["demo_ids"] == icl.meta["demo_ids"] and permuted.meta["k"] == icl.meta["k"]
    assert permuted.meta["demo_label_ids"] == [1 - g for g in icl.meta["demo_label_ids"]]  # binary: the swap
    np.testing.assert_array_equal(permuted.example_id, icl.example_id)
    np.testing.assert_array_equal(permuted.gold, splits.permuted_gold(icl.gold, 2))
    assert "icl_permuted" in permuted.meta["prompt_rules"]
    assert permuted.meta["n_context"] == icl.meta["n_context"]  # the same tokens but for the label words
    assert not np.allclose(icl.label_logprobs, permuted.label_logprobs)


def test_the_sequences_of_icl_on_permuted_labels_carry_the_next_class_word(tmp_path, tokenizer):
    """extract.sequences_of on a three-class task: the ICL context is ICL's with every
    demonstration's label word the next class's (the cycle), the queries the same, their gold
    the permuted gold."""
    words = ["terrible", "bad", "good"]
    config = extract_config(tasks={"sst2": {"label_words": words}}, k=6)
    rng = np.random.default_rng(0)
    for name, n, first in (("train", 12, 0), ("eval", 6, 100)):
        data = sst2_rows(n, int(rng.integers(100)), first)
        data["label"] = np.arange(n) % 3
        data.to_parquet(tmp_path / f"{name}.parquet")
    files = dict(train_path=str(tmp_path / "train.parquet"), eval_path=str(tmp_path / "eval.parquet"))
    gold, permuted = (
        extract.sequences_of(plan.run_spec(config, "sst2", setting, SEED), tokenizer, 512, **files)
        for setting in ("icl", "icl_permuted")
    )
    label_ids = gold.label_ids
    assert permuted.true_k == gold.true_k == 6
    assert [q.ids for q in permuted.queries] == [q.ids for q in gold.queries]
    assert [q.gold for q in permuted.queries] == [(q.gold + 1) % 3 for q in gold.queries]
    assert permuted.demos["label"].tolist() == [(y + 1) % 3 for y in gold.demos["label"]]
    for demo, original, y in zip(permuted.demo_ids, gold.demo_ids, gold.demos["label"], strict=True):
        assert demo[:-1] == original[:-1]  # the same prompt
        assert (original[-1], demo[-1]) == (label_ids[y], label_ids[(y + 1) % 3])  # the next class's word
    assert len(permuted.context) == len(gold.context)
    differ = [i for i, (a, b) in enumerate(zip(gold.context, permuted.context)) if a != b]
    assert len(differ) == 6 and {permuted.context[i] for i in differ} <= set(label_ids)


def test_ft_demos_all_or_same_as_icl(extracted):
    c = extracted["caches"]
    true_k = c["icl"].meta["true_k"]
    assert 0 < true_k < K  # the 64-token context cuts ICL short: the switch matters
    assert c["gd"].meta["true_k"] == c["gd_same_as_icl"].meta["true_k"] == true_k
    assert c["gd"].meta["ft_demos"] == "all" and c["gd"].meta["n_train_steps"] == K
    assert c["gd_same_as_icl"].meta["ft_demos"] == "same_as_icl"
    assert c["gd_same_as_icl"].meta["n_train_steps"] == true_k
    assert len(c["gd_same_as_icl_log"][1]["loss"]) == true_k and len(c["gd_log"][1]["loss"]) == K
    # the same first true_k steps, in the same order
    np.testing.assert_allclose(c["gd_same_as_icl_log"][1]["loss"], c["gd_log"][1]["loss"][:true_k], rtol=1e-5)


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


def test_run_refuses_a_label_word_of_several_tokens(tmp_path, model_dirs):
    sst2_rows(12, 0, 0).to_parquet(tmp_path / "train.parquet")
    sst2_rows(6, 1, 0).to_parquet(tmp_path / "eval.parquet")
    config = extract_config(tasks={"sst2": {"label_words": ["Negative", "Zebrafishy"]}})
    with pytest.raises(PromptError) as err:
        run_extraction(
            config,
            model_name="tiny",
            variant="trained",
            task="sst2",
            seed=2,
            setting="zsl",
            model_dir=str(model_dirs["gpt2"]),
            train_path=str(tmp_path / "train.parquet"),
            eval_path=str(tmp_path / "eval.parquet"),
            out_path=str(tmp_path / "zsl.arrow"),
        )
    assert "'sst2'" in str(err.value) and "'Zebrafishy'" in str(err.value)
    assert not (tmp_path / "zsl.arrow").exists()


def test_hub_data_without_a_template_field(repos, hub_cache):
    spec = hub_spec("sst2", repos["sst2"], template="Review: {text} Sentiment:")
    with pytest.raises(ValueError, match=r"task 'sst2', split 'train': column 'text' is missing.*'sentence'"):
        sources.load_task_splits(spec, cache_dir=hub_cache)


def test_prompt_of_a_row_without_a_template_field():
    spec = cfg.task_spec({"tasks": {"cb": None}}, "cb")
    row = pd.Series({"premise": "p", "label": 0, "example_id": 8})
    with pytest.raises(PromptError, match=r"task 'cb'.*field 'hypothesis'.*example 8"):
        prompts.format_prompt(spec, row)


def test_hub_split_with_labels_outside_the_label_set(repos, hub_cache, tmp_path):
    # glue's test split is unlabelled (-1): not an evaluation split
    spec = hub_spec("sst2", repos["sst2"], splits={"train": "train", "eval": "test"})
    with pytest.raises(ValueError, match=r"split 'test'.*label -1.*outside 0\.\.1.*unlabelled test splits use -1"):
        sources.load_task_splits(spec, cache_dir=hub_cache)
    # sst5 data with a sixth class
    columns = _setfit("sst5", ("train", "validation"), 5, ["a", "b", "c", "d", "e"], SST5_PROBE)
    columns["validation"]["label"][3] = 5
    folder = write_repo(
        tmp_path / "sst5", {None: ("data", columns, {"text": STRING, "label": INT64, "label_text": STRING}, None)}
    )
    with pytest.raises(ValueError, match=r"task 'sst5', split 'validation': row 3 .*label 5.*outside 0\.\.4"):
        sources.load_task_splits(hub_spec("sst5", folder), cache_dir=hub_cache)


def test_empty_split(repos, hub_cache, tmp_path):
    # datasets refuses an empty hub split itself, so the error is the loader's, naming the task: an
    # empty slice names the split asked for; a zero-row parquet file breaks the whole repository,
    # so loading even the train split fails
    spec = hub_spec("mr", repos["mr"], splits={"train": "train", "eval": "validation[:0]"})
    with pytest.raises(RuntimeError, match=r"task 'mr': could not load split 'validation\[:0\]'.*no data"):
        sources.load_task_splits(spec, cache_dir=hub_cache)
    columns = _text_label("mr", ("train", "validation"), 2, MR_PROBE)
    columns["validation"] = {"text": [], "label": []}
    folder = write_repo(tmp_path / "rotten_tomatoes", {None: ("data", columns, {"text": STRING, "label": INT64}, None)})
    with pytest.raises(RuntimeError, match=r"task 'mr': could not load split"):
        sources.load_task_splits(hub_spec("mr", folder), cache_dir=hub_cache)
    # the same zero-row file as a local split reaches the check of the normalised split
    local = tmp_path / "local"
    local.mkdir()
    for split in ("train", "validation"):
        (folder / "data" / f"{split}-00000-of-00001.parquet").rename(local / f"{split}.parquet")
    spec = cfg.task_spec({"tasks": {"mr": {"source": "local", "path": str(local)}}}, "mr")
    with pytest.raises(ValueError, match=r"task 'mr', split 'validation': the split is empty"):
        sources.load_task_splits(spec)


def test_hub_split_that_the_repository_lacks(repos, hub_cache):
    # SetFit/subj has no validation split: the preset evaluates on test
    spec = hub_spec("subj", repos["subj"], splits={"train": "train", "eval": "validation"})
    with pytest.raises(RuntimeError, match=r"task 'subj': could not load split 'validation'"):
        sources.load_task_splits(spec, cache_dir=hub_cache)
