"""Issue 81, item 3's probe: does the built-in reader's recipe, trained on real sentences, learn in
context on them?

Trains configs/reader-real-protocol.yaml's recipe (or it with other keys) on the prepared train
splits of the four tasks with real text, and prints its training curve (models/curve.py: ZSL, ICL,
ICL on permuted labels against the permuted gold, ICL on novel label words; one seed, k = ``--k``)
read on ``--n`` train rows per task drawn and held out of its training (``pretrain_curve.held_out:
drawn``), never an evaluation sentence: a recipe is chosen without looking at what the protocol
scores. (The first two probes of docs/results.md's "Every recipe tried" for real sentences read 100
evaluation sentences per task instead.)

    snakemake --cores 2 --configfile configs/reader-real-protocol.yaml \\
        resources/datasets/{sst2,sst5,mr,agnews}/train.parquet
    python benchmarks/real_reader.py --out /tmp/rr2                                   # the recipe (10 min)
    python benchmarks/real_reader.py --out /tmp/rr1 --set vocab_size=2000 --set pretrain_canonical_steps=600
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
from icl_gd.models import builtin  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "configs/reader-real-protocol.yaml"))
    parser.add_argument("--model", default="reader_real")
    parser.add_argument("--datasets", default="resources/datasets", help="a folder of <task>/{train,eval}.parquet")
    parser.add_argument("--out", required=True, help="where the trained model goes")
    parser.add_argument("--set", action="append", default=[], help="key=value (YAML) over the recipe's keys")
    parser.add_argument("--every", type=int, default=500, help="steps between the curve's readings")
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--n", type=int, default=100, help="held-out train rows per task")
    args = parser.parse_args()
    torch.set_num_threads(2)
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    config = validation.validate(yaml.safe_load(Path(args.config).read_text()), schema)
    spec = {key: value for key, value in config["models"][args.model].items() if key != "weights"}
    for item in args.set:
        key, value = item.split("=", 1)
        spec[key] = yaml.safe_load(value)
    spec["pretrain_curve"] = {"every": args.every, "k": args.k, "examples": args.n, "held_out": "drawn"}
    tasks = spec["pretrain_tasks"]
    folder = Path(args.datasets)
    start = time.time()
    summary = builtin.build({t: str(folder / t / "train.parquet") for t in tasks}, args.out, spec, device="cpu")
    print(
        f"trained in {time.time() - start:.0f} s, {summary['n_params']} parameters, final loss {summary['final_loss']:.3f}"
    )
    print(pd.read_csv(Path(args.out) / builtin.CURVE_FILE, sep="\t").round(1).to_string(index=False))


if __name__ == "__main__":
    main()
