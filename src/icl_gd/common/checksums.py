"""A file's sha256, read in blocks: the corpora's archives are checked against it, and an
activation cache records its data files' by it. Imports nothing else of the package."""

from __future__ import annotations

import hashlib
import os


def sha256_of(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
