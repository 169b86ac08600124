"""Issue 81's probe: does a built-in reader follow label words it never saw as labels?

Reads a trained model, or trains config.yaml's reader recipe with other pool settings, and prints
the training curve's readings (models/curve.py: ZSL, ICL, ICL on permuted labels, and ICL on novel
label words, ``icl_novel``: the demonstrations labelled with words of the tokenizer's held-out pool,
``data.label_pools``, the query read among them, over three draws of words and demonstrations), on
50 held-out train rows per twin at k = 8.

    python benchmarks/novel_labels.py --baseline models/tiny                # the shipped reader
    python benchmarks/novel_labels.py --mapping permute --out /tmp/perm     # the recipe before issue 81 (10 min)
    python benchmarks/novel_labels.py --share 0.25 --out /tmp/pool25        # another share of pool episodes

The recipe itself holds the pool mapping (``pretrain_label_mapping: pool``, models/episodes.py);
the first probe (N1, docs/results.md) patched it in from outside before it did, with the same curve.
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import pandas as pd  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

from icl_gd.config import validation  # noqa: E402
from icl_gd.data import label_pools  # noqa: E402
from icl_gd.models import builtin, curve  # noqa: E402

TWINS = ("sst2", "sst5", "mr", "subj", "agnews", "cb")
READINGS = ["zsl", "icl", "icl_permuted", curve.NOVEL]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--twins", default="resources/synthetic", help="a folder of <twin>/train.parquet")
    parser.add_argument("--baseline", help="read this trained model instead of training one")
    parser.add_argument("--out", default="results/novel_labels", help="where the trained model goes")
    parser.add_argument("--mapping", help="pretrain_label_mapping (default: the recipe's, pool)")
    parser.add_argument("--share", type=float, help="pretrain_pool_share (default: the recipe's)")
    parser.add_argument("--steps", type=int, help="pretraining steps (default: the recipe's)")
    parser.add_argument("--every", type=int, default=500, help="steps between the curve's readings")
    args = parser.parse_args()
    torch.set_num_threads(2)
    frames = {t: pd.read_parquet(Path(args.twins) / t / "train.parquet") for t in TWINS}
    if args.baseline:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.baseline)
        model = AutoModelForCausalLM.from_pretrained(args.baseline)
        train, held_out = curve.split_held_out(frames, 50)
        novel = label_pools.label_pools(tokenizer).held_out
        rows = curve.reading(model, tokenizer, train, held_out, k=8, novel=novel)
        print(pd.DataFrame(rows.values()).round(1).to_string())
        return
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    config = validation.validate(yaml.safe_load((REPO / "config.yaml").read_text()), schema)
    spec = {**config["models"]["tiny"], "pretrain_curve": {"every": args.every, "k": 8, "examples": 50}}
    spec.pop("weights", None)
    for key, value in (("pretrain_label_mapping", args.mapping), ("pretrain_pool_share", args.share)):
        if value is not None:
            spec[key] = value
    if args.steps:
        spec["pretrain_steps"] = args.steps
    start = time.time()
    paths = {t: str(Path(args.twins) / t / "train.parquet") for t in TWINS}
    summary = builtin.build(paths, args.out, spec, device="cpu", name="novel_labels")
    print(f"{time.time() - start:.0f} s, final loss {summary['final_loss']:.3f}")
    table = pd.read_csv(Path(args.out) / builtin.CURVE_FILE, sep="\t")
    readings = [r for r in READINGS if r in table]
    print(table.groupby("step")[readings].mean().round(1).to_string())
    print(table[table["step"] == table["step"].max()][["task", *readings]].to_string(index=False))


if __name__ == "__main__":
    main()
