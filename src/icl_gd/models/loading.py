"""Models: loading any Hugging Face causal LM (from the hub, a local folder or a GGUF file), its
pieces the workflow reads (decoder layers, final norm, output logits), and the model variants.
The built-in model (its tokenizer, architectures and pretraining) is ``models.builtin``.

Variants (docs/protocol.md, "Model variants"):
- ``trained``: the model as given;
- ``untrained``: every weight freshly initialised (seeded);
- ``trained_embeddings``: token and position embeddings, every norm and the unembedding kept from
  the trained model; attention and MLP weights fresh;
- ``layernorm_only``: only the norms kept (what the reference logs behind paper 001 Table 1 name).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from pathlib import Path

import torch
from torch import nn

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
KEPT_BY_VARIANT = {"trained_embeddings": ("embeddings", "norms", "unembedding"), "layernorm_only": ("norms",)}


class UnsupportedModelError(RuntimeError):
    """The architecture lacks a piece the workflow needs; the message says which."""


class DamagedCheckpointError(RuntimeError):
    """A checkpoint whose weights hold NaN or inf: damaged, or from a training that diverged."""


def check_finite_weights(model, path) -> None:
    """Refuse weights that hold NaN or inf, naming them: every activation of such a model is NaN
    (every metric undefined), and the recorder's check of the logits would otherwise refuse it as
    an architecture it cannot reproduce."""
    bad = [name for name, param in model.named_parameters() if not bool(torch.isfinite(param).all())]
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise DamagedCheckpointError(
            f"{path}: the weights {shown} hold NaN or inf. The checkpoint is damaged (a download or copy "
            "cut short) or its training diverged: delete the folder and rerun, which downloads, converts or "
            "builds it again (a local model: replace it)"
        )


def pick_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def load_tokenizer(path: str | Path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if tok.bos_token_id is None:
        raise UnsupportedModelError(
            f"the tokenizer in {path} has no BOS token; the protocol starts every sequence with one"
        )
    return tok


def load_model(path: str | Path, *, dtype: str = "float32", device: str = "auto", attn_implementation="sdpa"):
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype], attn_implementation=attn_implementation)
    except ValueError as err:
        if attn_implementation != "sdpa":
            raise
        # some architectures (XGLM, the reference model's) offer eager attention only
        log.warning("%s; loading %s with eager attention instead", str(err).split(".")[0], path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype], attn_implementation="eager")
    model = model.to(pick_device(device)).eval()
    check_finite_weights(model, path)  # on the device: a 1.3B model's check takes milliseconds there
    return model


def context_length(model) -> int:
    config = model.config
    for key in ("max_position_embeddings", "n_positions", "n_ctx"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    raise UnsupportedModelError(f"{type(config).__name__} names no context length (max_position_embeddings)")


def logit_postprocessing(config) -> list[tuple[str, float]]:
    """What a causal LM's own forward does to the output embedding's product, in order: ``("softcap",
    c)``, tanh(z / c) * c (Gemma 2/3's final soft-capping); ``("mul", s)``, z * s (Cohere's logit
    scale); ``("div", s)``, z / s (Granite's logit scaling). ``output_logits`` applies them, and the
    chunked head of layer-causal GD (``training.head_cross_entropy``) differentiates them by hand."""
    steps = []
    cap = getattr(config, "final_logit_softcapping", None)
    if cap:
        steps.append(("softcap", float(cap)))
    if config.model_type in ("cohere", "cohere2") and getattr(config, "logit_scale", None) is not None:
        steps.append(("mul", float(config.logit_scale)))
    if getattr(config, "logits_scaling", None):
        steps.append(("div", float(config.logits_scaling)))
    return steps


def apply_logit_postprocessing(logits: torch.Tensor, steps: list[tuple[str, float]]) -> torch.Tensor:
    for op, value in steps:
        if op == "softcap":
            logits = torch.tanh(logits / value) * value
        elif op == "mul":
            logits = logits * value
        else:
            logits = logits / value
    return logits


def output_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The model's logits from its last hidden states: the output embedding, then what the causal
    LM's own forward does after it (``logit_postprocessing``: Gemma 2/3's final tanh soft-capping,
    Cohere's logit scale, Granite's logit scaling). ``capture.attach`` checks the result against
    the model's forward."""
    return apply_logit_postprocessing(model.get_output_embeddings()(hidden), logit_postprocessing(model.config))


def decoder_layers(model) -> nn.ModuleList:
    """The list of transformer blocks, found by shape rather than by per-architecture name."""
    n = model.config.num_hidden_layers
    for module in model.base_model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == n:
            return module
    raise UnsupportedModelError(f"found no list of {n} decoder blocks in {type(model).__name__}")


def final_norm(model) -> nn.Module:
    """The norm between the last block and the unembedding (needed by layer-causal GD)."""
    base = model.base_model
    for holder in (base, getattr(base, "decoder", None)):
        for name in ("ln_f", "norm", "final_layer_norm", "layer_norm", "final_layernorm"):
            module = getattr(holder, name, None) if holder is not None else None
            if isinstance(module, nn.Module):
                return module
    raise UnsupportedModelError(
        f"found no final norm (ln_f, norm, final_layer_norm, ...) in {type(model).__name__}; "
        "layer-causal GD projects every block through it"
    )


def _is_norm(module: nn.Module) -> bool:
    return isinstance(module, nn.LayerNorm) or "norm" in type(module).__name__.lower()


def _kept_parameter_names(model, keep: tuple[str, ...]) -> set[str]:
    names = set()
    by_module = {id(m): n for n, m in model.named_modules()}
    if "norms" in keep:
        for name, module in model.named_modules():
            if _is_norm(module):
                names.update(f"{name}.{p}" if name else p for p, _ in module.named_parameters(recurse=False))
    if "embeddings" in keep:
        for name, module in model.named_modules():
            if isinstance(module, nn.Embedding):  # token and learned position embeddings
                names.update(f"{name}.{p}" for p, _ in module.named_parameters(recurse=False))
    if "unembedding" in keep:
        out = model.get_output_embeddings()
        names.update(f"{by_module[id(out)]}.{p}" for p, _ in out.named_parameters(recurse=False))
    return names


def make_variant(trained_dir: str | Path, variant: str, seed: int, out_dir: str | Path) -> dict:
    """Materialise a variant of the trained model in ``out_dir`` (weights, config and tokenizer).

    Fresh weights come from the architecture's own initialiser under ``torch.manual_seed(seed)``,
    so a variant is identical for every setting that uses it.
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    trained_dir, out_dir = Path(trained_dir), Path(out_dir)
    if variant == "trained":
        shutil.copytree(trained_dir, out_dir, dirs_exist_ok=True)
        return {"variant": variant, "kept": "all"}
    if variant not in ("untrained", *KEPT_BY_VARIANT):
        raise ValueError(f"unknown model variant {variant!r}")
    config = AutoConfig.from_pretrained(trained_dir)
    torch.manual_seed(seed)
    fresh = AutoModelForCausalLM.from_config(config)
    kept = []
    if variant in KEPT_BY_VARIANT:
        trained = AutoModelForCausalLM.from_pretrained(trained_dir, dtype=torch.float32)
        kept = sorted(_kept_parameter_names(trained, KEPT_BY_VARIANT[variant]))
        source = dict(trained.named_parameters(remove_duplicate=False))
        target = dict(fresh.named_parameters(remove_duplicate=False))
        with torch.no_grad():
            for name in kept:
                target[name].copy_(source[name])
    fresh.save_pretrained(out_dir)
    for path in trained_dir.iterdir():  # tokenizer files
        if "token" in path.name or path.name in ("vocab.json", "merges.txt", "special_tokens_map.json"):
            shutil.copy2(path, out_dir / path.name)
    return {"variant": variant, "kept": kept}


class ModelNotAvailableError(RuntimeError):
    """A hub model that cannot be fetched; the message names the config key, the id and the fix."""


def download(spec: dict, out_dir: str | Path, name: str = "<name>") -> None:
    """Fetch a hub model and its tokenizer once, and save them where offline jobs read them."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not spec.get("id"):
        raise ValueError(f"a model with source 'hub' needs models.{name}.id, e.g. KoboldAI/fairseq-dense-1.3B")
    model_id, revision = spec["id"], spec.get("revision")
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_id, revision=revision)
        model = AutoModelForCausalLM.from_pretrained(model_id, revision=revision, dtype="auto")
    except (OSError, ValueError) as err:  # the hub client's offline, missing-repo and network errors
        offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
        raise ModelNotAvailableError(
            f"models.{name}.id: cannot fetch {model_id!r}{f' (revision {revision})' if revision else ''} from the "
            f"hub{' (HF_HUB_OFFLINE is set)' if offline else ''}: {str(err).splitlines()[0]}. Fetch it once where "
            f"the hub is reachable (`snakemake --cores 1 {Path(out_dir).as_posix()}` there, then copy the folder "
            f"here), or point the model at a saved copy: models.{name}: {{source: local, path: <folder of "
            "save_pretrained>}}"
        ) from err
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def convert_gguf(path: str | Path, out_dir: str | Path, name: str = "<name>") -> None:
    """Dequantise a GGUF checkpoint (``source: gguf``) into a save_pretrained folder: float32
    weights, config and tokenizer, which every later job loads like any local model.

    transformers reads the GGUF file itself (it needs the ``gguf`` and ``accelerate`` packages) and
    returns a model in float32; such a model counts as quantised there and refuses
    ``save_pretrained``, so its weights are moved into a plain model of the same config first.
    The file's existence is checked at validation (``config.gguf_file``), the tokenizer's BOS token
    where every job loads it (``load_tokenizer``)."""
    import importlib.util

    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    missing = [pkg for pkg in ("gguf", "accelerate") if importlib.util.find_spec(pkg) is None]
    if missing:
        raise ModelNotAvailableError(
            f"models.{name}: transformers reads a GGUF file ({path.name}) only with the package(s) "
            f"{', '.join(missing)} installed: `pip install {' '.join(missing)}` (or `pip install -e '.[gguf]'`)"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    except (ValueError, KeyError) as err:  # unknown architecture, not a GGUF file, unreadable tensors
        from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

        readable = sorted(set(GGUF_CONFIG_MAPPING) - {"general", "tokenizer"})
        raise UnsupportedModelError(
            f"models.{name}: transformers cannot load {path}: {str(err).splitlines()[0]} It reads GGUF files of "
            f"these architectures: {', '.join(readable)}. Use a GGUF file of one of them, or the original "
            f"checkpoint with models.{name}: {{source: local, path: <folder of save_pretrained>}}"
        ) from err
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=True)
    plain.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    log.info(
        "%s: %s (%s, %d layers, %.0fM parameters) saved to %s",
        name,
        path.name,
        config.model_type,
        config.num_hidden_layers,
        sum(p.numel() for p in plain.parameters()) / 1e6,
        out_dir,
    )


def parameter_count(path: str | Path) -> int:
    """The number of parameters a model folder saves (every tensor of its ``*.safetensors`` files,
    tied weights once, as saved), read from the files' headers without loading a weight."""
    import json
    import struct

    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise UnsupportedModelError(
            f"{path}: no .safetensors file to count the parameters of; save the model with "
            "save_pretrained(safe_serialization=True)"
        )
    total = 0
    for file in files:
        with open(file, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        for name, entry in header.items():
            if name != "__metadata__":
                total += math.prod(entry["shape"])
    return total


def model_statistics(name: str, path: str | Path) -> dict:
    """A model's size, from its folder: parameters (:func:`parameter_count`), layers, width, type."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path)
    return {
        "model": name,
        "n_parameters": parameter_count(path),
        "n_layers": int(config.num_hidden_layers),
        "hidden_size": int(config.hidden_size),
        "model_type": config.model_type,
    }
