"""A built-in reader of real sentences (issue 81, item 3; configs/reader-real-protocol.yaml): trained
on the config's prepared train splits (``pretrain_tasks``) in place of the twins, never on an
evaluation sentence, and its curve never trains on the sentences it reads."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from pathlib import Path

import pandas as pd
import pytest
import yaml

from icl_gd.config import resolve as cfg
from icl_gd.config import validation
from icl_gd.data import corpora, prompts, sources
from icl_gd.models import builtin, curve, episodes

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "configs/reader-real-protocol.yaml"
REAL = ("sst2", "sst5", "mr", "agnews")


def real_config() -> dict:
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    return validation.validate(yaml.safe_load(CONFIG.read_text()), schema)


def archives_present() -> bool:
    return all(corpora.archive_path(corpora.get(name)).is_file() for name in ("vader_movie_reviews", "bbc_news"))


needs_archives = pytest.mark.skipif(
    not archives_present(), reason="the corpora's archives: the README's set-up fetches them into resources/packages"
)


def test_the_curve_trains_on_no_sentence_it_reads_whichever_task_holds_it():
    """SST-2, SST-5 and MR share their sentences: one held out of SST-2 is not trained on as MR's."""
    shared = [f"sentence {i}" for i in range(10)]
    frames = {
        "sst2": pd.DataFrame({"sentence": shared, "label": [0, 1] * 5, "example_id": range(10)}),
        "mr": pd.DataFrame({"text": shared[::-1], "label": [1, 0] * 5, "example_id": range(10)}),
    }
    train, held_out = curve.split_held_out(frames, 2)
    read = set(held_out["sst2"]["sentence"]) | set(held_out["mr"]["text"])
    assert read == {"sentence 8", "sentence 9", "sentence 0", "sentence 1"}
    assert not read & set(train["sst2"]["sentence"]) and not read & set(train["mr"]["text"])
    assert len(train["sst2"]) == len(train["mr"]) == 6


def test_the_twins_share_no_sentence_so_their_reader_trains_on_the_same_rows():
    """The twins' held-out rows are no other twin's: the shared-text rule drops nothing there, and
    models/tiny's weights stay what they were."""
    from icl_gd.data import twins

    frames = {t: twins.make_synthetic_task(t, n_train=300, n_eval=10, seed=0)["train"] for t in cfg.TASK_PRESETS}
    train, _ = curve.split_held_out(frames, 50)
    assert all(len(train[t]) == 250 for t in frames)


@needs_archives
def test_no_evaluation_sentence_in_the_readers_training_rows_or_tokenizer_corpus():
    config = real_config()
    spec = config["models"]["reader_real"]
    assert spec["pretrain_tasks"] == list(REAL)
    splits = {task: sources.load_task_splits(cfg.task_spec(config, task)) for task in spec["pretrain_tasks"]}
    text = {
        task: next(c for c in split["train"].columns if c not in ("label", "example_id"))
        for task, split in splits.items()
    }
    trained = set().union(*(set(s["train"][text[t]]) for t, s in splits.items()))
    evaluated = set().union(*(set(s["eval"][text[t]]) for t, s in splits.items()))
    assert len(trained) > 9000 and len(evaluated) > 1000
    assert not trained & evaluated
    # the tokenizer's corpus: every line is a train row in a task's template (or a label word alone),
    # none an evaluation row in any of them
    corpus = builtin._corpus({task: split["train"] for task, split in splits.items()})
    prompts_of_eval = {
        prompts.format_prompt(episodes.preset(task), row.rename({text[other]: text[task]}))
        for task in REAL
        for other in REAL
        for _, row in splits[other]["eval"].iterrows()
    }
    lines = [line.rsplit(" ", 1)[0] for line in corpus if not line.startswith(" ")]
    assert len(lines) == sum(len(s["train"]) for s in splits.values())
    assert not set(lines) & prompts_of_eval


def test_pretrain_tasks_name_the_configs_own_built_in_tasks():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    base = yaml.safe_load(CONFIG.read_text())

    def check(**model):
        config = {**base, "models": {"r": {**base["models"]["reader_real"], **model}}}
        validation.validate(config, schema)

    with pytest.raises(cfg.ConfigError, match=r"models\.r\.pretrain_tasks: 'subj' is not a task of this config"):
        check(pretrain_tasks=["sst2", "subj"])
    with pytest.raises(cfg.ConfigError, match=r"models\.r\.pretrain_leave_out: 'cb' is not among pretrain_tasks"):
        check(pretrain_leave_out=["cb"])
    custom = {
        **base,
        "tasks": {
            **base["tasks"],
            "rte": {"source": "local", "path": "x", "template": "{a} Label:", "label_words": ["yes", "no"]},
        },
    }
    custom["models"] = {"r": {**base["models"]["reader_real"], "pretrain_tasks": ["sst2", "rte"]}}
    with pytest.raises(cfg.ConfigError, match=r"'rte' is not one of the built-in tasks"):
        validation.validate(custom, schema)


def test_drawn_held_out_rows_are_of_every_class_where_the_last_are_of_one():
    """Real corpora come in order (SST's sentences by sentiment): their last rows are of one class,
    and a curve read on them says nothing of reading (pretrain_curve.held_out: drawn)."""
    frame = pd.DataFrame(
        {"text": [f"s{i}" for i in range(200)], "label": [0] * 100 + [1] * 100, "example_id": range(200)}
    )
    _, last = curve.split_held_out({"mr": frame}, 20)
    train, drawn = curve.split_held_out({"mr": frame}, 20, drawn=True, seed=0)
    assert set(last["mr"]["label"]) == {1} and set(drawn["mr"]["label"]) == {0, 1}
    assert len(train["mr"]) == 180 and not set(train["mr"]["text"]) & set(drawn["mr"]["text"])
    assert curve.split_held_out({"mr": frame}, 20, drawn=True, seed=0)[1]["mr"].equals(drawn["mr"])
