"""The built-in model's pretraining recipes: what each costs and what the model then knows.

    snakemake --cores all                       # once: the default run writes the twins
    python benchmarks/pretraining.py '{}' '{"pretrain_len": 192}' '{"pretrain_steps": 150, "pretrain_lr": 0.02}'

Each argument is a recipe: keys of the default config's built-in model (config.yaml, models.tiny)
that it changes. For each, the model is built as the rule build_builtin_model builds it (tokenizer,
episodes, pretraining; ``builtin.build``) on the twins' train splits under ``--twins``, into a
temporary folder, and the script prints the build's wall time and the model's zero-shot accuracy
on each twin's evaluation set as the run selects it (``max_eval`` examples, ``splits.select_eval``):
the label word with the largest logit after ``<s>`` and the query. This is the ZSL accuracy of the
report's accuracy table, without the extraction around it. The pretraining is most of the default
run's time (docs/performance.md, "Start-up"): a cheaper recipe is one that keeps these accuracies.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd
import torch
import yaml

from icl_gd.config import resolve as cfg
from icl_gd.data import prompts, splits
from icl_gd.models import builtin, loading

REPO = Path(__file__).resolve().parents[1]


def zero_shot_accuracy(folder: Path, twins: Path, tasks: list[str], max_eval: int) -> dict[str, float]:
    """Percent of each task's evaluation examples whose largest label-word logit is its label."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = loading.load_model(str(folder), device="cpu")
    accuracy = {}
    for task in tasks:
        spec = cfg.task_spec({"tasks": {task: {}}}, task)  # the built-in task as the protocol defines it
        label_ids = prompts.label_token_ids(tokenizer, spec)
        rows = splits.select_eval(pd.read_parquet(twins / task / "eval.parquet"), max_eval)
        right = 0
        with torch.no_grad():
            for _, row in rows.iterrows():
                ids = [tokenizer.bos_token_id] + prompts.prompt_ids(tokenizer, spec, row)
                logits = model(torch.tensor([ids])).logits[0, -1, label_ids]
                right += int(logits.argmax()) == int(row["label"])
        accuracy[task] = 100.0 * right / len(rows)
    return accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipes", nargs="*", default=["{}"], help="JSON objects of model keys to change")
    parser.add_argument("--twins", type=Path, default=REPO / "resources/synthetic")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the rule's: 2)")
    args = parser.parse_args()
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    tasks = list(config["tasks"])
    missing = [t for t in tasks if not (args.twins / t / "train.parquet").exists()]
    if missing:
        parser.error(f"no twins of {missing} under {args.twins}: run the default config once (snakemake --cores all)")
    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Writing model shards" between the rows
    # the schema's defaults for the keys config.yaml leaves out
    base = {"pretrain_len": 256, "pretrain_label_mapping": "canonical", "seed": 0, **config["models"]["tiny"]}
    print(f"{'recipe':55s} {'build':>7s}  ZSL accuracy (%): {', '.join(tasks)}; mean")
    for recipe in args.recipes:
        spec = {**base, **json.loads(recipe)}
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            builtin.build({t: str(args.twins / t / "train.parquet") for t in tasks}, folder, spec, device="cpu")
            seconds = time.perf_counter() - start
            accuracy = zero_shot_accuracy(Path(folder), args.twins, tasks, config["max_eval"])
        values = list(accuracy.values())
        print(
            f"{recipe:55s} {seconds:6.1f}s  {', '.join(f'{v:.0f}' for v in values)}; {sum(values) / len(values):.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
