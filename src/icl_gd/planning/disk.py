"""What a run's activation caches take on disk, known before it starts.

A cache's size follows from its layout (``cache.write_cache``), the model's shape and what the run
feeds the model (``extract.sequences_of``): per example, its attention outputs (L x D values), its
score rows (L x H x its query length), its context scores (L x the context's length) and a few
scalars. ``cache_bytes`` counts them as the writer lays them out; ``estimate`` adds up every cache
of a config; ``describe`` says it in words, by run group (model, variant, task: a ZSL cache and the
caches of every seed whose changes it holds; with ``caches: temporary`` a group's caches are gone
once its runs are scored, its ZSL once every seed's are). The rule ``disk_estimate`` runs it on a
config's own model and data, before any extraction.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from icl_gd.common.specs import is_base_setting
from icl_gd.planning import plan

# The schema (with the run's identity in its metadata, ~3 KB: template, demonstration ids, prompt
# rules, the provenance record) written twice, in the header and the footer, and the buffers'
# alignment: 7.1-8.4 KB a cache of the end-to-end test's run, 7.4-9.3 KB of the default run's
# before the separator's and the content-free queries' rules joined the prompt rules (~0.5 KB, twice),
# and the development set's rule and the record of which examples were the queries (~0.3 KB, twice:
# 593 bytes a cache more, measured on the end-to-end test's 28), and 561 bytes a cache more again
# (the end-to-end test's 32, with icl_novel: 17,952 bytes over the estimate, 2.5%, in every setting
# alike) (tests/workflow/test_workflow.py checks the total within 2%).
FILE_OVERHEAD = 9 * 1024 + 1150
# A ZSL or ICL cache's content-free queries' label log-probabilities (metadata content_free, JSON,
# twice): a number ~24 characters, the texts and keys ~100.
CONTENT_FREE_BYTES_PER_LABEL, CONTENT_FREE_BYTES = 2 * 3 * 24, 2 * 100


@dataclass(frozen=True)
class Shape:
    """What a cache's size depends on of the model."""

    n_layers: int
    d_model: int
    n_heads: int


def _value_bytes(layout: str, reference: bool) -> int:
    return 4 if layout == "float32" or (layout == "compact" and reference) else 2


def cache_bytes(
    layout: str,
    shape: Shape,
    *,
    reference: bool,
    n_examples: int,
    query_keys: int,
    n_context: int,
    n_labels: int,
    content_free: bool = False,
) -> int:
    """Bytes of one cache: ``query_keys`` is the sum of the examples' query lengths, ``n_context``
    the context's length (1 but for ICL), ``reference`` whether it is a ZSL cache (the compact
    layout's float32 reference; every other setting stores float16 changes), ``content_free``
    whether it records the content-free queries (ZSL and ICL settings)."""
    layers = shape.n_layers
    per_example = 8 + 2 + 2 + 4 + 4 * n_labels + 8  # id, gold, pred, query_len, log-probs, row offset
    values = _value_bytes(layout, reference)
    total = n_examples * (per_example + values * layers * shape.d_model) + values * layers * shape.n_heads * query_keys
    if layout == "compact":
        total += n_examples * layers * (2 * n_context + 4)  # float16 context rows and their scales
        if not reference:
            total += n_examples * layers * 2 * 4  # the output and score rows' scales
    else:
        total += n_examples * layers * n_context * values
    if content_free:
        total += CONTENT_FREE_BYTES + CONTENT_FREE_BYTES_PER_LABEL * n_labels
    return int(total + 8 + FILE_OVERHEAD)


@dataclass(frozen=True)
class Sequences:
    """What a cache's size depends on of a run: its examples, their query keys, its context."""

    n_examples: int
    query_keys: int
    n_context: int
    n_labels: int


