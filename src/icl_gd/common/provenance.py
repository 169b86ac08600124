"""Which software, code and device made a number: recorded in every cache, training log and
metrics table, and shown on the report's first page.

Attention kernels and numerics change between releases of torch and transformers; with the
versions beside each number, a researcher comparing two runs can tell a code change from a
library change.
"""

from __future__ import annotations

import functools
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

# The libraries whose releases can change a number, in the order the report lists them.
PACKAGES = ("torch", "transformers", "tokenizers", "datasets", "numpy", "pyarrow")
SOFTWARE = ("python", *PACKAGES, "commit", "clean")  # what two runs must share to count as the same software
KEY = "provenance"  # the key under a cache's or a table's metadata
REPO = Path(__file__).resolve().parents[3]


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def _commit() -> tuple[str | None, bool | None]:
    """The checkout's commit and whether its tree was clean (no tracked file modified but the
    shipped reports, which are outputs), or (None, None) outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)reports"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return head or None, status.strip() == ""


def software() -> dict:
    """Python and the libraries' versions, the workflow's commit and whether its tree was clean."""
    commit, clean = _commit()
    return {"python": platform.python_version(), **{p: _version(p) for p in PACKAGES}, "commit": commit, "clean": clean}


def device_name(device) -> str:
    """A device in words: the GPU's name, or "cpu"."""
    device = str(device)
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(torch.device(device))
    return device


def collect(device=None, dtype: str | None = None) -> dict:
    """Everything :func:`software` records, and where a job ran a model, its device and dtype."""
    record = software()
    if device is not None:
        record["device"] = device_name(device)
    if dtype is not None:
        record["dtype"] = str(dtype).removeprefix("torch.")
    return record


def software_key(record: dict) -> str:
    """The part of a record that two runs must share to count as the same software."""
    return json.dumps({k: record.get(k) for k in SOFTWARE}, sort_keys=True)


def distinct(records) -> list[dict]:
    """The different software among ``records`` (:func:`collect`'s, or this function's own, so
    that it can merge its results), in first-seen order, each with the devices and dtypes that ran
    under it."""
    seen: dict[str, dict] = {}
    for record in records:
        if not record:
            continue
        entry = seen.setdefault(
            software_key(record), {**{k: record.get(k) for k in SOFTWARE}, "devices": [], "dtypes": []}
        )
        for field, key in (("devices", "device"), ("dtypes", "dtype")):
            for value in [*record.get(field, []), *([record[key]] if record.get(key) is not None else [])]:
                if value not in entry[field]:
                    entry[field].append(value)
    return list(seen.values())


def describe(record: dict) -> str:
    """One line: "Python 3.11.2, torch 2.13.0, ...; commit abc1234 (clean); cpu, float32"."""
    libraries = ", ".join(f"{p} {record.get(p) or 'absent'}" for p in PACKAGES)
    commit = record.get("commit")
    where = (
        "no git checkout"
        if commit is None
        else f"commit {commit[:10]} ({'clean' if record.get('clean') else 'uncommitted changes'})"
    )
    text = f"Python {record.get('python')}, {libraries}; {where}"
    devices = record.get("devices") or ([record["device"]] if record.get("device") else [])
    dtypes = record.get("dtypes") or ([record["dtype"]] if record.get("dtype") else [])
    if devices or dtypes:
        text += "; " + ", ".join([*devices, *dtypes])
    return text


def merged(*tables: dict | None) -> dict:
    """One provenance over several tables' (``runs_provenance``'s: the software that made their
    caches, ``caches``, and their own, ``computed``): every cache record of any of them, merged as
    :func:`distinct` merges, and the first table's ``computed``. What a page made from several
    tables (the run's scores and its further orders') says made it."""
    found = [t for t in tables if t]
    return {
        "caches": distinct(r for t in found for r in t.get("caches") or []),
        "computed": next((t["computed"] for t in found if t.get("computed")), None),
    }


def uncommitted(records) -> list[dict]:
    """The records of software run from a working tree with uncommitted changes: no commit holds
    the code that made them."""
    return [r for r in records if r and r.get("commit") is not None and not r.get("clean")]
