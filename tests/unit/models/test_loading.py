"""Tests of icl_gd.models.loading: the offline tokenizer, loading, the model variants, and finding blocks."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from types import SimpleNamespace  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModelForCausalLM, GPT2Config, PreTrainedTokenizerFast  # noqa: E402

from icl_gd.models import builtin, loading, pretraining  # noqa: E402
from icl_gd.models.loading import UnsupportedModelError  # noqa: E402
from tests.conftest import ARCHS, LABEL_WORDS, TINY_CONTEXT, corpus  # noqa: E402


def params(path) -> dict[str, torch.Tensor]:
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return {n: p.detach().clone() for n, p in model.named_parameters(remove_duplicate=False)}


# What each variant keeps, classified by parameter name by hand (independently of the code).
EMBEDDING_NAMES = ("wte.", "wpe.", "embed_tokens.", "embed_positions.", "embed_in.")
NORM_NAMES = ("ln_1.", "ln_2.", "ln_f.", "layer_norm.", "layernorm.", "model.norm.")
UNEMBEDDING_NAMES = ("lm_head.", "embed_out.")


def is_kept(name: str, variant: str) -> bool:
    if any(key in name for key in NORM_NAMES):
        return True
    return variant == "trained_embeddings" and any(key in name for key in EMBEDDING_NAMES + UNEMBEDDING_NAMES)


# --------------------------------------------------------------------------------------------
# tokenizer


def test_train_tokenizer_makes_frequent_label_words_single_tokens(tmp_path):
    tok = builtin.train_tokenizer(corpus(), vocab_size=1000, out_dir=tmp_path, model_max_length=TINY_CONTEXT)
    for word in LABEL_WORDS:
        ids = tok.encode(" " + word, add_special_tokens=False)
        assert len(ids) == 1, word
        assert tok.decode(ids) == " " + word
    assert len(tok.encode(" Zebrafishy", add_special_tokens=False)) > 1  # a word the corpus lacks
    # special tokens are fairseq's, with the ids the tokenizer gave them
    assert (tok.bos_token, tok.eos_token, tok.pad_token, tok.unk_token) == ("<s>", "</s>", "<pad>", "<unk>")
    assert tok.bos_token_id == tok.convert_tokens_to_ids("<s>")
    assert tok.eos_token_id == tok.convert_tokens_to_ids("</s>")
    assert tok.pad_token_id == tok.convert_tokens_to_ids("<pad>")
    assert len({tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id}) == 4
    assert tok.model_max_length == TINY_CONTEXT
    # saved: loading it back gives the same ids
    loaded = loading.load_tokenizer(tmp_path)
    assert loaded.bos_token_id == tok.bos_token_id and loaded.eos_token_id == tok.eos_token_id
    assert loaded.encode(" Negative Positive", add_special_tokens=False) == tok.encode(
        " Negative Positive", add_special_tokens=False
    )


def test_load_tokenizer_without_bos_is_refused(tmp_path, tokenizer_dir):
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_dir / "tokenizer.json"), eos_token="</s>")
    tok.save_pretrained(tmp_path)
    with pytest.raises(UnsupportedModelError, match="no BOS token"):
        loading.load_tokenizer(tmp_path)


def test_build_gpt2_takes_ids_from_the_tokenizer(tokenizer):
    a = builtin.build_gpt2(tokenizer, n_layer=2, n_embd=32, n_head=4, n_positions=64, seed=3)
    b = builtin.build_gpt2(tokenizer, n_layer=2, n_embd=32, n_head=4, n_positions=64, seed=3)
    c = builtin.build_gpt2(tokenizer, n_layer=2, n_embd=32, n_head=4, n_positions=64, seed=4)
    cfg = a.config
    assert cfg.vocab_size == len(tokenizer)
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id) == (
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
    )
    assert cfg.resid_pdrop == cfg.embd_pdrop == cfg.attn_pdrop == 0.0
    assert torch.equal(a.transformer.wte.weight, b.transformer.wte.weight)
    assert not torch.equal(a.transformer.wte.weight, c.transformer.wte.weight)


# --------------------------------------------------------------------------------------------
# loading


def test_load_model_uses_sdpa_and_falls_back_to_eager_where_it_must(model_dirs):
    gpt2 = loading.load_model(model_dirs["gpt2"], device="cpu")
    assert gpt2.config._attn_implementation == "sdpa" and not gpt2.training
    # XGLM (the reference model's architecture) has eager attention only
    xglm = loading.load_model(model_dirs["xglm"], device="cpu")
    assert xglm.config._attn_implementation == "eager"
    half = loading.load_model(model_dirs["llama"], dtype="bfloat16", device="cpu")
    assert next(half.parameters()).dtype == torch.bfloat16


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_checkpoint_whose_weights_hold_nan_or_inf_is_refused_for_that_reason(model_dirs, tmp_path, bad):
    model = AutoModelForCausalLM.from_pretrained(model_dirs["llama"])
    with torch.no_grad():
        model.model.layers[1].self_attn.k_proj.weight[0, 3] = bad
    model.save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((model_dirs["llama"] / name).read_bytes())
    with pytest.raises(
        loading.DamagedCheckpointError,
        match=r"layers\.1\.self_attn\.k_proj\.weight hold NaN or inf.*delete the folder and rerun",
    ):
        loading.load_model(tmp_path, device="cpu")
    loading.load_model(model_dirs["llama"], device="cpu")  # its intact original loads


def test_pick_device():
    assert loading.pick_device("cpu") == torch.device("cpu")
    assert loading.pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


# --------------------------------------------------------------------------------------------
# variants


@pytest.fixture(scope="module")
def gpt2_variants(model_dirs, tmp_path_factory):
    """name -> (returned info, parameters) of GPT-2 variants, built once."""
    out = {}
    for key, variant, seed in [
        ("trained", "trained", 0),
        ("untrained", "untrained", 0),
        ("untrained_again", "untrained", 0),
        ("untrained_seed1", "untrained", 1),
        ("trained_embeddings", "trained_embeddings", 0),
        ("layernorm_only", "layernorm_only", 0),
    ]:
        path = tmp_path_factory.mktemp(key)
        info = loading.make_variant(model_dirs["gpt2"], variant, seed, path)
        out[key] = (info, params(path), path)
    out["original"] = (None, params(model_dirs["gpt2"]), model_dirs["gpt2"])
    return out


def test_trained_variant_is_a_copy(gpt2_variants):
    info, trained, path = gpt2_variants["trained"]
    assert info == {"variant": "trained", "kept": "all"}
    original = gpt2_variants["original"][1]
    assert trained.keys() == original.keys()
    assert all(torch.equal(trained[n], original[n]) for n in original)


def test_untrained_differs_from_trained_in_every_tensor(gpt2_variants):
    info, untrained, path = gpt2_variants["untrained"]
    assert info["kept"] == []
    original = gpt2_variants["original"][1]
    assert untrained.keys() == original.keys()
    same = [n for n in original if torch.equal(untrained[n], original[n])]
    assert same == []
    # the tokenizer travels with the variant
    assert (
        loading.load_tokenizer(path).bos_token_id == loading.load_tokenizer(gpt2_variants["original"][2]).bos_token_id
    )


def test_untrained_is_seeded(gpt2_variants):
    a, b, c = (gpt2_variants[k][1] for k in ("untrained", "untrained_again", "untrained_seed1"))
    assert all(torch.equal(a[n], b[n]) for n in a)  # one seed: identical, for every setting
    random_init = [n for n in a if n.endswith("weight") and not any(k in n for k in NORM_NAMES)]
    assert len(random_init) == 11  # wte, wpe, lm_head and 4 matrices in each of the 2 blocks
    assert all(not torch.equal(a[n], c[n]) for n in random_init)  # another seed: other weights


@pytest.mark.parametrize("variant", ["trained_embeddings", "layernorm_only"])
def test_gpt2_variant_keeps_exactly_what_it_names(gpt2_variants, variant):
    info, got, _ = gpt2_variants[variant]
    original = gpt2_variants["original"][1]
    fresh = gpt2_variants["untrained"][1]  # the same seed's fresh initialisation
    expected_kept = {n for n in original if is_kept(n, variant)}
    norms = {f"transformer.h.{l}.ln_{i}.{w}" for l in (0, 1) for i in (1, 2) for w in ("weight", "bias")}
    norms |= {"transformer.ln_f.weight", "transformer.ln_f.bias"}
    if variant == "trained_embeddings":
        assert expected_kept == norms | {"transformer.wte.weight", "transformer.wpe.weight", "lm_head.weight"}
    else:
        assert expected_kept == norms
    assert set(info["kept"]) == expected_kept
    for name in original:
        if name in expected_kept:
            assert torch.equal(got[name], original[name]), f"{name} must be kept"
        else:  # attention and MLP (and, for layernorm_only, the embeddings) are fresh
            assert not torch.equal(got[name], original[name]), f"{name} must be fresh"
            assert torch.equal(got[name], fresh[name]), f"{name} must be the seeded fresh init"


@pytest.mark.parametrize("arch", ["opt", "xglm", "llama", "neox"])
def test_trained_embeddings_on_other_architectures(model_dirs, tmp_path, arch):
    info = loading.make_variant(model_dirs[arch], "trained_embeddings", 0, tmp_path)
    got, original = params(tmp_path), params(model_dirs[arch])
    kept = {n for n in original if is_kept(n, "trained_embeddings")}
    assert set(info["kept"]) == kept
    assert any("lm_head" in n for n in kept) and any("embed" in n for n in kept)
    assert sum("norm" in n for n in kept) >= 5  # two per block and the final one
    if arch == "opt":
        assert "model.decoder.embed_positions.weight" in kept  # learned positions are embeddings
    for name in original:
        assert torch.equal(got[name], original[name]) == (name in kept), name


def test_unknown_variant_is_refused(model_dirs, tmp_path):
    with pytest.raises(ValueError, match="unknown model variant 'pretrained'"):
        loading.make_variant(model_dirs["gpt2"], "pretrained", 0, tmp_path)


# --------------------------------------------------------------------------------------------
# structure


def expected_structure(model, arch):
    if arch == "gpt2":
        return model.transformer.h, model.transformer.ln_f
    if arch == "opt":
        return model.model.decoder.layers, model.model.decoder.final_layer_norm
    if arch == "xglm":
        return model.model.layers, model.model.layer_norm
    if arch == "llama":
        return model.model.layers, model.model.norm
    if arch == "neox":
        return model.gpt_neox.layers, model.gpt_neox.final_layer_norm
    raise ValueError(arch)


@pytest.mark.parametrize("arch", ARCHS)
def test_decoder_layers_final_norm_and_context_length(load_tiny, arch):
    model = load_tiny(arch)
    layers, norm = expected_structure(model, arch)
    assert loading.decoder_layers(model) is layers
    assert loading.final_norm(model) is norm
    assert loading.context_length(model) == TINY_CONTEXT


def test_context_length_reads_the_config():
    assert loading.context_length(SimpleNamespace(config=SimpleNamespace(max_position_embeddings=2048))) == 2048
    assert loading.context_length(SimpleNamespace(config=GPT2Config(n_positions=77))) == 77
    assert loading.context_length(SimpleNamespace(config=SimpleNamespace(n_ctx=99))) == 99
    with pytest.raises(UnsupportedModelError, match="context length"):
        loading.context_length(SimpleNamespace(config=SimpleNamespace(hidden_size=8)))


def test_missing_blocks_and_norm_are_unsupported(load_tiny):
    model = load_tiny("gpt2")
    model.config.num_hidden_layers = 3  # no list of 3 blocks anywhere
    with pytest.raises(UnsupportedModelError, match="no list of 3 decoder blocks"):
        loading.decoder_layers(model)
    model.transformer.ln_f = None
    with pytest.raises(UnsupportedModelError, match="no final norm"):
        loading.final_norm(model)


def test_download_saves_model_and_tokenizer_for_offline_jobs(tmp_path, model_dirs):
    """The hub path of the models stage; a local directory stands in for the hub id offline."""
    from icl_gd.models.loading import download, load_model, load_tokenizer

    out = tmp_path / "trained"
    download({"id": str(model_dirs["opt"]), "revision": None}, out)
    model, tokenizer = load_model(out, device="cpu"), load_tokenizer(out)
    original = load_model(model_dirs["opt"], device="cpu")
    assert type(model).__name__ == "OPTForCausalLM" and tokenizer.bos_token == "<s>"
    for (name, p), q in zip(model.named_parameters(), original.parameters()):
        assert torch.equal(p, q), name
    with pytest.raises(ValueError, match="models.<name>.id"):
        download({"id": None}, tmp_path / "none")


def test_a_hub_model_that_cannot_be_fetched_names_the_key_the_id_and_the_fix(tmp_path, monkeypatch):
    """Offline (HF_HUB_OFFLINE, as in every test), a hub id that is not in the local cache."""
    from icl_gd.models.loading import ModelNotAvailableError, download

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailableError) as err:
        download({"id": "no-such-org/no-such-model", "revision": None}, tmp_path / "trained", name="mymodel")
    message = str(err.value)
    assert "models.mymodel.id" in message and "'no-such-org/no-such-model'" in message
    assert "HF_HUB_OFFLINE is set" in message and "source: local" in message
    assert not (tmp_path / "trained").exists()


def test_the_weighted_pretraining_loss_is_the_models_own_at_weight_one_and_counts_weighted_tokens_w_times(tokenizer):
    model = builtin.build_gpt2(tokenizer, n_layer=1, n_embd=32, n_head=4, n_positions=64, seed=3)
    ids = torch.tensor([[tokenizer.bos_token_id, 40, 41, 42, 43, 44]])
    targets = ids.clone()
    targets[0, -1] = -100  # a padded position is ignored
    with torch.no_grad():
        own = model(input_ids=ids, labels=targets).loss
        logits = model(input_ids=ids).logits[:, :-1]
    shifted = targets[:, 1:]
    assert torch.allclose(pretraining.weighted_loss(logits, shifted, [], 1.0), own, atol=1e-6)
    per_token = torch.nn.functional.cross_entropy(logits[0, :4], shifted[0, :4], reduction="none")
    expected = (per_token.sum() + 2 * per_token[1]) / 6  # token 41 counts 3 times: weights 1, 3, 1, 1
    assert torch.allclose(pretraining.weighted_loss(logits, shifted, [41], 3.0), expected, atol=1e-6)
