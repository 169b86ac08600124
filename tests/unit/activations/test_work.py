"""The count of a model job's work (icl_gd.activations.work) against hand counts on a tiny shape,
and the shape read from a real model folder."""

from __future__ import annotations

import os
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from icl_gd.activations import work

# 2 layers of width 8, 2 heads, 10 words; 100 parameters in the blocks' linear layers
SHAPE = work.Shape(n_layers=2, d_model=8, n_heads=2, vocab=10, block_params=100)


def test_a_forward_counts_blocks_attention_and_head():
    # blocks 2*100*3, attention 4*2*8*6 (3 tokens: 6 causal pairs), head 2*8*10 on one row
    assert work.forward_flops(SHAPE, 3, work.pairs(3), 1) == 600 + 384 + 160
    assert work.pairs(1) == 1 and work.pairs(4) == 10


def test_zsl_runs_each_query_with_its_bos_and_icl_the_prefix_once():
    zsl = work.eval_work(SHAPE, [2, 3], prefix=1)  # each query + BOS: 3 and 4 tokens
    assert zsl == work.forward_flops(SHAPE, 3, 6, 1) + work.forward_flops(SHAPE, 4, 10, 1)
    icl = work.eval_work(SHAPE, [2], prefix=5)  # the prefix alone, then the query against 5 + its own keys
    assert icl == work.forward_flops(SHAPE, 5, 15, 0) + work.forward_flops(SHAPE, 2, 3 + 2 * 5, 1)


def test_a_training_step_per_kind():
    forward = work.forward_flops(SHAPE, 4, 10, 4)  # the head on every position
    assert work.train_step_flops(SHAPE, 4, "gd") == 2 * forward
    assert work.train_step_flops(SHAPE, 4, "linearized") == 3 * forward
    blocks = work.forward_flops(SHAPE, 4, 10, 0)
    assert work.train_step_flops(SHAPE, 4, "lcgd") == 2 * blocks + 2 * (2 * 8 * 10 * 2 * 3)


def _sequences(queries, context=(1,), demos=()):
    return SimpleNamespace(
        queries=[SimpleNamespace(ids=list(range(q))) for q in queries],
        context=list(context),
        demo_ids=[list(range(d)) for d in demos],
        true_k=len(demos),
    )


def test_a_job_is_its_evaluation_and_its_training():
    zsl = work.job_work(SHAPE, {"setting": "zsl"}, _sequences([2, 3]))
    assert (zsl.path, zsl.examples, zsl.longest, zsl.train_flops) == ("zsl", 2, 4, 0)
    icl = work.job_work(SHAPE, {"setting": "icl"}, _sequences([2, 3], context=range(6)))
    assert (icl.path, icl.prefix, icl.longest) == ("icl", 6, 9)
    assert icl.eval_flops == work.eval_work(SHAPE, [2, 3], 6)
    gd = work.job_work(SHAPE, {"setting": "gd", "kind": "gd", "ft_demos": "all"}, _sequences([2], demos=[3, 5]))
    assert gd.path == "gd" and gd.eval_flops == work.eval_work(SHAPE, [2], 1)
    assert gd.train_flops == work.train_step_flops(SHAPE, 4, "gd") + work.train_step_flops(SHAPE, 6, "gd")
    assert gd.longest == 6 and gd.flops == gd.eval_flops + gd.train_flops


def test_pretraining_is_its_steps_of_eight_sequences():
    pretraining = work.pretrain_work(SHAPE, steps=10, length=4)
    assert pretraining.train_flops == 10 * 3 * work.forward_flops(SHAPE, 32, 8 * 10, 32)


def test_the_shape_of_a_model_folder_counts_its_block_linears(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_layer=3, n_embd=16, n_head=2, vocab_size=50, n_positions=32)).save_pretrained(tmp_path)
    shape = work.shape_of(str(tmp_path))
    # per layer: c_attn 16x48, attn c_proj 16x16, c_fc 16x64, mlp c_proj 64x16 = 12 x 16^2
    assert shape == work.Shape(n_layers=3, d_model=16, n_heads=2, vocab=50, block_params=3 * 12 * 16 * 16)
    assert work.shape_of(str(tmp_path), "bfloat16").dtype_bytes == 2
