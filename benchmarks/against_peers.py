"""The workflow's extraction beside what a researcher would use instead, and beside the machine.

    python benchmarks/against_peers.py                     # SmolLM2-135M (the package's GGUF), CPU, float32
    python benchmarks/against_peers.py --shape gpt2-small  # a random GPT-2-small, the same token ids
    python benchmarks/against_peers.py --peers workflow,hooks --peer-examples 2 --threads 2

For ZSL and ICL prompts of one task (SST-2, k = 32 demonstrations: the real rated sentences of
``source: package`` where the set-up fetched them, else the task's synthetic twin), every peer of
``icl_gd.activations.peers`` records what a cache holds (attention outputs and pre-softmax scores at the recorded
position, the label words' log-probs): the workflow's extraction, TransformerLens'
``run_with_cache`` (skipped, saying what to install, without the ``peers`` extra), plain transformers
with hooks and ``output_attentions``, and the reference's one-prompt-at-a-time loop. Each peer's
records are checked against the workflow's (relative error, ``peers.agreement``: at most 1e-4), then
examples per second and the workflow's speed-up over each peer are printed, all from this process.
Each peer runs ``--repeats`` times, each run next to one of the workflow's, in turn first (W P, P W,
...); the speed-up is the median of those pairs' ratios, so that a machine whose load changes
during the benchmark moves both sides of a pair and not the ratio.
Every peer runs every ZSL example; the slow ones run ICL on ``--peer-examples`` of them, spread
over the queries' lengths, so that their mean length is the workflow's. The workflow's ICL time per
example is what a run of ``--examples`` pays: its context once, shared by all.

Against the machine: the FLOPs of an example (2 per multiply-add of the block linears and the head
row, q.k and p.v over the keys each query token sees; for ICL the query tokens alone, the shared
context being paid once a run) run as plain matmuls of the same shapes (``torch.mm``/``bmm``, the
workflow's batch as rows) in the same process, and the share of that rate the workflow achieves.
The workflow's ICL time per example is split from its context's by timing two sizes of the same
call (``--examples`` and one batch), as ``benchmarks/extraction_speed.py`` does.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _shared import DEFAULT_CACHE, linear_layers, paired, smollm2_folder, timed  # noqa: E402

from icl_gd.activations import peers
from icl_gd.common.specs import TaskSpec  # noqa: E402
from icl_gd.config.resolve import TASK_PRESETS  # noqa: E402
from icl_gd.data import prompts, sources, splits, twins  # noqa: E402
from icl_gd.data.corpora import CORPORA, archive_path  # noqa: E402
from icl_gd.models import loading

CORPUS = "vader_movie_reviews"
TOLERANCE = 1e-4


def model_folder(args, workdir: Path) -> tuple[Path, str]:
    smollm2 = smollm2_folder(args.cache)
    if not args.shape:
        return smollm2, f"SmolLM2-135M ({smollm2})"
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = loading.load_tokenizer(smollm2)  # its ids (< 49152) index GPT-2's 50257 embeddings
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=12,
        n_embd=768,
        n_head=12,
        n_positions=2048,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    folder = workdir / "gpt2-small"
    GPT2LMHeadModel(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, "GPT-2-small shape, random weights, SmolLM2's token ids"


def task_rows(k: int, n_eval: int):
    """(spec, train frame, eval frame, where the sentences come from)."""
    preset = TASK_PRESETS["sst2"]
    archive = archive_path(CORPORA[CORPUS])
    if Path(archive).is_file():
        spec = TaskSpec(
            name="sst2",
            source="package",
            template=preset["template"],
            label_words=tuple(preset["label_words"]),
            seeds=(2,),
            lr=0.0,
            splits={"train": "train", "eval": "eval"},
            corpus=CORPUS,
            label_rule="sst2",
        )
        splits = sources.load_task_splits(spec)
        return spec, splits["train"], splits["eval"], f"real sentences ({CORPUS})"
    spec = TaskSpec(
        name="sst2",
        source="synthetic",
        template=preset["template"],
        label_words=tuple(preset["label_words"]),
        seeds=(2,),
        lr=0.0,
    )
    frames = twins.make_synthetic_task("sst2", max(4 * k, 200), max(n_eval, 200), seed=0)
    return spec, frames["train"], frames["eval"], f"the synthetic twin ({archive} not fetched)"


def sequences(folder: Path, k: int, n_eval: int):
    tokenizer = loading.load_tokenizer(folder)
    spec, train, evaluation, origin = task_rows(k, n_eval)
    label_ids = prompts.label_token_ids(tokenizer, spec)
    queries = prompts.build_queries(tokenizer, spec, splits.select_eval(evaluation, n_eval), label_ids, "label_word")
    demos = splits.select_demos(train, seed=2, k=k, permutation=0)
    context = prompts.icl_context(tokenizer, prompts.demonstration_ids(tokenizer, spec, demos, label_ids))
    return [tokenizer.bos_token_id], context, queries, label_ids, origin


def example_products(model, query_tokens: int, keys_before: int, batch: int):
    """The products of ``batch`` examples of ``query_tokens`` tokens each, after ``keys_before``
    shared keys: (kind, shape) for torch.mm ((m, k), (k, n)) and torch.bmm (attention, per head)."""
    config = model.config
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    keys = keys_before + (query_tokens + 1) / 2  # keys a query token sees, on average
    out = [
        ("mm", (batch * query_tokens, fan_in), (fan_in, fan_out))
        for _, _, _, fan_in, fan_out, _ in linear_layers(model)
    ]
    for _ in range(config.num_hidden_layers):
        out.append(("bmm", (batch * heads, query_tokens, head_dim), (batch * heads, head_dim, round(keys))))  # q.k
        out.append(("bmm", (batch * heads, query_tokens, round(keys)), (batch * heads, round(keys), head_dim)))  # p.v
    out.append(("mm", (batch, config.hidden_size), (config.hidden_size, config.vocab_size)))  # the answer row's logits
    return out


def matmul_seconds(products, repeats: int = 3) -> tuple[float, float]:
    """(FLOPs, median seconds) of running ``products`` as plain matmuls."""
    gen = torch.Generator().manual_seed(0)
    operands = [(kind, torch.randn(a, generator=gen), torch.randn(b, generator=gen)) for kind, a, b in products]
    flops = sum(2.0 * np.prod(a.shape) * b.shape[-1] for _, a, b in operands)

    def run():
        for kind, a, b in operands:
            (torch.mm if kind == "mm" else torch.bmm)(a, b)

    run()
    return flops, statistics.median(timed(run)[0] for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=("gpt2-small",), help="a random model of this shape instead of SmolLM2")
    parser.add_argument("--cache", default=DEFAULT_CACHE, help="where the GGUF is converted once")
    parser.add_argument("--peers", default=",".join(peers.PEERS), help="which peers (the workflow always runs)")
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--examples", type=int, default=64, help="examples the workflow runs")
    parser.add_argument("--peer-examples", type=int, default=4, help="ICL examples every other peer runs")
    parser.add_argument("--batch-size", type=int, default=16, help="the workflow's (its CPU default)")
    parser.add_argument("--peer-batch-size", type=int, default=4, help="the batched peers'")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each peer, paired with the workflow's")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    chosen = ["workflow"] + [p for p in args.peers.split(",") if p and p != "workflow"]
    with tempfile.TemporaryDirectory() as workdir:
        folder, source = model_folder(args, Path(workdir))
        bos, context, queries, label_ids, origin = sequences(folder, args.k, args.examples)
        # The slow peers run ICL on a few examples spread over the queries' lengths (every peer runs
        # every ZSL example): the same mean length as the workflow's, so per-example times compare.
        by_length = sorted(range(len(queries)), key=lambda i: len(queries[i].ids))
        picked = [by_length[round(j)] for j in np.linspace(0, len(queries) - 1, min(args.peer_examples, len(queries)))]
        few = [queries[i] for i in picked]
        q_tokens = statistics.mean(len(q.ids) for q in queries)
        print(
            f"{source}; CPU, {torch.get_num_threads()} threads, float32; SST-2 on {origin}: ICL context "
            f"{len(context)} tokens (k = {args.k}), queries {q_tokens:.1f} tokens on average"
        )

        loaded, skipped = {}, []
        for peer in chosen:
            why = peers.missing(peer)
            if why:
                skipped.append(f"{peer}: {why}")
            else:
                loaded[peer] = peers.load(folder, peer)

        def job(peer, setting, limit=None):
            """The examples a peer runs for a setting (the first ``limit``), and the call that records them."""
            ctx = bos if setting == "zsl" else context
            run = (few if setting == "icl" and peer != "workflow" else queries)[:limit]
            batch = args.batch_size if peer == "workflow" else args.peer_batch_size
            return run, functools.partial(peers.record, peer, loaded[peer], ctx, run, label_ids, batch_size=batch)

        for peer in loaded:  # warm-up: one example of each
            for setting in ("zsl", "icl"):
                job(peer, setting, limit=1)[1]()

        # Each peer is timed in neighbouring pairs with the workflow (W P, P W, W P, ...): the ratio of
        # a pair holds when the machine's load changes between pairs (benchmarks/_shared.paired).
        stats, records = {}, {}
        for setting in ("zsl", "icl"):
            own, workflow = job("workflow", setting)
            workflow_times = []
            for peer in [p for p in loaded if p != "workflow"]:
                run, call = job(peer, setting)
                pair = paired(workflow, call, args.repeats)
                records["workflow", setting], records[peer, setting] = pair.first_a, pair.first_b
                workflow_times += pair.a
                stats[peer, setting] = (len(run), statistics.median(pair.b), pair.ratio(len(own), len(run)))
            if not workflow_times:  # no other peer: the workflow alone
                for _ in range(args.repeats):
                    seconds, records["workflow", setting] = timed(workflow)
                    workflow_times.append(seconds)
            stats["workflow", setting] = (len(own), statistics.median(workflow_times), 1.0)
        rows = [(peer, setting, *stats[peer, setting]) for peer in loaded for setting in ("zsl", "icl")]
        model = loaded["workflow"][0]
        t_batch = min(
            timed(
                peers.record,
                "workflow",
                loaded["workflow"],
                context,
                queries[: args.batch_size],
                label_ids,
                batch_size=args.batch_size,
            )[0]
            for _ in range(2)
        )

        print("\nagreement with the workflow's records (relative error; at most 1e-4 required):")
        bad = []
        for peer in chosen:
            if (peer, "icl") not in records or peer == "workflow":
                continue
            for setting in ("zsl", "icl"):
                rows_of = picked if setting == "icl" else slice(None)
                expected = {key: value[rows_of] for key, value in records["workflow", setting].items()}
                errors = peers.agreement(records[peer, setting], expected)
                worst = max(errors.values())
                bad += [f"{peer} {setting}"] if worst > TOLERANCE else []
                print(f"  {peer:17s} {setting:4s} " + "  ".join(f"{key} {value:.1e}" for key, value in errors.items()))

        per = {(peer, setting): seconds / n for peer, setting, n, seconds, _ in rows}
        print(
            f"\n{'peer':17s} {'setting':8s} {'examples':>8s} {'s/example':>10s} {'examples/s':>11s} {'workflow is':>12s}"
            f"   (medians of {args.repeats} repeats; the speed-up: of the neighbouring pairs' ratios)"
        )
        for peer, setting, n, seconds, speedup in rows:
            print(f"{peer:17s} {setting:8s} {n:8d} {seconds / n:10.3f} {n / seconds:11.2f} {speedup:11.1f}x")
        for line in skipped:
            print(f"skipped {line}")

        # The machine: the workflow's per-example cost against its FLOPs at the matmul rate.
        t_all = per["workflow", "icl"] * len(queries)
        query_s = max(t_all - t_batch, 1e-9) / max(len(queries) - args.batch_size, 1)
        context_s = max(t_batch - args.batch_size * query_s, 0.0)
        print(
            f"\nthe workflow's ICL: the context {context_s:.2f} s once, then {query_s * 1e3:.0f} ms an example "
            f"(from {len(queries)} and {args.batch_size} examples)"
        )
        q = round(q_tokens)
        print(
            f"{'path':24s} {'GFLOP/ex':>9s} {'s/example':>10s} {'GFLOP/s':>8s} {'matmul GFLOP/s':>15s} {'ratio':>6s} "
            f"{'matmul-bound s':>15s} {'x of it':>8s}"
        )
        for name, seconds, keys_before in (
            ("zsl (whole query)", per["workflow", "zsl"], 1),
            ("icl (query tokens)", query_s, len(context)),
        ):
            flops, mm_s = matmul_seconds(example_products(model, q, keys_before, args.batch_size))
            flops, mm_s = flops / args.batch_size, mm_s / args.batch_size
            print(
                f"{name:24s} {flops / 1e9:9.2f} {seconds:10.4f} {flops / seconds / 1e9:8.1f} {flops / mm_s / 1e9:15.1f} "
                f"{mm_s / seconds:6.2f} {mm_s:15.4f} {seconds / mm_s:7.2f}x"
            )
        if bad:
            raise SystemExit(f"records disagree beyond {TOLERANCE:g}: {', '.join(bad)}")


if __name__ == "__main__":
    main()
