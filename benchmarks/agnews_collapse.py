"""Why ICL collapses onto one class on AGNews: measurements, then ablations, with the package's own code.

    python benchmarks/agnews_collapse.py measure --dir /work/ksweep
    python benchmarks/agnews_collapse.py ablate --dir /work/ksweep [--models smollm2,gemma3] [--seeds 3,4,5]

``--dir`` is the folder in which the workflow ran ``configs/icl-k-sweep.yaml`` (its converted models,
``resources/models/<model>/trained``, its AGNews splits, ``resources/datasets/agnews``, and its caches).

``measure`` prints, per model and seed, what the protocol's ICL prompt is: its length in tokens
(``extract.sequences_of``, the workflow's own prompt builder) against the model's context and sliding
window, how many demonstrations lie inside the window before the answer token, the instruction that
each demonstration repeats and its share of the context, the demonstrations' class balance and the
labels of the last four, the label words' tokens, and the prediction distribution of ZSL and of ICL
at each k (the workflow's caches).

``ablate`` runs ICL again with ``extract.evaluate`` (the workflow's evaluation) on contexts changed in
one respect each, on the same 100 evaluation examples:

- ``protocol``: the workflow's own context (k = 32); its predictions must equal the cache's;
- ``balanced``: 8 demonstrations of each class, the first of each in the run's shuffled train split,
  in that order (same k = 32);
- ``instruction_once``: the same 32 demonstrations, the instruction only before the first (the
  others and the query as ``Article: {text} Answer:``);
- ``no_instruction``: the same 32 demonstrations and the query as ``Article: {text} Answer:``;
- ``last8``: the last 8 of the 32 demonstrations (what a 512-token window sees), where ``icl_k8`` of
  the sweep is the first 8;
- ``newline_sep``: the same context with a newline token between demonstrations instead of EOS;
- ``balanced_once``: ``balanced`` with the instruction once;
- ``swapped_words``: the protocol's context with the label words of World and Business swapped (in
  the demonstrations and in the scoring; the instruction unchanged): a collapse that follows the
  word ``Business`` onto the World articles' class is a bias for the token, not for the topic;
- ``politics_word``: the protocol's context with World called Politics, in the label word and the
  instruction (the BBC corpus's World class is its politics section, mostly UK politics).

For each: accuracy, the most-predicted class and its share, the prediction counts per class, the
mean log-probability of each label word (a bias towards one word shows there) and the accuracy once
those means are taken off (``centred_accuracy``). ``measure`` gives the last for the caches too.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import yaml

from icl_gd.activations import capture, extract
from icl_gd.activations.cache import read_cache
from icl_gd.config import validation
from icl_gd.data import prompts, splits
from icl_gd.planning import plan

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs/icl-k-sweep.yaml"
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
TASK = "agnews"
INSTRUCTION = "Classify the news articles into the categories of World, Sports, Business, and Technology."
SHORT = "Article: {text} Answer:"
VARIANTS = (
    "protocol",
    "newline_sep",
    "balanced",
    "instruction_once",
    "no_instruction",
    "last8",
    "balanced_once",
    "swapped_words",
    "politics_word",
)


def load_config(path: Path = CONFIG) -> dict:
    """The config as the workflow sees it (defaults filled in)."""
    return validation.validate(yaml.safe_load(path.read_text()), yaml.safe_load(SCHEMA.read_text()))


def paths(folder: Path, model: str) -> dict:
    data = folder / "resources/datasets" / TASK
    return {
        "model": folder / "resources/models" / model / "trained",
        "train": data / "train.parquet",
        "eval": data / "eval.parquet",
    }


def model_config(model_dir: Path):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(model_dir)


def windows(config) -> tuple[int | None, int, int]:
    """(sliding window, layers that slide, layers)."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None) or []
    sliding = sum(t == "sliding_attention" for t in types) if window else 0
    return window, sliding, config.num_hidden_layers


