"""Extraction speed: examples/s per setting, the shared-prefix ICL path against the naive one.

    python benchmarks/extraction_speed.py                # GPT-2-small shape, CPU, float32
    python benchmarks/extraction_speed.py --arch xglm    # the same shape, the reference's architecture
    python benchmarks/extraction_speed.py --shape 1.3b --dtype bfloat16 --device cuda

A randomly initialised model of the chosen shape and architecture (GPT-2, or XGLM, whose
attention the recorder re-routes; nothing is downloaded), random token ids in
place of text: ``--prefix-tokens`` of demonstrations and ``--query-tokens`` per query, the shape
of the reference's 32-demonstration prompts. Prints examples/s for ZSL, cached ICL, naive ICL
(every example runs the whole prefix, as the reference did) and finetuning steps/s for GD and
LCGD, with the fraction of the hardware's peak FLOP/s where it is known.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from _shared import timed  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, XGLMConfig, XGLMForCausalLM  # noqa: E402

from icl_gd.activations import capture, training  # noqa: E402
from icl_gd.activations.extract import evaluate  # noqa: E402
from icl_gd.data.prompts import Query  # noqa: E402
from icl_gd.models.loading import DTYPES, pick_device  # noqa: E402

SHAPES = {  # (layers, width, heads, context)
    "tiny24": (24, 64, 4, 2048),  # the 1.3B's depth at a small width: its operations, counted on a CPU
    "gpt2-small": (12, 768, 12, 2048),
    "1.3b": (24, 2048, 32, 2048),  # the fairseq dense 1.3B (XGLM) shape
}
# Dense peak FLOP/s by device name fragment and dtype (vendor figures, no sparsity).
PEAK_FLOPS = {
    ("H100", torch.bfloat16): 989e12,
    ("H100", torch.float16): 989e12,
    ("H100", torch.float32): 67e12,
    ("H200", torch.bfloat16): 989e12,
    ("H200", torch.float16): 989e12,
    ("H200", torch.float32): 67e12,
    ("A100", torch.bfloat16): 312e12,
    ("A100", torch.float16): 312e12,
    ("A100", torch.float32): 19.5e12,
}


def build(shape: str, arch: str, dtype: torch.dtype, device: torch.device):
    layers, width, heads, context = SHAPES[shape]
    torch.manual_seed(0)
    if arch == "xglm":
        config = XGLMConfig(
            vocab_size=50261,
            d_model=width,
            num_layers=layers,
            attention_heads=heads,
            ffn_dim=4 * width,
            max_position_embeddings=context,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
        )
        model = XGLMForCausalLM(config)
    else:
        config = GPT2Config(
            n_layer=layers,
            n_embd=width,
            n_head=heads,
            n_positions=context,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
        model = GPT2LMHeadModel(config)
    return model.to(device=device, dtype=dtype).eval()


def forward_flops(model, tokens: int, attended: int) -> float:
    """2 x (non-embedding parameters) per token, plus q.k and p.v over the attended keys."""
    n = sum(p.numel() for name, p in model.named_parameters() if "wte" not in name and "embed_tokens" not in name)
    layers, width = model.config.num_hidden_layers, model.config.hidden_size
    return 2.0 * n * tokens + 4.0 * layers * width * attended


def peak(device: torch.device, dtype: torch.dtype) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for (frag, dt), v in PEAK_FLOPS.items() if frag in name and dt == dtype), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="gpt2-small")
    parser.add_argument("--arch", choices=("gpt2", "xglm"), help="default: xglm for 1.3b, else gpt2")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--prefix-tokens", type=int, default=1400)
    parser.add_argument("--query-tokens", type=int, default=40)
    parser.add_argument("--examples", type=int, default=64, help="examples for ZSL and cached ICL")
    parser.add_argument("--naive-examples", type=int, default=4, help="examples for naive ICL")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--train-steps", type=int, default=8)
    args = parser.parse_args()

    device, dtype = pick_device(args.device), DTYPES[args.dtype]
    arch = args.arch or ("xglm" if args.shape == "1.3b" else "gpt2")
    model = build(args.shape, arch, dtype, device)
    rec = capture.attach(model)
    gen = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size

    def tokens(n):
        return torch.randint(5, vocab, (n,), generator=gen).tolist()

    context = [0] + tokens(args.prefix_tokens - 1)
    queries = [
        Query(i, 0, tokens(args.query_tokens), args.query_tokens - 2, args.query_tokens - 1)
        for i in range(args.examples)
    ]
    labels = [10, 11]
    evaluate(model, rec, context, queries[:2], labels, batch_size=2)  # warm-up

    q, p = args.query_tokens, args.prefix_tokens
    rows = []

    def run(name, n, fn, flops_per_example):
        seconds, _ = timed(fn, device=device)
        rows.append((name, n / seconds, flops_per_example * n / seconds))

    run(
        "zsl",
        args.examples,
        lambda: evaluate(model, rec, [0], queries, labels, batch_size=args.batch_size),
        forward_flops(model, q, q * (q + 1) / 2),
    )
    run(
        "icl, shared prefix",
        args.examples,
        lambda: evaluate(model, rec, context, queries, labels, batch_size=args.batch_size, reuse_prefix=True),
        forward_flops(model, q, q * p + q * (q + 1) / 2) + forward_flops(model, p, p * (p + 1) / 2) / args.examples,
    )
    naive = queries[: args.naive_examples]
    run(
        "icl, naive (full sequence)",
        len(naive),
        lambda: evaluate(
            model, rec, context, naive, labels, batch_size=min(args.batch_size, len(naive)), reuse_prefix=False
        ),
        forward_flops(model, p + q, (p + q) * (p + q + 1) / 2),
    )
    demo = [0] + tokens(q)
    for kind in ("gd", "lcgd"):
        copy = build(args.shape, arch, dtype, device)
        copy.load_state_dict(model.state_dict())
        capture.attach(copy)  # the extraction finetunes the attached model
        # the first backward pass of a process loads its CUDA kernels and autotunes: not a step's cost
        training.finetune(copy, [demo] * 2, lr=1e-4, kind=kind)
        run(
            f"finetune {kind} (steps)",
            args.train_steps,
            lambda copy=copy, kind=kind: training.finetune(copy, [demo] * args.train_steps, lr=1e-4, kind=kind),
            3 * forward_flops(copy, q + 1, (q + 1) * (q + 2) / 2),
        )
        del copy

    top = peak(device, dtype)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"{args.shape} {arch} model, {args.dtype}, {where}; prefix {p} tokens, queries {q} tokens, batch {args.batch_size}"
    )
    print(f"{'setting':28s} {'per s':>10s} {'TFLOP/s':>9s} {'of peak':>8s}")
    for name, rate, flops in rows:
        frac = f"{flops / top:8.1%}" if top else f"{'n/a':>8s}"
        print(f"{name:28s} {rate:10.2f} {flops / 1e12:9.3f} {frac}")
    # The shared prefix runs once per seed however many examples follow. Split the cached path's
    # time into prefix and per-example parts from two runs of the same code at two sizes, rather
    # than timing the prefix on its own: a separate timing drifts with the machine's load and can
    # make the per-example part look impossibly small.
    few = queries[: args.batch_size]
    t_few = min(
        timed(evaluate, model, rec, context, few, labels, batch_size=args.batch_size, reuse_prefix=True, device=device)[
            0
        ]
        for _ in range(2)
    )
    t_all = args.examples / rows[1][1]
    query_s = max(t_all - t_few, 1e-9) / max(args.examples - len(few), 1)
    prefix_s = max(t_few - len(few) * query_s, 0.0)
    naive_s = 1 / rows[2][1]
    print(
        f"shared prefix alone: {prefix_s:.2f} s; per ICL example after it: {query_s * 1e3:.1f} ms; "
        f"naive per example: {naive_s * 1e3:.0f} ms"
    )
    for n in (args.examples, 2000):
        speedup = naive_s / (query_s + prefix_s / n)
        print(
            f"shared-prefix ICL over {n} examples is {speedup:.1f}x faster per example than the naive path "
            f"(the token ratio bounds it near {(p + q) / q:.0f}x)"
        )


if __name__ == "__main__":
    main()
