"""The built-in tiny model: its tokenizer holds every label word as one token, and it learns."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from icl_gd.config import resolve as cfg
from icl_gd.data import label_pools, prompts, twins
from icl_gd.models import builtin, curve, episodes, loading

SPEC = {
    "n_layer": 1,
    "n_embd": 32,
    "n_head": 2,
    "n_positions": 256,
    "vocab_size": 400,
    "pretrain_steps": 60,
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


@pytest.mark.parametrize("mapping", ["canonical", "flip", "permute", "pool"])
def test_pretraining_episodes_map_classes_to_label_words_as_asked(built, mapping):
    """Within an episode, one word per class (what ICL can read off the demonstrations); across
    episodes, the task's own words (canonical), those or their reverse (flip), any order (permute),
    or in about half of them words of the recipe's training pool and never one of its held-out pool
    (pool: the words setting icl_novel reads are no training episode's label)."""
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
    seen, pooled = set(), []
    pools = label_pools.label_pools(tokenizer)
    sampler = episodes.Episodes(
        tokenizer, frames, seed=1, demos=(1, 16), max_len=10_000, pool=pools.train, pool_share=0.5
    )
    for _ in range(60):
        for episode in sampler.batch(5, mapping):
            ids = episode.ids
            assert ids[0] == tokenizer.bos_token_id and ids[-1] == tokenizer.eos_token_id
            demos = list(_split(ids[1:], tokenizer.eos_token_id))
            task = classes[tuple(demos[0][:-1])][0]
            used = {}
            for demo in demos:
                demo_task, label = classes[tuple(demo[:-1])]
                assert demo_task == task
                assert used.setdefault(label, demo[-1]) == demo[-1], "one class, two label words in one episode"
            assert len(set(used.values())) == len(used), "two classes, one label word in one episode"
            own = words[task]
            assert not set(used.values()) & set(pools.held_out)
            pooled.append(not set(used.values()) <= set(own))
            if pooled[-1]:
                assert mapping == "pool" and set(used.values()) <= set(pools.train)
                continue
            order = tuple(own.index(word) for _, word in sorted(used.items()))
            identity = tuple(sorted(used))
            if mapping == "canonical":
                assert order == identity
            elif mapping == "flip":
                assert order in (identity, tuple(len(own) - 1 - c for c in sorted(used)))
            seen.add(order == identity)
    assert seen == ({True} if mapping == "canonical" else {True, False})
    assert 0.35 < np.mean(pooled) < 0.65 if mapping == "pool" else not any(pooled)


def test_an_episode_marks_its_label_words_and_the_ones_reading_it_tells(built):
    """``labels``: every position whose next token is a label word; ``told``: each whose class an
    earlier demonstration showed, never the first of a class (under a permuted mapping its word is
    one not used yet: nothing the episode says)."""
    out_dir = built[0]
    tokenizer = loading.load_tokenizer(out_dir)
    frames = {"sst5": twins.make_synthetic_task("sst5", n_train=40, n_eval=2, seed=3)["train"]}
    sampler = episodes.Episodes(tokenizer, frames, seed=0, demos=(6, 6), max_len=10_000)
    label_ids = set(prompts.label_token_ids(tokenizer, cfg.task_spec({"tasks": {"sst5": {}}}, "sst5")))
    for episode in sampler.batch(20, "permute", zero_shot=True):
        assert episode.told[0] == episode.labels[0]  # zero_shot: the first demonstration's word too
    for episode in sampler.batch(20, "permute"):
        assert len(episode.labels) == 6
        assert all(
            episode.ids[p + 1] in label_ids and episode.ids[p + 2] == tokenizer.eos_token_id for p in episode.labels
        )
        words = [episode.ids[p + 1] for p in episode.labels]  # one word per class: the class, up to renaming
        expected = [p for i, p in enumerate(episode.labels) if words[i] in words[:i]]
        assert episode.told == expected


def test_episodes_cut_at_max_len_keep_only_the_label_words_they_hold(built):
    tokenizer = loading.load_tokenizer(built[0])
    frames = {"agnews": twins.make_synthetic_task("agnews", n_train=30, n_eval=2, seed=0)["train"]}
    for episode in episodes.Episodes(tokenizer, frames, seed=0, demos=(8, 8), max_len=150).batch(10, "permute"):
        assert len(episode.ids) <= 150 and all(p + 1 < len(episode.ids) for p in episode.labels)


def test_a_left_out_twin_reaches_no_episode(built):
    """pretrain_leave_out (issue 81, item 2): the sampler draws from the other twins alone, so that
    no demonstration of the left-out twin is ever in an episode; a name that is no twin, or leaving
    every twin out, is the config's fault."""
    tokenizer = loading.load_tokenizer(built[0])
    frames = {t: twins.make_synthetic_task(t, n_train=30, n_eval=2, seed=0)["train"] for t in ("sst2", "cb", "subj")}
    kept = builtin.episode_frames(frames, {"pretrain_leave_out": ["cb"]})
    assert set(kept) == {"sst2", "subj"} and builtin.episode_frames(frames, {}) == frames
    spec = cfg.task_spec({"tasks": {"cb": {}}}, "cb")
    left_out = {tuple(prompts.prompt_ids(tokenizer, spec, row)) for _, row in frames["cb"].iterrows()}
    sampler = episodes.Episodes(tokenizer, kept, seed=0, demos=(1, 16), max_len=10_000)
    for _ in range(30):
        for episode in sampler.batch(4, "permute"):
            assert not any(tuple(demo[:-1]) in left_out for demo in _split(episode.ids[1:], tokenizer.eos_token_id))
    with pytest.raises(cfg.ConfigError, match="'mnli' is no task"):
        builtin.episode_frames(frames, {"pretrain_leave_out": ["mnli"]})
    with pytest.raises(cfg.ConfigError, match="every twin is left out"):
        builtin.episode_frames(frames, {"pretrain_leave_out": ["sst2", "cb", "subj"]})


def test_the_held_out_rows_never_reach_an_episode(built):
    """pretrain_curve.examples: the last rows of each twin's train split are the curve's queries,
    never a pretraining demonstration (and the evaluation split is no input of the build at all)."""
    tokenizer = loading.load_tokenizer(built[0])
    frame = twins.make_synthetic_task("subj", n_train=60, n_eval=2, seed=0)["train"]
    train, held_out = curve.split_held_out({"subj": frame}, 20)
    assert len(train["subj"]) == 40 and held_out["subj"]["example_id"].tolist() == list(range(40, 60))
    spec = cfg.task_spec({"tasks": {"subj": {}}}, "subj")
    held = {tuple(prompts.prompt_ids(tokenizer, spec, row)) for _, row in held_out["subj"].iterrows()}
    trained = {tuple(prompts.prompt_ids(tokenizer, spec, row)) for _, row in train["subj"].iterrows()}
    sampler = episodes.Episodes(tokenizer, train, seed=0, demos=(1, 16), max_len=10_000)
    for episode in sampler.batch(50, "permute"):
        for demo in _split(episode.ids[1:], tokenizer.eos_token_id):
            assert tuple(demo[:-1]) not in held - trained
    with pytest.raises(ValueError, match="pretrain_curve.examples: 30 held-out rows of subj's 60"):
        curve.split_held_out({"subj": frame}, 30)


def _split(ids, sep):
    """The parts of ``ids`` that each end in ``sep`` (without it)."""
    part = []
    for i in ids:
        if i == sep:
            yield part
            part = []
        else:
            part.append(i)
