"""Process set-up shared by the workflow's entry points: logging into the rule's log file.

Imports nothing else of the package.
"""

from __future__ import annotations

import logging
import os
import sys


def log_to(path: str, threads: int | None = None) -> None:
    """Send stdout, stderr (tqdm, warnings, library messages) and logging to ``path``.

    The file descriptors themselves are redirected, so output from C extensions lands there too.
    ``threads`` caps the BLAS/OpenMP threads of this process before torch is imported.
    """
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr, force=True
    )
    logging.captureWarnings(True)
    if threads:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)
