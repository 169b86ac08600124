"""Parquet tables the workflow writes (training logs, metric tables, data splits): written
atomically, with the software that made them in their schema metadata, and read back with a
damaged file named. The activation cache's own Arrow format is ``activations.cache``.
"""

from __future__ import annotations

import json
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from icl_gd.common.atomic import atomic_path


class CacheError(ValueError):
    """A file that cannot serve as a cache: damaged, of another version, or missing its reference.
    The message names the file and what to do."""


def rerun_hint(path) -> str:
    return f"delete {path} and rerun: Snakemake redoes the job that writes it"


def atomic_write_table(table: pa.Table, path: str | os.PathLike) -> None:
    """A table to parquet, atomically (``atomic.atomic_path``): a killed job never leaves a
    partial file. For the small tables (training logs, metrics)."""
    # Dictionary-encoding numbers is futile and slow: keep it for text columns only
    text = [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", use_dictionary=text)


def read_table(path: str | os.PathLike, **kwargs) -> pa.Table:
    """A parquet file the workflow wrote (a training log, a metrics table), or a CacheError that
    names it where it cannot be read."""
    try:
        return pq.read_table(path, **kwargs)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as err:
        raise CacheError(
            f"{path} cannot be read ({err}): the file is damaged, e.g. cut short by an interrupted copy or a "
            f"full disk; {rerun_hint(path)}"
        ) from None


def read_frame(path: str | os.PathLike):
    """A parquet table the workflow wrote, as a pandas DataFrame (damage named: ``read_table``)."""
    return read_table(path).to_pandas()


PROVENANCE_KEY = b"icl_gd_provenance"


def atomic_write_frame(frame, path: str | os.PathLike, provenance: dict | None = None) -> None:
    """A pandas DataFrame to parquet, atomically (see ``atomic_write_table``); ``provenance``
    (``icl_gd.common.provenance``: what software made it, from which caches) in its schema metadata."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if provenance is not None:
        table = table.replace_schema_metadata(
            {**(table.schema.metadata or {}), PROVENANCE_KEY: json.dumps(provenance).encode()}
        )
    atomic_write_table(table, path)


def read_provenance(path: str | os.PathLike) -> dict | None:
    """The provenance a metrics table records (:func:`atomic_write_frame`), or None."""
    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata[PROVENANCE_KEY]) if PROVENANCE_KEY in metadata else None


def write_csv(frame: pd.DataFrame, path) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def write_tsv(frame: pd.DataFrame, path) -> None:
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, sep="\t")