def prepared(config: dict, folder: Path, model: str, seed: int, setting: str = "icl", tokenizer=None):
    from icl_gd.models import loading

    p = paths(folder, model)
    tokenizer = tokenizer or loading.load_tokenizer(p["model"])
    max_len = loading.context_length(SimpleNamespace(config=model_config(p["model"])))
    spec = plan.run_spec(config, TASK, setting, seed)
    return spec, tokenizer, extract.sequences_of(spec, tokenizer, max_len, str(p["train"]), str(p["eval"])), max_len


def demos_in_window(demo_lengths: list[int], query_answer: int, window: int | None) -> int:
    """How many demonstrations (each + its EOS) lie wholly inside the last ``window`` tokens that the
    answer token attends to (the answer token and ``query_answer`` query tokens before it)."""
    if window is None:
        return len(demo_lengths)
    room, n = window - 1 - query_answer, 0
    for length in reversed(demo_lengths):
        if length + 1 > room:
            break
        room -= length + 1
        n += 1
    return n


def measure(config: dict, folder: Path, models: list[str], seeds: list[int]) -> None:
    from icl_gd.models import loading

    words = None
    for model in models:
        p = paths(folder, model)
        tokenizer = loading.load_tokenizer(p["model"])
        mconf = model_config(p["model"])
        window, sliding, n_layers = windows(mconf)
        instr = prompts.encode_text(tokenizer, INSTRUCTION)
        print(f"\n## {model}: context {loading.context_length(SimpleNamespace(config=mconf))} tokens, ", end="")
        print(f"sliding window {window} in {sliding} of {n_layers} layers" if window else "no sliding window")
        print(
            f"BOS {tokenizer.convert_ids_to_tokens(tokenizer.bos_token_id)!r}, separator EOS "
            f"{tokenizer.convert_ids_to_tokens(tokenizer.eos_token_id)!r}; the instruction is {len(instr)} tokens"
        )
        for seed in seeds:
            spec, _, run, max_len = prepared(config, folder, model, seed, tokenizer=tokenizer)
            words = run.task_spec.label_words
            if seed == seeds[0]:
                for word, ident in zip(words, run.label_ids):
                    bare = tokenizer.encode(word, add_special_tokens=False)
                    print(
                        f"  label {word!r}: ' {word}' -> id {ident} {tokenizer.convert_ids_to_tokens([ident])}; "
                        f"without the space -> {tokenizer.convert_ids_to_tokens(bare)}"
                    )
            used = run.demo_ids[: run.true_k]
            lengths = [len(d) for d in used]
            qlen = [len(q.ids) for q in run.queries]
            answer = [q.answer_offset for q in run.queries]
            labels = run.demos["label"].to_numpy()[: run.true_k]
            counts = Counter(int(x) for x in labels)
            inside = [demos_in_window(lengths, a, window) for a in answer]
            print(
                f"  seed {seed}: k {spec['k']}, true k {run.true_k}; context {len(run.context)} tokens "
                f"(demonstrations {min(lengths)}-{max(lengths)} tokens with the label word, mean {statistics.fmean(lengths):.1f}, "
                f"each then EOS); "
                f"query {min(qlen)}-{max(qlen)}; whole prompt up to {len(run.context) + max(qlen)} of {max_len}; "
                f"instruction {len(instr) * run.true_k} tokens ({len(instr) * run.true_k / len(run.context):.0%} of the context); "
                f"demonstrations wholly inside the window before the answer: {min(inside)}-{max(inside)}"
            )
            print(
                "    demonstrations per class: "
                + ", ".join(f"{w} {counts.get(i, 0)}" for i, w in enumerate(words))
                + "; last four: "
                + ", ".join(words[int(x)] for x in labels[-4:])
            )
            for setting in ("zsl", "icl_k4", "icl_k8", "icl_k16", "icl"):
                seed_dir = plan.cache_seed(config, TASK, setting, seed)
                path = folder / f"results/activations/{model}/trained/{TASK}/seed{seed_dir}/{setting}.arrow"
                if not path.is_file():
                    continue
                cache = read_cache(path)
                pred = Counter(int(x) for x in cache.pred)
                acc = float((cache.pred == cache.gold).mean())
                centred = centred_accuracy(np.asarray(cache.label_logprobs), cache.gold.astype(int))
                print(
                    f"    {setting:7s} accuracy {acc:.2f} (centred {centred:.2f}); predicted "
                    + ", ".join(f"{w} {pred.get(i, 0)}" for i, w in enumerate(words))
                )
            if seed == seeds[0]:
                gold = Counter(int(x) for x in cache.gold)
                print(
                    "    evaluation examples per class: "
                    + ", ".join(f"{w} {gold.get(i, 0)}" for i, w in enumerate(words))
                )


