"""The data table's numbers (paper 001 Table 3, with real token counts): per task, its split sizes
and the mean prompt lengths in the model's own tokenizer, from its normalised splits and its ZSL
and ICL caches. An edit here reruns the task statistics alone, no run's scores.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from icl_gd.activations.cache import read_cache


def data_statistics(tasks: dict[str, dict[str, str]]) -> pd.DataFrame:
    """Per task, from its normalised splits and its ZSL and ICL caches (one seed):
    ``{task: {"train": path, "eval": path, "zsl": cache, "icl": cache}}``.

    ``prompt_tokens`` is the mean number of query tokens of the ZSL prompt in the model's own
    tokenizer (the recorded query keys, less the label word where ``record_position`` is
    ``label_word``); ``icl_tokens`` the mean length of the whole ICL prompt (context + query);
    ``demo_separator`` what ended each demonstration (``data.prompts.line_end_ids``)."""
    rows = []
    for task, paths in tasks.items():
        zsl, icl = read_cache(paths["zsl"]), read_cache(paths["icl"])  # memory-mapped: reads what it uses
        zsl_meta, icl_meta = zsl.meta, icl.meta
        label_word = 1 if zsl_meta.get("record_position") == "label_word" else 0
        query_len = zsl.query_len.astype(np.float64)
        icl_query = icl.query_len.astype(np.float64)
        icl_len = icl_query - label_word + icl_meta["n_context"]
        rows.append(
            {
                "task": task,
                "n_train": pq.read_metadata(paths["train"]).num_rows,
                "n_eval": pq.read_metadata(paths["eval"]).num_rows,
                "n_evaluated": zsl_meta["n_examples"],
                "prompt_tokens": float(np.mean(query_len - label_word)),
                "icl_tokens": float(np.mean(icl_len)),
                "true_k": icl_meta.get("true_k"),
                "k": icl_meta.get("k"),
                # caches from before the key were made with the reference's separator
                "demo_separator": icl_meta.get("demo_separator", "eos"),
                "seed": zsl_meta["seed"],
                "model": zsl_meta["model"],
            }
        )
    return pd.DataFrame(rows)
