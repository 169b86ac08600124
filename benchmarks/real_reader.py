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

One training's curve reads one draw of demonstrations on ``--n`` rows: a few points apart is noise.
``--read`` sets trained probes side by side on the rows that all of them held out (the first
``--n`` of the drawn rows, which every probe trained with at least ``--n`` held out also held out),
each reading averaged over ``--seeds`` draws of demonstrations, at the config's k (32 here):

    python benchmarks/real_reader.py --read /tmp/rr6 /tmp/rr8 --n 50 --exclude 100
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
    parser.add_argument("--out", help="where the trained model goes")
    parser.add_argument("--read", nargs="+", metavar="MODEL", help="read these trained probes instead of training one")
    parser.add_argument("--exclude", type=int, default=100, help="--read: the most rows any of them held out")
    parser.add_argument("--seeds", type=int, default=5, help="--read: draws of demonstrations per reading")
    parser.add_argument("--set", action="append", default=[], help="key=value (YAML) over the recipe's keys")
    parser.add_argument("--every", type=int, default=500, help="steps between the curve's readings")
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--n", type=int, default=100, help="held-out train rows per task")
    args = parser.parse_args()
    torch.set_num_threads(2)
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    config = validation.validate(yaml.safe_load(Path(args.config).read_text()), schema)
    spec = {key: value for key, value in config["models"][args.model].items() if key != "weights"}
    if args.read:
        read(args, spec["pretrain_tasks"], config["k"])
        return
    if not args.out:
        parser.error("--out is required unless --read names trained probes")
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


def read(args, tasks: list[str], k: int) -> None:
    """ZSL, ICL and ICL on permuted labels (against the permuted gold) of each probe in
    ``args.read``, on the first ``args.n`` drawn held-out rows of each task, ``k`` demonstrations
    (the config's) drawn from the rows none of them held out, mean over ``args.seeds`` draws."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from icl_gd.models import curve

    if args.n > args.exclude:
        raise SystemExit(
            f"--n ({args.n}) cannot exceed --exclude ({args.exclude}): read only rows every probe held out"
        )
    folder = Path(args.datasets)
    frames = {t: pd.read_parquet(folder / t / "train.parquet") for t in tasks}
    train, _ = curve.split_held_out(frames, args.exclude, drawn=True)
    _, held_out = curve.split_held_out(frames, args.n, drawn=True)
    rows = []
    for path in args.read:
        model = AutoModelForCausalLM.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
        readings = [curve.reading(model, tokenizer, train, held_out, k=k, seed=s) for s in range(args.seeds)]
        for task in tasks:
            row = {"model": Path(path).name, "task": task}
            row.update({name: sum(r[task][name] for r in readings) / len(readings) for name in curve.READINGS})
            rows.append(row)
    print(f"{args.n} held-out train rows per task, k = {k}, mean over {args.seeds} draws of demonstrations")
    print(pd.DataFrame(rows).round(1).to_string(index=False))


if __name__ == "__main__":
    main()
