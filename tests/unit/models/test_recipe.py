"""The recipe of a built-in model that reads its demonstrations: the label-word loss, the mimetic
start of its last attention layer, the training curve, and its shipped weights."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from icl_gd.common import checksums, code_versions
from icl_gd.config import resolve as cfg
from icl_gd.config import validation
from icl_gd.data import sources, twins
from icl_gd.models import builtin, curve, loading, pretraining, shipped

SPEC = {
    "architecture": "qwen2",
    "sliding_window": 16,
    "sliding_layers": 1,
    "n_layer": 2,
    "n_embd": 32,
    "n_head": 2,
    "n_positions": 512,
    "vocab_size": 1000,  # enough words for the pool mapping's two pools
    "pretrain_steps": 12,
    "pretrain_lr": 3e-3,
    "pretrain_len": 256,
    "pretrain_label_weight": 1,
    "pretrain_label_mapping": "pool",
    "pretrain_pool_share": 0.5,
    "pretrain_loss": "labels",
    "pretrain_demos": [2, 4],
    "pretrain_batch": 4,
    "pretrain_canonical_steps": 4,
    "pretrain_zero_shot_from": 8,
    "attention_init": "mimetic",
    "pooling_layers": 1,
    "pretrain_curve": {"every": 6, "k": 4, "examples": 6},
    "seed": 0,
}


@pytest.fixture(scope="module")
def twin_paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("twins")
    paths = {}
    for task in cfg.TASK_PRESETS:
        path = root / f"{task}.parquet"
        twins.make_synthetic_task(task, n_train=30, n_eval=4, seed=0)["train"].to_parquet(path)
        paths[task] = str(path)
    return paths


@pytest.fixture(scope="module")
def made(twin_paths, tmp_path_factory):
    out = tmp_path_factory.mktemp("made") / "model"
    return out, builtin.make(twin_paths, out, SPEC, device="cpu", name="tiny")


def test_mimetic_initialisation_starts_the_last_layer_as_a_copying_head():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=50,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
    )
    pretraining.mimetic_init(model, seed=1)
    attention = model.model.layers[-1].self_attn
    eye = torch.eye(16)
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        assert (getattr(attention, name).weight - eye).abs().max() < 0.1, name
    first = model.model.layers[0].self_attn.q_proj.weight
    assert (first - eye).abs().max() > 0.5  # the other layers keep their random start


def test_mimetic_initialisation_needs_square_projections():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=50,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    )
    with pytest.raises(ValueError, match="square projections; k_proj"):
        pretraining.mimetic_init(model)


def test_the_recipe_builds_records_its_curve_and_its_checksum(made, twin_paths):
    out, summary = made
    assert summary["trained"] and summary["final_loss"] is not None
    model = loading.load_model(out, device="cpu")
    assert loading.context_length(model) == 512
    table = pd.read_csv(out / builtin.CURVE_FILE, sep="\t")
    assert sorted(table["step"].unique()) == [6, 12]
    assert set(table["task"]) == set(cfg.TASK_PRESETS)
    # under the pool mapping the curve also reads the held-out pool's words
    assert table[[*curve.READINGS, curve.NOVEL]].apply(lambda c: c.between(0, 100)).all().all()
    recipe = json.loads((out / shipped.RECIPE_FILE).read_text())
    frames = {t: pd.read_parquet(p) for t, p in twin_paths.items()}
    assert recipe["checksum"] == shipped.recipe_checksum(SPEC, frames)


def test_the_label_loss_reads_only_the_told_label_words():
    """A batch whose episodes tell nothing (one demonstration each, whose first label is the only
    target: a zero-shot query) still trains; the loss is the cross-entropy at the told positions."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=30,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            pad_token_id=0,
        )
    )
    episode = pretraining.Episode([1, 5, 6, 7, 2, 5, 6, 8, 2], labels=[2, 6], told=[6])
    batch = torch.tensor([episode.ids])
    logits = model(batch).logits[0]
    expected = torch.nn.functional.cross_entropy(logits[6:7], batch[0, 7:8])
    got = pretraining._label_loss(model, batch, torch.arange(9)[None], [episode])
    assert torch.allclose(got, expected, atol=1e-5)
    assert pretraining._label_loss(model, batch, torch.arange(9)[None], [pretraining.Episode(episode.ids)]) is None


def test_shipped_weights_of_this_recipe_are_copied_not_trained(made, twin_paths, tmp_path, caplog):
    out, _ = made
    folder = tmp_path / "shipped"
    shipped.ship(out, folder)
    spec = {**SPEC, "weights": "models/tiny"}  # where they are shipped is no part of the recipe
    result = builtin.make(twin_paths, tmp_path / "copy", spec, device="cpu", name="tiny", shipped_folder=folder)
    assert result == {"trained": False, "checksum": shipped.shipped_checksum(folder)}
    a = loading.load_model(out, device="cpu").state_dict()
    b = loading.load_model(tmp_path / "copy", device="cpu").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # the build recorded its weights' sha256, which the copy was checked against
    assert shipped.read_recipe(out)["sha256"] == {"model.safetensors": checksums.sha256_of(out / "model.safetensors")}


