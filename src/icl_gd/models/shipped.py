"""Shipped weights of a built-in model: a recipe's trained model kept in the repository (config key
``weights``), so that a run need not spend the recipe's pretraining on it, used only while it is
still that recipe's.

A recipe is what decides the weights: the model's keys (all but ``weights``), the twins' train rows
it trains on, and the code that trains (:data:`RECIPE_MODULES`, by their syntax trees: a comment,
a docstring or a reformatting changes nothing). Its checksum is written beside every built model
(``recipe.json``); the build job copies the shipped folder only where the checksum there is the
recipe's, and otherwise trains, saying why. Ship a model the workflow built with

    python -m icl_gd.models.shipped resources/models/<name>/trained <folder>
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd

from icl_gd.common import code_versions
from icl_gd.config import resolve as cfg

RECIPE_FILE = "recipe.json"
# the package modules whose code decides a built-in model's weights: its tokenizer, architecture and
# initialisation (builtin), pretraining episodes and loop, the held-out rows (curve), the prompts
# and the tasks' templates and label words
RECIPE_MODULES = (
    "models/builtin",
    "models/episodes",
    "models/pretraining",
    "models/curve",
    "data/prompts",
    "data/presets",
)
# model keys that say where the weights are kept, or how prompts are written, not how the weights are made
NOT_RECIPE = ("weights", *cfg.PROMPT_MODEL_KEYS)


def recipe_checksum(spec: dict, frames: dict[str, pd.DataFrame]) -> str:
    """sha256 of the recipe: the model's keys but ``weights``, each twin's train rows (as CSV), and
    the syntax trees of :data:`RECIPE_MODULES`."""
    digest = hashlib.sha256()
    keys = {key: value for key, value in spec.items() if key not in NOT_RECIPE}
    digest.update(json.dumps(keys, sort_keys=True, default=str).encode())
    for task in sorted(frames):
        digest.update(task.encode())
        digest.update(frames[task].to_csv(index=False).encode())
    for module, checksum in code_versions.code_version(RECIPE_MODULES).items():
        digest.update(f"{module}={checksum}".encode())
    return digest.hexdigest()


def write_recipe(folder: str | Path, spec: dict, checksum: str) -> None:
    keys = {key: value for key, value in spec.items() if key not in NOT_RECIPE}
    Path(folder, RECIPE_FILE).write_text(json.dumps({"checksum": checksum, "spec": keys}, indent=2, sort_keys=True))


def read_recipe(folder: str | Path) -> dict | None:
    """A folder's recipe.json; None where it has none."""
    path = Path(folder, RECIPE_FILE)
    return json.loads(path.read_text()) if path.exists() else None


def shipped_checksum(folder: str | Path) -> str | None:
    """The recipe checksum a shipped folder was made for; None where it holds no recipe."""
    return (read_recipe(folder) or {}).get("checksum")


def locate(folder: str | Path, workflow_dir: str | Path) -> Path | None:
    """The shipped folder ``folder`` (config key ``weights``) as a job finds it: in the working
    directory (a relative path, as configured), else in the workflow's folder (a run with
    --directory elsewhere); None where neither holds its recipe.json."""
    for root in (Path(), Path(workflow_dir)):
        path = root / folder
        if (path / RECIPE_FILE).exists():
            return path
    return None


def vouched(folder: str | Path) -> dict:
    """What a shipped folder's recipe.json vouches for: the recipe's checksum and the weights'
    sha256. The build job's parameter: shipping other weights reruns it, and, being the files'
    contents rather than their paths, moving the run or the clone reruns nothing."""
    recipe = read_recipe(folder) or {}
    return {"checksum": recipe.get("checksum"), "sha256": recipe.get("sha256")}


def use_shipped(folder: str | Path, checksum: str, out_dir: str | Path) -> tuple[bool, str]:
    """Copy a shipped folder to ``out_dir`` if it was made for this recipe: (copied, why not)."""
    folder = Path(folder)
    have = shipped_checksum(folder)
    if have is None:
        return False, f"{folder} holds no shipped model ({RECIPE_FILE} missing)"
    if have != checksum:
        return False, (
            f"the weights in {folder} were made for another recipe (checksum {have[:12]}, this recipe's "
            f"{checksum[:12]}: a model key, the twins or the training code changed)"
        )
    shutil.copytree(folder, out_dir, dirs_exist_ok=True)
    return True, ""


def ship(built: str | Path, folder: str | Path) -> None:
    """Replace the shipped folder with a model the workflow built (its recipe.json included)."""
    built, folder = Path(built), Path(folder)
    if shipped_checksum(built) is None:
        raise SystemExit(f"{built} holds no {RECIPE_FILE}: build it with the workflow first (rule build_builtin_model)")
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(built, folder, ignore=shutil.ignore_patterns(".snakemake*"))


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Ship a built-in model's weights: copy the built folder into the repository."
    )
    parser.add_argument("built", help="the model's folder the workflow built, e.g. resources/models/tiny/trained")
    parser.add_argument("folder", help="the config's weights folder, e.g. models/tiny")
    args = parser.parse_args()
    ship(args.built, args.folder)
    print(f"shipped {args.built} as {args.folder} (recipe {shipped_checksum(args.folder)[:12]})")


if __name__ == "__main__":
    main()
