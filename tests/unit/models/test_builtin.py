"""The built-in tiny model: its tokenizer holds every label word as one token, and it learns."""

import json

import pandas as pd
import pytest
import torch

from icl_gd.config import resolve as cfg
from icl_gd.data import prompts, twins
from icl_gd.models import builtin, loading

SPEC = {
    "n_layer": 1,
    "n_embd": 32,
    "n_head": 2,
    "n_positions": 256,
    "vocab_size": 400,
    "pretrain_steps": 30,
    "pretrain_lr": 3e-3,
    "pretrain_len": 64,
    "seed": 0,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("builtin")
    paths = {}
    for task in cfg.TASK_PRESETS:
        path = root / f"{task}.parquet"
        twins.make_synthetic_task(task, n_train=30, n_eval=8, seed=0)["train"].to_parquet(path)
        paths[task] = str(path)
    summary = builtin.build(paths, root / "model", SPEC)
    return root / "model", summary


def test_every_label_word_of_the_six_tasks_is_one_token(built):
    out_dir, _ = built
    tokenizer = loading.load_tokenizer(out_dir)
    for task in cfg.TASK_PRESETS:
        spec = cfg.task_spec({"tasks": {task: {}}}, task)
        ids = prompts.label_token_ids(tokenizer, spec)  # raises if a word is several tokens
        assert len(set(ids)) == len(spec.label_words)
    assert tokenizer.bos_token == "<s>" and tokenizer.eos_token == "</s>" and tokenizer.pad_token == "<pad>"


def test_the_saved_model_loads_and_pretraining_lowered_the_loss(built):
    out_dir, summary = built
    model = loading.load_model(out_dir, device="cpu")
    tokenizer = loading.load_tokenizer(out_dir)
    assert model.config.bos_token_id == tokenizer.bos_token_id
    assert model.config.n_layer == 1 and loading.context_length(model) == 256
    assert summary["final_loss"] < summary["first_loss"] - 0.5
    assert json.loads((out_dir / "pretraining.json").read_text())["vocab_size"] == len(tokenizer)


def test_zero_pretraining_steps_give_the_seeded_random_model(built, tmp_path):
    """pretrain_steps: 0 (the schema's minimum; the GPU benchmark's random model of a chosen shape)
    builds, and leaves the weights as the seeded initialisation made them."""
    root = built[0].parent
    paths = {task: str(root / f"{task}.parquet") for task in cfg.TASK_PRESETS}
    summary = builtin.build(paths, tmp_path / "model", {**SPEC, "pretrain_steps": 0}, device="cpu")
    assert summary["first_loss"] is None and summary["final_loss"] is None
    model = loading.load_model(tmp_path / "model", device="cpu")
    tokenizer = loading.load_tokenizer(tmp_path / "model")
    fresh = builtin.build_gpt2(tokenizer, n_layer=1, n_embd=32, n_head=2, n_positions=256, seed=SPEC["seed"])
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name


def test_a_vocabulary_too_small_for_the_label_words_is_the_vocab_size_keys_fault(built, tmp_path):
    root = built[0].parent
    paths = {task: str(root / f"{task}.parquet") for task in cfg.TASK_PRESETS}
    with pytest.raises(cfg.ConfigError, match=r"models\.tiny\.vocab_size: 320 tokens are too few.*'Technology'"):
        builtin.build(
            paths, tmp_path / "model", {**SPEC, "vocab_size": 320, "pretrain_steps": 0}, device="cpu", name="tiny"
        )


def test_the_qwen2_builtin_slides_its_first_layers_and_learns(built, tmp_path):
    """architecture: qwen2 builds the sliding-window model the default config uses; it saves its
    layer types, so that the loaded model (and the recorder, which reads the mask) slides too."""
    root = built[0].parent
    paths = {task: str(root / f"{task}.parquet") for task in cfg.TASK_PRESETS}
    spec = {
        **SPEC,
        "n_layer": 3,
        "architecture": "qwen2",
        "sliding_window": 24,
        "sliding_layers": 2,
        "pretrain_lr": 1e-2,
        "pretrain_label_weight": 5,
    }
    summary = builtin.build(paths, tmp_path / "model", spec, device="cpu")
    model = loading.load_model(tmp_path / "model", device="cpu")
    assert model.config.model_type == "qwen2"
    assert model.config.layer_types == ["sliding_attention", "sliding_attention", "full_attention"]
    assert model.config.sliding_window == 24 and loading.context_length(model) == 256
    assert summary["final_loss"] < summary["first_loss"] - 0.5


@pytest.mark.parametrize("mapping", ["canonical", "flip", "permute"])
def test_pretraining_episodes_map_classes_to_label_words_as_asked(built, mapping):
    """Within an episode, one word per class (what ICL can read off the demonstrations); across
    episodes, the task's own words (canonical), those or their reverse (flip), or any order (permute)."""
    out_dir = built[0]
    root = out_dir.parent
    tokenizer = loading.load_tokenizer(out_dir)
    # without the rows whose text holds a newline (it becomes </s>, which here separates demonstrations)
    frames = {task: pd.read_parquet(root / f"{task}.parquet") for task in cfg.TASK_PRESETS}
    frames = {
        task: f[~f.drop(columns=["label", "example_id"]).apply(lambda c: c.str.contains("\n")).any(axis=1)]
        for task, f in frames.items()
    }
    classes, words = {}, {}
    for task, frame in frames.items():
        spec = cfg.task_spec({"tasks": {task: {}}}, task)
        words[task] = prompts.label_token_ids(tokenizer, spec)
        for _, row in frame.iterrows():
            classes[tuple(prompts.prompt_ids(tokenizer, spec, row))] = (task, int(row["label"]))
    seen = set()
    for episode in builtin._episodes(tokenizer, frames, n_episodes=300, max_len=10_000, seed=1, mapping=mapping):
        assert episode[0] == tokenizer.bos_token_id and episode[-1] == tokenizer.eos_token_id
        demos = list(_split(episode[1:], tokenizer.eos_token_id))
        task = classes[tuple(demos[0][:-1])][0]
        used = {}
        for demo in demos:
            demo_task, label = classes[tuple(demo[:-1])]
            assert demo_task == task
            assert used.setdefault(label, demo[-1]) == demo[-1], "one class, two label words in one episode"
        assert len(set(used.values())) == len(used), "two classes, one label word in one episode"
        own = words[task]
        order = tuple(own.index(word) for _, word in sorted(used.items()))
        identity = tuple(sorted(used))
        if mapping == "canonical":
            assert order == identity
        elif mapping == "flip":
            assert order in (identity, tuple(len(own) - 1 - c for c in sorted(used)))
        seen.add(order == identity)
    assert seen == ({True} if mapping == "canonical" else {True, False})


def _split(ids, sep):
    """The parts of ``ids`` that each end in ``sep`` (without it)."""
    part = []
    for i in ids:
        if i == sep:
            yield part
            part = []
        else:
            part.append(i)
