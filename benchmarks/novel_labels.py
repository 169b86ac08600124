"""A probe for issue 81, item 1: does the built-in reader follow label words it never saw as labels?

Trains config.yaml's reader recipe (models.tiny) with one change, or reads a trained model:
``--share`` of the pretraining episodes (after the canonical steps) take their label words from a
*training pool* of the tokenizer's words instead of permuting the task's own; the curve's readings
(models/curve.py: ZSL, ICL, ICL on permuted labels, on 50 held-out train rows per twin at k = 8) gain
``icl_novel``: the demonstrations labelled with words of a *held-out pool* (a quarter of the words,
disjoint from the training pool and from every protocol label word: ``data.label_pools``), the query
read among them, over three draws of words and demonstrations.

Not the recipe: it patches models/episodes.label_words and models/curve.reading from outside, so
that the package (whose code is the shipped weights' recipe) stays as it is. The recipe that ships
will hold the pool mapping in models/episodes.py.

    python benchmarks/novel_labels.py --baseline models/tiny      # the shipped reader
    python benchmarks/novel_labels.py --out /tmp/pool50           # trains (about 10 min on 2 cores)
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

from icl_gd.config import validation  # noqa: E402
from icl_gd.data import label_pools, prompts, splits  # noqa: E402
from icl_gd.models import builtin, curve, episodes  # noqa: E402

TWINS = ("sst2", "sst5", "mr", "subj", "agnews", "cb")
POOLS: dict = {}


def pools(tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(training pool, held-out pool) of the tokenizer's words (``data.label_pools``)."""
    found = label_pools.label_pools(tokenizer)
    return np.array(found.train), np.array(found.held_out)


def patch(share: float) -> None:
    """The pool mapping in the episodes, and the novel-word reading in the curve."""
    init, words, reading = episodes.Episodes.__init__, episodes.label_words, curve.reading

    def episodes_init(self, tokenizer, *a, **k):
        init(self, tokenizer, *a, **k)
        POOLS["train"], POOLS["held"] = pools(tokenizer)
        print(f"pools: {len(POOLS['train'])} training words, {len(POOLS['held'])} held out", flush=True)

    def label_words(label_ids, mapping, rng):
        if mapping == "permute" and rng.random() < share:
            return rng.choice(POOLS["train"], len(label_ids), replace=False)
        return words(label_ids, mapping, rng)

    @torch.no_grad()
    def novel_reading(model, tokenizer, train, held_out, *, k, seed=0):
        rows = reading(model, tokenizer, train, held_out, k=k, seed=seed)
        was_training = model.training
        model.eval()
        for task, frame in held_out.items():
            spec = episodes.preset(task)
            queries = [prompts.prompt_ids(tokenizer, spec, row) for _, row in frame.iterrows()]
            gold, accs = frame["label"].to_numpy(), []
            for draw in range(3):
                novel = list(
                    np.random.default_rng([draw, len(task)]).choice(POOLS["held"], spec.n_labels, replace=False)
                )
                demos = splits.select_demos(train[task], draw, k, 0)
                context = prompts.icl_context(tokenizer, prompts.demonstration_ids(tokenizer, spec, demos, novel))
                accs.append(100 * float(np.mean(curve._predict(model, context, queries, novel) == gold)))
            rows[task]["icl_novel"] = float(np.mean(accs))
        model.train(was_training)
        return rows

    episodes.Episodes.__init__, episodes.label_words, curve.reading = episodes_init, label_words, novel_reading


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--twins", default="resources/synthetic", help="a folder of <twin>/train.parquet")
    parser.add_argument("--baseline", help="read this trained model instead of training one")
    parser.add_argument("--out", default="results/novel_labels", help="where the trained model goes")
    parser.add_argument("--share", type=float, default=0.5, help="episodes on training-pool words")
    parser.add_argument("--steps", type=int, help="pretraining steps (default: the recipe's)")
    parser.add_argument("--every", type=int, default=500, help="steps between the curve's readings")
    args = parser.parse_args()
    torch.set_num_threads(2)
    patch(args.share)
    frames = {t: pd.read_parquet(Path(args.twins) / t / "train.parquet") for t in TWINS}
    if args.baseline:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.baseline)
        model = AutoModelForCausalLM.from_pretrained(args.baseline)
        POOLS["train"], POOLS["held"] = pools(tokenizer)
        train, held_out = curve.split_held_out(frames, 50)
        print(pd.DataFrame(curve.reading(model, tokenizer, train, held_out, k=8).values()).round(1).to_string())
        return
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    config = validation.validate(yaml.safe_load((REPO / "config.yaml").read_text()), schema)
    spec = {**config["models"]["tiny"], "pretrain_curve": {"every": args.every, "k": 8, "examples": 50}}
    spec.pop("weights", None)
    if args.steps:
        spec["pretrain_steps"] = args.steps
    start = time.time()
    paths = {t: str(Path(args.twins) / t / "train.parquet") for t in TWINS}
    summary = builtin.build(paths, args.out, spec, device="cpu", name="novel_labels")
    print(f"{time.time() - start:.0f} s, final loss {summary['final_loss']:.3f}")
    table = pd.read_csv(Path(args.out) / builtin.CURVE_FILE, sep="\t")
    readings = ["zsl", "icl", "icl_permuted", "icl_novel"]
    print(table.groupby("step")[readings].mean().round(1).to_string())
    print(table[table["step"] == table["step"].max()][["task", *readings]].to_string(index=False))


if __name__ == "__main__":
    main()
