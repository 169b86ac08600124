"""Shipped weights of a built-in model: a recipe's trained model kept in the repository (config key
``weights``), so that a run need not spend the recipe's pretraining on it, used only while it is
still that recipe's and still the file that recipe was shipped with.

A recipe is what decides the weights: the model's keys (all but ``weights``), the twins' train rows
it trains on, and the code that trains (:data:`RECIPE_MODULES`, by their syntax trees: a comment,
a docstring or a reformatting changes nothing). Its checksum is written beside every built model
(``recipe.json``), with the sha256 of the weights file; the build job copies the shipped folder only
where the checksum there is the recipe's, and otherwise trains, saying why; where the weights file
is not the one recipe.json vouches for (damaged, cut short, a git LFS pointer), it stops. Ship a
model the workflow built with

    python -m icl_gd.models.shipped resources/models/<name>/trained <folder>
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd

from icl_gd.common import checksums, code_versions
from icl_gd.config import resolve as cfg

RECIPE_FILE = "recipe.json"
# the file recipe.json vouches for by its sha256: the weights, which load when damaged and answer
# wrongly without a sign. The tokenizer's and config's files are not checked (damaged, they mostly
# fail to parse)
WEIGHTS_FILE = "model.safetensors"
# the package modules whose code decides a built-in model's weights: its tokenizer, architecture and
# initialisation (builtin), pretraining episodes and loop, the held-out rows (curve), the prompts
# and the tasks' templates and label words
RECIPE_MODULES = (
    "models/builtin",
    "models/episodes",
    "models/pretraining",
    "models/curve",
    "data/label_pools",
    "data/prompts",
    "data/presets",
)
# model keys that say where the weights are kept, or how prompts are written, not how the weights are made
NOT_RECIPE = ("weights", *cfg.PROMPT_MODEL_KEYS)
# how a git LFS pointer file begins: what a clone without git-lfs holds in place of the weights
LFS_POINTER = b"version https://git-lfs.github.com/spec/"


class DamagedWeightsError(RuntimeError):
    """A shipped weights file that is not the one its recipe.json vouches for."""


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


def _write(folder: Path, recipe: dict) -> None:
    Path(folder, RECIPE_FILE).write_text(json.dumps(recipe, indent=2, sort_keys=True))


def write_recipe(folder: str | Path, spec: dict, checksum: str) -> None:
    """recipe.json of a model just built in ``folder``: the recipe's checksum and keys, and the
    sha256 of its weights file."""
    keys = {key: value for key, value in spec.items() if key not in NOT_RECIPE}
    recipe = {"checksum": checksum, "spec": keys}
    if Path(folder, WEIGHTS_FILE).exists():
        recipe["sha256"] = {WEIGHTS_FILE: checksums.sha256_of(Path(folder, WEIGHTS_FILE))}
    _write(Path(folder), recipe)


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


def _starts_with(path: Path, prefix: bytes) -> bool:
    with open(path, "rb") as f:
        return f.read(len(prefix)) == prefix


def check_weights(folder: str | Path, out_dir: str | Path) -> None:
    """Stop where the shipped weights file is not the one recipe.json vouches for: copied, it would
    hand every later job a damaged model; trained anew instead, it would cost the recipe's pretraining
    without a word. The message names the file, both checksums and the commands that restore it or
    rebuild and re-ship it (``out_dir``: the build job's folder)."""
    folder = Path(folder)
    path = folder / WEIGHTS_FILE
    recorded = ((read_recipe(folder) or {}).get("sha256") or {}).get(WEIGHTS_FILE)
    actual = checksums.sha256_of(path) if path.exists() else None
    if recorded is not None and actual == recorded:
        return
    if actual is None:
        what = "it is missing"
    elif _starts_with(path, LFS_POINTER):
        what = "it is a git LFS pointer, not the weights (`git lfs pull` fetches them)"
    elif recorded is None:
        what = f"{RECIPE_FILE} records no sha256 of it (shipped before the weights were checked)"
    else:
        what = "it is damaged or cut short"
    raise DamagedWeightsError(
        f"{path} is not the weights file its {RECIPE_FILE} vouches for: {what}; its sha256 is {actual}, "
        f"{RECIPE_FILE} records {recorded}. Copied, it would give every later job a damaged model, so "
        f"nothing is copied or trained. Restore it (`git checkout -- {folder}`), or rebuild and re-ship it "
        f"(the recipe's pretraining, minutes to hours): `mv {folder} {folder}.damaged && snakemake --cores all "
        f"{out_dir} && python -m icl_gd.models.shipped {out_dir} {folder}`"
    )


def use_shipped(folder: str | Path, checksum: str, out_dir: str | Path) -> tuple[bool, str]:
    """Copy a shipped folder to ``out_dir`` if it was made for this recipe: (copied, why not); raise
    :class:`DamagedWeightsError` where it was, but its weights file is not the one it vouches for."""
    folder = Path(folder)
    have = shipped_checksum(folder)
    if have is None:
        return False, f"{folder} holds no shipped model ({RECIPE_FILE} missing)"
    if have != checksum:
        return False, (
            f"the weights in {folder} were made for another recipe (checksum {have[:12]}, this recipe's "
            f"{checksum[:12]}: a model key, the twins or the training code changed)"
        )
    check_weights(folder, out_dir)
    shutil.copytree(folder, out_dir, dirs_exist_ok=True)
    return True, ""


def ship(built: str | Path, folder: str | Path) -> None:
    """Replace the shipped folder with a model the workflow built: its files, and its recipe.json
    with the sha256 of the weights file as shipped."""
    built, folder = Path(built), Path(folder)
    recipe = read_recipe(built)
    if recipe is None:
        raise SystemExit(f"{built} holds no {RECIPE_FILE}: build it with the workflow first (rule build_builtin_model)")
    if not (built / WEIGHTS_FILE).exists():
        raise SystemExit(
            f"{built} holds no {WEIGHTS_FILE}: build it with the workflow first (rule build_builtin_model)"
        )
    if folder.exists() and folder.resolve() == built.resolve():
        raise SystemExit(f"{built} is the shipped folder itself: ship from the folder the workflow built")
    sha256 = checksums.sha256_of(built / WEIGHTS_FILE)
    recorded = (recipe.get("sha256") or {}).get(WEIGHTS_FILE)
    if recorded is not None and recorded != sha256:
        raise SystemExit(
            f"{built / WEIGHTS_FILE}: sha256 {sha256}, but its {RECIPE_FILE} records {recorded}: the built "
            f"model is damaged; delete {built} and build it again"
        )
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(built, folder, ignore=shutil.ignore_patterns(".snakemake*"))
    _write(folder, {**recipe, "sha256": {WEIGHTS_FILE: sha256}})


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Ship a built-in model's weights: copy the built folder into the repository."
    )
    parser.add_argument("built", help="the model's folder the workflow built, e.g. resources/models/tiny/trained")
    parser.add_argument("folder", help="the config's weights folder, e.g. models/tiny")
    args = parser.parse_args()
    ship(args.built, args.folder)
    recipe = read_recipe(args.folder)
    print(
        f"shipped {args.built} as {args.folder} (recipe {recipe['checksum'][:12]}, "
        f"{WEIGHTS_FILE} sha256 {recipe['sha256'][WEIGHTS_FILE][:12]})"
    )


if __name__ == "__main__":
    main()
