"""What a config's activation caches take on disk, where its model and data are not at hand.

    python benchmarks/disk_from_shape.py configs/paper.yaml
    python benchmarks/disk_from_shape.py configs/paper.yaml --shape 24 2048 32 --context 2048

The rule ``disk_estimate`` (``snakemake --cores 1 disk_estimate --configfile ...``) counts every
run's tokens with the model's own tokenizer on the prepared data: use it wherever the model and
data can be had. This script needs neither: the model's shape and context come from ``--shape`` and
``--context`` (default: the papers' fairseq dense 1.3B), and each task's prompt length from the
mean prompt length that paper 001 Table 3 prints for it (``docs/published.csv``, avg_tokens; the
reference counted characters, so tokens are taken as characters / ``--chars-per-token`` plus the
template's words), the longest query as ``--longest`` times the mean, and each demonstration as a
query plus its label word and ``</s>``. The sizes then follow as ``icl_gd.planning.disk.cache_bytes`` counts
them (checked against written caches in tests/unit/planning/test_disk.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from icl_gd.config import resolve as cfg
from icl_gd.config import validation
from icl_gd.data import prompts
from icl_gd.planning import disk
from icl_gd.report.outputs import PUBLISHED
from icl_gd.report.published import read_published

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--shape", nargs=3, type=int, default=[24, 2048, 32], metavar=("LAYERS", "WIDTH", "HEADS"))
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--chars-per-token", type=float, default=4.0)
    parser.add_argument("--longest", type=float, default=4.0, help="the longest query, as a multiple of the mean")
    parser.add_argument("--caches", choices=("keep", "temporary"), help="override the config's caches key")
    parser.add_argument("--layout", choices=("compact", "float32", "float16"), help="override the config's cache_dtype")
    args = parser.parse_args()

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    config = validation.validate(yaml.safe_load(Path(args.config).read_text()), schema)
    if args.layout:
        config["cache_dtype"] = args.layout
    published = read_published(PUBLISHED)
    chars = {row.task: float(row.value) for row in published[published.metric == "avg_tokens"].itertuples()}

    def sequences(model: str, spec: dict) -> disk.Sequences:
        task = spec["task"]
        if task not in chars:
            raise SystemExit(f"task {task!r}: no published prompt length; use the rule disk_estimate")
        template = cfg.task_spec(config, task).template
        mean = chars[task] / args.chars_per_token + len(template.split()) + (spec["record_position"] == "label_word")
        n_eval = int(published[(published.task == task) & (published.metric == "n_eval")].value.iloc[0])
        n = min(spec["max_eval"], n_eval)
        n_context = 1
        if spec["setting"] != "zsl" and cfg.is_icl_setting(spec["setting"]):
            k = prompts.true_k([round(mean) + 1] * spec["k"], round(args.longest * mean), args.context)
            n_context = 1 + k * (round(mean) + 1)
        return disk.Sequences(
            n_examples=n,
            query_keys=round(n * mean),
            n_context=n_context,
            n_labels=len(cfg.task_spec(config, task).label_words),
        )

    shapes = {model: disk.Shape(*args.shape) for model in config["models"]}
    caches = disk.estimate(config, shapes, sequences)
    print(
        f"{args.config}: shape {args.shape} (layers, width, heads), context {args.context}; prompt lengths "
        f"from paper 001 Table 3 at {args.chars_per_token:g} characters a token"
    )
    print(disk.describe(caches, config["cache_dtype"], args.caches or config["caches"]))


if __name__ == "__main__":
    main()
