"""The shipped weights' own check: recipe.json vouches for its weights file by sha256, and the build
stops on a file that is not that one (damaged, cut short, a git LFS pointer) rather than copying it
or training anew. On copies of the repository's models/tiny: no training, under a second each."""

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from icl_gd.common import checksums
from icl_gd.models import shipped

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "models/tiny"
OUT = "resources/models/tiny/trained"


def recorded(folder: Path) -> str:
    return shipped.read_recipe(folder)["sha256"][shipped.WEIGHTS_FILE]


SHIPPED = sorted(path.parent for path in (REPO / "models").glob(f"*/{shipped.RECIPE_FILE}"))


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_the_committed_weights_are_the_file_their_recipe_vouches_for(folder):
    """Fails where a shipped model.safetensors was damaged, or shipped without re-shipping its
    recipe.json (python -m icl_gd.models.shipped writes both)."""
    assert checksums.sha256_of(folder / shipped.WEIGHTS_FILE) == recorded(folder)


def sign_flipped(path: Path, n: int = 2000) -> None:
    """The issue's damage: the first ``n`` floats of the largest tensor with their signs flipped."""
    tensors = load_file(path)
    name = max(tensors, key=lambda k: tensors[k].numel())
    flat = tensors[name].flatten().clone()
    flat[:n] = -flat[:n]
    tensors[name] = flat.reshape(tensors[name].shape)
    save_file(tensors, path, metadata={"format": "pt"})


def truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def lfs_pointer(path: Path) -> None:
    path.write_text(
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:ddab8b721a66238a4b01b1092a29469d8e1267a817d0b047e5090bfe779f3017\nsize 589160\n"
    )


def unvouched(path: Path) -> None:
    """A folder shipped before the weights were checked: its recipe.json records no sha256."""
    recipe = shipped.read_recipe(path.parent)
    del recipe["sha256"]
    (path.parent / shipped.RECIPE_FILE).write_text(json.dumps(recipe))


@pytest.mark.parametrize(
    "damage, says",
    [
        (sign_flipped, "it is damaged or cut short"),
        (truncated, "it is damaged or cut short"),
        (lfs_pointer, "it is a git LFS pointer, not the weights (`git lfs pull`"),
        (unvouched, "recipe.json records no sha256 of it"),
    ],
)
def test_a_shipped_weights_file_that_is_not_the_vouched_one_stops_the_build(damage, says, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the paths in the message as a run in its clone shows them
    shutil.copytree(TINY, "models/tiny")
    folder, weights = Path("models/tiny"), Path("models/tiny/model.safetensors")
    want = recorded(TINY)
    damage(weights)
    have = checksums.sha256_of(weights)
    assert have != want or damage is unvouched
    checksum = shipped.shipped_checksum(folder)  # the recipe is this one's: only the file is wrong
    with pytest.raises(shipped.DamagedWeightsError) as error:
        shipped.use_shipped(folder, checksum, OUT)
    message = str(error.value)
    assert message.startswith(f"{weights} is not the weights file its recipe.json vouches for: {says}")
    assert f"its sha256 is {have}, recipe.json records {want if damage is not unvouched else None}" in message
    assert "git checkout -- models/tiny" in message
    assert (
        f"`mv models/tiny models/tiny.damaged && snakemake --cores all {OUT} && "
        f"python -m icl_gd.models.shipped {OUT} models/tiny`"
    ) in message
    assert not Path(OUT).exists()  # nothing copied


def test_a_weights_file_that_is_the_vouched_one_is_copied(tmp_path):
    copied, why = shipped.use_shipped(TINY, shipped.shipped_checksum(TINY), tmp_path / "trained")
    assert copied and why == ""
    assert checksums.sha256_of(tmp_path / "trained" / shipped.WEIGHTS_FILE) == recorded(TINY)


def test_another_recipes_weights_are_not_checked_but_trained_anew(tmp_path):
    """Another recipe's weights are never copied, so a damaged file there stops nothing: the job trains."""
    folder = shutil.copytree(TINY, tmp_path / "tiny")
    truncated(folder / shipped.WEIGHTS_FILE)
    copied, why = shipped.use_shipped(folder, "0" * 64, tmp_path / "trained")
    assert not copied and "made for another recipe" in why


def test_shipping_records_the_weights_sha256_and_refuses_a_damaged_build(tmp_path):
    built = shutil.copytree(TINY, tmp_path / "resources/models/tiny/trained")
    recipe = shipped.read_recipe(built)
    del recipe["sha256"]  # as a build before the weights were checked wrote it
    (built / shipped.RECIPE_FILE).write_text(json.dumps(recipe))
    weights = load_file(built / shipped.WEIGHTS_FILE)
    save_file({k: v + 1 for k, v in weights.items()}, built / shipped.WEIGHTS_FILE, metadata={"format": "pt"})
    shipped.ship(built, tmp_path / "models/tiny")
    shipped_recipe = shipped.read_recipe(tmp_path / "models/tiny")
    assert shipped_recipe["sha256"] == {"model.safetensors": checksums.sha256_of(built / shipped.WEIGHTS_FILE)}
    assert shipped_recipe["checksum"] == recipe["checksum"] and shipped_recipe["spec"] == recipe["spec"]
    assert shipped_recipe["sha256"]["model.safetensors"] != recorded(TINY)
    # the shipped folder copies as it is
    assert shipped.use_shipped(tmp_path / "models/tiny", recipe["checksum"], tmp_path / "copy")[0]
    with pytest.raises(SystemExit, match="is the shipped folder itself"):
        shipped.ship(tmp_path / "models/tiny", tmp_path / "models/tiny")
    # a built folder whose own recipe.json disowns its weights is not shipped
    truncated(tmp_path / "models/tiny" / shipped.WEIGHTS_FILE)
    with pytest.raises(SystemExit, match="the built model is damaged"):
        shipped.ship(tmp_path / "models/tiny", tmp_path / "elsewhere")


def test_the_shipped_folder_is_found_in_the_working_directory_else_the_workflows(tmp_path, monkeypatch):
    """What the build's parameter names is the folder's content, found the same way the job finds
    it: relative, where the working directory holds it; else in the workflow's folder."""
    workflow_dir, run = tmp_path / "clone", tmp_path / "run"
    shutil.copytree(TINY, workflow_dir / "models/tiny")
    run.mkdir()
    monkeypatch.chdir(run)
    assert shipped.locate("models/tiny", workflow_dir) == workflow_dir / "models/tiny"
    assert shipped.locate("models/absent", workflow_dir) is None
    shutil.copytree(TINY, run / "models/tiny")
    assert shipped.locate("models/tiny", workflow_dir) == Path("models/tiny")
    assert shipped.vouched("models/tiny") == {
        "checksum": shipped.shipped_checksum(TINY),
        "sha256": {"model.safetensors": recorded(TINY)},
    }