def estimate(config: dict, shapes: dict[str, Shape], sequences) -> pd.DataFrame:
    """Every cache the config plans, with its bytes: one row per (model, variant, task, seed,
    setting). ``sequences(model, spec)`` gives a run's :class:`Sequences` (from the model's
    tokenizer and the data: ``extract.sequences_of``)."""
    rows = []
    for e in plan.extractions(config):
        spec = plan.run_spec(config, e["task"], e["setting"], e["seed"], model=e["model"])
        seq = sequences(e["model"], spec)
        size = cache_bytes(
            config["cache_dtype"],
            shapes[e["model"]],
            reference=e["setting"] == "zsl",
            n_examples=seq.n_examples,
            query_keys=seq.query_keys,
            n_context=seq.n_context,
            n_labels=seq.n_labels,
            content_free=is_base_setting(e["setting"]),
        )
        rows.append({**e, "bytes": size})
    return pd.DataFrame(rows, columns=["model", "variant", "task", "seed", "setting", "bytes"])


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def describe(caches: pd.DataFrame, layout: str, mode: str) -> str:
    """The estimate in words: the grid's total (what `caches: keep` leaves on disk), and what
    `caches: temporary` needs: the caches of the run groups in flight."""
    groups = caches.groupby(["model", "variant", "task"])["bytes"].sum()
    lines = [
        f"{len(caches)} activation caches ({layout} layout), {len(groups)} run group{'s' * (len(groups) != 1)} "
        f"(model, variant, task: a ZSL cache and every seed's caches beside it)."
    ]
    total = int(caches["bytes"].sum())
    lines.append(f"caches: keep       {_size(total):>9}  every cache, kept for reruns of the metrics ({total:,} bytes)")
    lines.append(
        f"caches: temporary  {_size(groups.max()):>9}  per run group in flight (largest; median "
        f"{_size(groups.median())}): a group's caches are deleted once its runs are scored, so the "
        "peak is about this times the groups in flight at once"
    )
    largest = caches.loc[caches["bytes"].idxmax()]
    lines.append(
        f"largest cache: {_size(largest['bytes'])} ({largest['model']}/{largest['variant']}/{largest['task']}/"
        f"seed{largest['seed']}/{largest['setting']})"
    )
    for model, sizes in caches.groupby("model")["bytes"]:
        lines.append(f"  {model}: {_size(sizes.sum())} in {len(sizes)} caches")
    lines.append(f"this config: caches: {mode}")
    return "\n".join(lines)


def estimate_from_files(
    config: dict, model_dirs: dict[str, str], task_files: dict[str, dict[str, str]]
) -> pd.DataFrame:
    """``estimate`` from each model's folder (its config and tokenizer; no weights are read) and
    each task's prepared splits, counting every run's sequences as its extraction will."""
    from types import SimpleNamespace

    from transformers import AutoConfig

    from icl_gd.activations import extract
    from icl_gd.common.specs import is_icl_setting
    from icl_gd.models import loading

    shapes, tokenizers, context = {}, {}, {}
    for model, folder in model_dirs.items():
        model_config = AutoConfig.from_pretrained(folder)
        shapes[model] = Shape(
            model_config.num_hidden_layers, model_config.hidden_size, model_config.num_attention_heads
        )
        tokenizers[model] = loading.load_tokenizer(folder)
        context[model] = loading.context_length(SimpleNamespace(config=model_config))
    seen = {}

    def sequences(model: str, spec: dict) -> Sequences:
        # what decides a run's sequences: its demonstrations, and whether they form its context (ICL)
        key = (
            model,
            spec["task"],
            spec["seed"],
            spec["setting"]
            if spec["setting"] == "zsl"
            else (spec["k"], spec["demo_labels"], is_icl_setting(spec["setting"])),
        )
        if key not in seen:
            files = task_files[spec["task"]]
            run = extract.sequences_of(spec, tokenizers[model], context[model], files["train"], files["eval"])
            seen[key] = Sequences(
                n_examples=len(run.queries),
                query_keys=sum(q.record_offset + 1 for q in run.queries),
                n_context=len(run.context),
                n_labels=len(run.label_ids),
            )
        return seen[key]

    return estimate(config, shapes, sequences)
