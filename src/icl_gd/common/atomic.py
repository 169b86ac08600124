"""Atomic file writes: every file the workflow writes appears whole or not at all.

A job killed while writing (out of time, out of memory, Ctrl-C) must not leave a truncated cache,
table or figure that a later job, or a reader, takes for a finished one. :func:`atomic_path` hands
the writer a temporary file in the destination folder and renames it over the target only once the
writer has returned; ``os.replace`` within one folder is atomic on POSIX file systems. On an error
the temporary file is removed and an earlier target is left as it was. A job killed outright
(SIGKILL: no ``finally`` runs) leaves its temporary file behind; the next write of the same target,
and the start of a job that writes it (:func:`remove_stale`, from ``runtime.log_to``), removes it:
Snakemake lets one job at a time write an output, so a temporary of it found then is a dead one's.

The temporary file is created with the permissions a plain ``open()`` gives a new file
(0o666 less the umask), not the owner-only 0o600 of ``tempfile.mkstemp``: the outputs are read by
other users of a shared project folder.

This module imports nothing else of the package.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _temporary_name(name: str, token: str) -> str:
    return f".{name}.{token}.tmp"


def remove_stale(*paths: str | os.PathLike) -> list[Path]:
    """Remove the temporary files that killed writers of ``paths`` left beside them; returns them."""
    removed = []
    for path in map(Path, paths):
        pattern = re.compile(re.escape(_temporary_name(path.name, "TOKEN")).replace("TOKEN", "[0-9a-f]{8}"))
        try:
            candidates = list(path.parent.iterdir())
        except OSError:  # no folder yet: nothing left behind
            continue
        for candidate in candidates:
            if pattern.fullmatch(candidate.name):
                candidate.unlink(missing_ok=True)
                removed.append(candidate)
    return removed


def _create_temporary(path: Path) -> Path:
    """A new, empty file beside ``path``, hidden and named after it, that no other writer holds."""
    for _ in range(100):
        tmp = path.with_name(_temporary_name(path.name, secrets.token_hex(4)))
        try:
            # 0o666 through os.open: the kernel applies the umask, as it does for open()
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"could not create a temporary file beside {path}")


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Write to the yielded temporary path; on leaving the block it becomes ``path``.

    The destination folder is created if needed. The writer may open the temporary path itself
    (pyarrow, matplotlib and pandas do) or write to it by name::

        with atomic_path("reports/figures/alpha.png") as tmp:
            fig.savefig(tmp, format="png")

    An exception inside the block removes the temporary file and propagates; ``path`` keeps what
    it held before (or stays absent).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(path)
    tmp = _create_temporary(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # after a replace there is nothing left to remove


def write_text(path: str | os.PathLike, text: str) -> None:
    """``text`` as UTF-8 to ``path``, atomically, with the line endings it holds (no translation)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