def test_damaged_shipped_weights_of_this_recipe_stop_the_build(made, twin_paths, tmp_path):
    """Neither copied nor trained anew: the job stops, naming the file (tests/unit/models/test_shipped.py
    checks the message on each kind of damage)."""
    out, _ = made
    folder = tmp_path / "shipped"
    shipped.ship(out, folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    spec = {**SPEC, "weights": "models/tiny"}
    with pytest.raises(shipped.DamagedWeightsError, match=f"{weights} is not the weights file"):
        builtin.make(twin_paths, tmp_path / "copy", spec, device="cpu", name="tiny", shipped_folder=folder)
    assert not (tmp_path / "copy").exists()


def test_a_changed_recipe_trains_anew_and_says_why(made, twin_paths, tmp_path, caplog):
    out, _ = made
    folder = tmp_path / "shipped"
    shipped.ship(out, folder)
    spec = {**SPEC, "pretrain_steps": 6, "pretrain_curve": None, "weights": "models/tiny"}
    with caplog.at_level("WARNING"):
        result = builtin.make(twin_paths, tmp_path / "new", spec, device="cpu", name="tiny", shipped_folder=folder)
    assert result["trained"]
    assert "were made for another recipe" in caplog.text and "python -m icl_gd.models.shipped" in caplog.text
    assert shipped.shipped_checksum(tmp_path / "new") != shipped.shipped_checksum(folder)


def test_changed_twins_change_the_recipe(twin_paths):
    frames = {t: pd.read_parquet(p) for t, p in twin_paths.items()}
    before = shipped.recipe_checksum(SPEC, frames)
    frames["cb"] = frames["cb"].assign(label=frames["cb"]["label"].iloc[::-1].to_numpy())
    assert shipped.recipe_checksum(SPEC, frames) != before


def test_shipping_needs_a_built_model(tmp_path):
    with pytest.raises(SystemExit, match="holds no recipe.json"):
        shipped.ship(tmp_path, tmp_path / "out")


def test_the_recipe_checksum_follows_the_codes_meaning_not_its_writing(tmp_path):
    """A comment, a docstring and blank lines leave a module's meaning as it was; a changed constant
    does not (what the shipped weights' recipe, and issue 71's code versions, read)."""
    source = shutil.copy(code_versions.PACKAGE / "models" / "episodes.py", tmp_path / "episodes.py")
    text = source.read_text()
    before = code_versions.meaning(source)
    source.write_text(text.replace('"""The built-in', '"""Another docstring. The built-in', 1) + "\n\n# a comment\n")
    assert code_versions.meaning(source) == before
    source.write_text(
        text.replace("def batch(", "\n\ndef _unused():\n    pass\n\n\n    def batch(", 1)
        if False
        else text.replace("    def batch(", "\n    def batch(", 1)
    )
    assert code_versions.meaning(source) == before
    source.write_text(
        text.replace(
            'MAPPINGS = ("canonical", "flip", "permute", "pool")', 'MAPPINGS = ("canonical", "permute", "pool")'
        )
    )
    assert code_versions.meaning(source) != before


def test_pooling_layers_keep_their_queries_at_zero_through_pretraining(made):
    """pooling_layers: the first layers' query weights start at zero and stay there (no gradient),
    their bias learned: every position weighs its window by content alone."""
    out, _ = made
    model = loading.load_model(out, device="cpu")
    assert not model.model.layers[0].self_attn.q_proj.weight.any()
    assert model.model.layers[0].self_attn.q_proj.bias.any()
    assert model.model.layers[1].self_attn.q_proj.weight.any()


def test_the_learning_rate_warms_up_then_decays_to_a_twentieth():
    factors = [pretraining.schedule(step, 1000) for step in range(1000)]
    assert factors[0] == pytest.approx(0.01) and max(factors) == factors[99] > 0.97
    assert max(factors) <= 1.0 and factors[-1] == pytest.approx(0.05)
    assert all(a >= b for a, b in zip(factors[100:], factors[101:]))
    assert pretraining.schedule(0, 10) == 1.0  # a run of ten steps warms up in one


REPO = Path(__file__).resolve().parents[3]


def train_frames(config: dict, spec: dict, folder: Path) -> dict[str, pd.DataFrame]:
    """The train rows a built-in model's build reads: the twins', or its pretrain_tasks' prepared
    splits (real sentences from the corpora's archives), through parquet as the workflow hands them."""
    frames = {}
    for task in spec.get("pretrain_tasks") or cfg.TASK_PRESETS:
        path = folder / f"{task}.parquet"
        if spec.get("pretrain_tasks"):
            train = sources.load_task_splits(cfg.task_spec(config, task))["train"]
        else:
            train = twins.make_synthetic_task(task, **config["synthetic"])["train"]
        train.to_parquet(path)
        frames[task] = pd.read_parquet(path)
    return frames


@pytest.mark.parametrize(
    "config_file", ["config.yaml", "configs/reader-protocol.yaml", "configs/reader-real-protocol.yaml"]
)
def test_the_shipped_weights_are_the_shipped_configs_recipe(config_file, tmp_path):
    """Fails when a shipped config's recipe, its train rows or the training code moved away from the
    weights in the repository: rebuild them with the workflow and ship them (docs/results.md)."""
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    config = validation.validate(yaml.safe_load((REPO / config_file).read_text()), schema)
    specs = [spec for spec in config["models"].values() if spec.get("weights")]
    assert specs, f"{config_file} ships no weights"
    for spec in specs:
        frames = train_frames(config, spec, tmp_path)
        have = shipped.shipped_checksum(REPO / spec["weights"])
        assert have == shipped.recipe_checksum(spec, frames), (
            f"{spec['weights']} is not the weights of {config_file}'s recipe: rebuild with "
            f"`snakemake --cores all resources/models/<name>/trained` and ship with "
            f"`python -m icl_gd.models.shipped resources/models/<name>/trained {spec['weights']}`"
        )