def balanced_demos(train: pd.DataFrame, seed: int, permutation: int, per_class: int, n_labels: int) -> pd.DataFrame:
    """``per_class`` demonstrations of each class: the first of each in the run's shuffled train split,
    in that order (then the run's permutation, as ``splits.select_demos`` applies it)."""
    shuffled = splits.select_demos(train, seed, len(train), 0)
    keep = shuffled.groupby("label", sort=False).head(per_class)
    if len(keep) != per_class * n_labels:
        raise ValueError(f"the train split has fewer than {per_class} examples of some class")
    keep = keep.reset_index(drop=True)
    if permutation > 0:
        order = np.random.RandomState(splits.permutation_seed(seed, permutation)).permutation(len(keep))
        keep = keep.iloc[order].reset_index(drop=True)
    return keep


def contexts(variant: str, run, spec: dict, tokenizer, train: pd.DataFrame, eval_rows: pd.DataFrame):
    """(context, queries, the demonstrations' classes, label ids, label words) of an ablation, from
    prompts.py's builders."""
    from dataclasses import replace

    task = run.task_spec
    labels = run.label_ids
    if variant == "swapped_words":  # World's and Business' words swapped: class 0 is " Business"
        words = list(task.label_words)
        words[0], words[2] = words[2], words[0]
        task = replace(task, label_words=tuple(words))
        labels = prompts.label_token_ids(tokenizer, task)
    if variant == "politics_word":  # BBC's politics articles called what they are, in the label and the instruction
        task = replace(
            task,
            label_words=("Politics",) + tuple(task.label_words[1:]),
            template=task.template.replace("of World,", "of Politics,"),
        )
        labels = prompts.label_token_ids(tokenizer, task)
    short = replace(task, template=SHORT)
    demos = run.demos.iloc[: run.true_k]
    if variant in ("balanced", "balanced_once"):
        demos = balanced_demos(train, spec["seed"], spec["permutation"], run.true_k // task.n_labels, task.n_labels)
    if variant == "last8":
        demos = demos.iloc[-8:]
    queries = run.queries
    if variant in ("swapped_words", "politics_word"):
        queries = prompts.build_queries(tokenizer, task, eval_rows, labels, spec["record_position"])
    if variant in ("instruction_once", "balanced_once", "no_instruction"):
        queries = prompts.build_queries(tokenizer, short, eval_rows, labels, spec["record_position"])
        ids = prompts.demonstration_ids(tokenizer, short, demos, labels)
        if variant != "no_instruction":  # the first demonstration keeps the whole template
            ids[0] = prompts.demonstration_ids(tokenizer, task, demos.iloc[:1], labels)[0]
    else:
        ids = prompts.demonstration_ids(tokenizer, task, demos, labels)
    context = prompts.icl_context(tokenizer, ids)
    if variant == "newline_sep":
        newline = tokenizer.encode("\n", add_special_tokens=False)
        context = [tokenizer.bos_token_id]
        for demo in ids:
            context.extend(demo + newline)
    return context, queries, [int(x) for x in demos["label"]], labels, task.label_words


def centred_accuracy(logprobs: np.ndarray, gold: np.ndarray) -> float:
    """Accuracy once each label word's mean log-probability over the evaluation examples is taken off
    (a diagnostic, not a method: it reads the evaluation set): high where the predictions carry the
    class and one word's offset alone hides it."""
    return float((np.argmax(logprobs - logprobs.mean(0), 1) == gold).mean())


def ablate(config: dict, folder: Path, models: list[str], seeds: list[int], variants: list[str], out: Path | None):
    import torch

    from icl_gd.models import loading

    torch.set_num_threads(max(1, torch.get_num_threads()))
    rows = []
    for model in models:
        p = paths(folder, model)
        net = loading.load_model(p["model"], dtype=config["dtype"], device="cpu")
        tokenizer = loading.load_tokenizer(p["model"])
        rec = capture.attach(net)
        train = pd.read_parquet(p["train"])
        eval_rows = splits.select_eval(pd.read_parquet(p["eval"]), config["max_eval"])
        for seed in seeds:
            spec, _, run, _ = prepared(config, folder, model, seed, tokenizer=tokenizer)
            cached = read_cache(folder / f"results/activations/{model}/trained/{TASK}/seed{seed}/icl.arrow")
            for variant in variants:
                start = time.time()
                context, queries, demo_labels, label_ids, words = contexts(
                    variant, run, spec, tokenizer, train, eval_rows
                )
                with torch.inference_mode():
                    rec_out = extract.evaluate(net, rec, context, queries, label_ids, batch_size=16)
                logprobs = rec_out["label_logprobs"]
                pred = np.argmax(logprobs, 1)
                gold = rec_out["gold"]
                if variant == "protocol" and not np.array_equal(pred, cached.pred):
                    raise AssertionError(f"{model} seed {seed}: the protocol context does not reproduce the cache")
                counts = Counter(int(x) for x in pred)
                top, n_top = counts.most_common(1)[0]
                row = {
                    "model": model,
                    "seed": seed,
                    "variant": variant,
                    "k": len(demo_labels),
                    "context_tokens": len(context),
                    "demo_classes": "/".join(str(Counter(demo_labels).get(i, 0)) for i in range(len(words))),
                    "last4": "/".join(words[i][0] for i in demo_labels[-4:]),
                    "accuracy": float((pred == gold).mean()),
                    "top_class": words[top],
                    "top_share": n_top / len(pred),
                    "pred_counts": "/".join(str(counts.get(i, 0)) for i in range(len(words))),
                    "mean_logprob": "/".join(f"{v:.2f}" for v in logprobs.mean(0)),
                    "centred_accuracy": centred_accuracy(logprobs, gold),
                    "seconds": round(time.time() - start, 1),
                }
                rows.append(row)
                print(" | ".join(str(v) for v in row.values()), flush=True)
    if out is not None:
        with open(out, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    summary(rows)


def summary(rows: list[dict]) -> None:
    print("\n| model | variant | accuracy (seeds) | mean | centred (seeds) | collapse (class: share, per seed) |")
    print("|---|---|---|---:|---|---|")
    for model, variant in dict.fromkeys((r["model"], r["variant"]) for r in rows):
        rs = [r for r in rows if r["model"] == model and r["variant"] == variant]
        acc = [r["accuracy"] for r in rs]
        print(
            f"| {model} | {variant} | {', '.join(f'{100 * a:.0f}' for a in acc)} | {100 * statistics.fmean(acc):.1f} | "
            + ", ".join(f"{100 * r['centred_accuracy']:.0f}" for r in rs)
            + " | "
            + ", ".join(f"{r['top_class']}: {r['top_share']:.2f}" for r in rs)
            + " |"
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["measure", "ablate"])
    parser.add_argument("--dir", required=True, help="the folder the workflow ran configs/icl-k-sweep.yaml in")
    parser.add_argument("--config", default=str(CONFIG))
    parser.add_argument("--models", default="smollm2,gemma3")
    parser.add_argument("--seeds", default="3,4,5")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", help="ablate: also write the rows to this CSV")
    args = parser.parse_args(argv)
    config = load_config(Path(args.config))
    models, seeds = args.models.split(","), [int(s) for s in args.seeds.split(",")]
    if args.command == "measure":
        measure(config, Path(args.dir), models, seeds)
    else:
        variants = args.variants.split(",")
        unknown = sorted(set(variants) - set(VARIANTS))
        if unknown:
            parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
        ablate(config, Path(args.dir), models, seeds, variants, Path(args.out) if args.out else None)


if __name__ == "__main__":
    main()
