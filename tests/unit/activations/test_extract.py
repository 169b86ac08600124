"""One extraction job end to end on tiny models: batching, the shared prefix, the cache."""

import numpy as np
import pandas as pd
import pytest
import torch

from icl_gd.activations import cache, capture, extract
from icl_gd.common import checksums
from icl_gd.config import resolve as cfg
from icl_gd.data import prompts, splits
from tests.conftest import run_extraction  # noqa: E402

SPEC = cfg.task_spec({"tasks": {"sst2": {}}}, "sst2")
WORDS = ["good", "bad", "dull", "fun", "odd", "warm", "slow", "loud"]


def rows(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sentences = [" ".join(rng.choice(WORDS, size=rng.integers(1, 5))) for _ in range(n)]
    return pd.DataFrame({"sentence": sentences, "label": rng.integers(0, 2, n), "example_id": np.arange(n)})


@pytest.mark.parametrize("arch", ["gpt2", "opt", "xglm", "llama", "neox"])
def test_shared_prefix_gives_the_full_sequence_results(arch, load_tiny, tokenizer, monkeypatch):
    model = load_tiny(arch)
    rec = capture.attach(model)
    label_ids = prompts.label_token_ids(tokenizer, SPEC)
    queries = prompts.build_queries(tokenizer, SPEC, rows(7, 0), label_ids, "label_word")
    context = prompts.icl_context(tokenizer, prompts.demonstration_ids(tokenizer, SPEC, rows(2, 1), label_ids))
    prefix_calls = []

    def counted(query, key, value, prefix_keys, *args):
        prefix_calls.append(prefix_keys.shape[0])
        return attend(query, key, value, prefix_keys, *args)

    attend = capture._prefix_attention
    monkeypatch.setattr(capture, "_prefix_attention", counted)
    cached = extract.evaluate(model, rec, context, queries, label_ids, batch_size=3, reuse_prefix=True)
    # every layer of each of the 3 batches attends to the one stored copy of the context
    assert prefix_calls == [1] * 2 * 3
    full = extract.evaluate(model, rec, context, queries, label_ids, batch_size=4, reuse_prefix=False)
    for key in ("label_logprobs", "attn_out", "attn_scores", "context_scores"):
        np.testing.assert_allclose(cached[key], full[key], rtol=1e-4, atol=1e-5, err_msg=key)
    # queries of different lengths: NaN exactly past each one's own query length
    lengths = cached["query_len"]
    assert len(set(lengths)) > 1
    valid = ~np.isnan(cached["attn_scores"][:, 0, 0])
    assert np.array_equal(valid.sum(1), lengths)


def test_the_cache_keeps_the_query_keys_per_head_and_the_context_keys_summed_over_heads(load_tiny, tokenizer):
    """Against the recorder's full score rows of each sequence, run one at a time: the query part
    (from the first query token to the recorded one) per head, NaN after it; the context part
    (<s> and demonstrations) summed over heads."""
    model = load_tiny("llama")
    rec = capture.attach(model)
    label_ids = prompts.label_token_ids(tokenizer, SPEC)
    queries = prompts.build_queries(tokenizer, SPEC, rows(5, 3), label_ids, "label_word")
    context = prompts.icl_context(tokenizer, prompts.demonstration_ids(tokenizer, SPEC, rows(2, 1), label_ids))
    out = extract.evaluate(model, rec, context, queries, label_ids, batch_size=5, reuse_prefix=True)
    n_ctx = len(context)
    for i, query in enumerate(queries):
        ids = torch.tensor([context + query.ids])
        with torch.no_grad(), rec.record(torch.tensor([n_ctx + query.record_offset])):
            model.base_model(input_ids=ids)
            _, raw = rec.stacked()  # (1, layers, heads, keys)
        raw = raw[0].numpy()
        q_len = query.record_offset + 1
        np.testing.assert_allclose(
            out["attn_scores"][i, :, :, :q_len], raw[:, :, n_ctx : n_ctx + q_len], rtol=1e-4, atol=1e-5
        )
        assert np.isnan(out["attn_scores"][i, :, :, q_len:]).all()
        np.testing.assert_allclose(out["context_scores"][i], raw[:, :, :n_ctx].sum(axis=1), rtol=1e-4, atol=1e-4)


def test_batching_does_not_change_results(load_tiny, tokenizer):
    model = load_tiny("gpt2")
    rec = capture.attach(model)
    label_ids = prompts.label_token_ids(tokenizer, SPEC)
    queries = prompts.build_queries(tokenizer, SPEC, rows(6, 2), label_ids, "answer")
    one = extract.evaluate(model, rec, [tokenizer.bos_token_id], queries, label_ids, batch_size=1)
    many = extract.evaluate(model, rec, [tokenizer.bos_token_id], queries, label_ids, batch_size=6)
    np.testing.assert_allclose(one["attn_out"], many["attn_out"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(one["label_logprobs"], many["label_logprobs"], rtol=1e-4, atol=1e-5)


def _config(**overrides):
    base = {
        "tasks": {"sst2": {}},
        "methods": {"gd": {"kind": "gd", "lr": 0.5}},
        "k": 3,
        "max_eval": 5,
        "record_position": "label_word",
        "ft_demos": "all",
        "dtype": "float32",
        "cache_dtype": "float32",
        "batch_size": 2,
        "device": "cpu",
        "min_true_k": 1,
    }
    return {**base, **overrides}


def tiny_job(model_dir, train, evaluation) -> dict:
    """The arguments of one extraction job of a tiny model on sst2 (seed 2), but for its setting
    and paths out."""
    return dict(
        model_name="tiny",
        variant="trained",
        task="sst2",
        seed=2,
        model_dir=str(model_dir),
        train_path=str(train),
        eval_path=str(evaluation),
    )


@pytest.fixture
def task_files(tmp_path):
    train, evaluation = tmp_path / "train.parquet", tmp_path / "eval.parquet"
    rows(12, 3).to_parquet(train)
    rows(9, 4).to_parquet(evaluation)
    return str(train), str(evaluation)


def test_run_writes_caches_that_identify_the_run(tmp_path, model_dirs, task_files):
    """The compact layout (the default): ZSL's values, and the other settings' changes from them."""
    torch.manual_seed(0)
    common = tiny_job(model_dirs["gpt2"], *task_files)
    config = _config(cache_dtype="compact")
    reference = str(tmp_path / "zsl.arrow")
    run_extraction(config, setting="zsl", out_path=reference, **common)
    with pytest.raises(ValueError, match="change from the zsl cache"):
        run_extraction(config, setting="icl", out_path=str(tmp_path / "icl.arrow"), **common)
    run_extraction(config, setting="icl", out_path=str(tmp_path / "icl.arrow"), reference_path=reference, **common)
    run_extraction(
        config,
        setting="gd",
        out_path=str(tmp_path / "gd.arrow"),
        reference_path=reference,
        train_log_path=str(tmp_path / "gd_log.parquet"),
        **common,
    )
    zsl, icl, gd = (cache.read_cache(tmp_path / f"{s}.arrow") for s in ("zsl", "icl", "gd"))
    assert zsl.n_examples == 5 and zsl.meta["setting"] == "zsl" and gd.meta["lr"] == 0.5
    assert not zsl.is_change and icl.is_change and gd.is_change and zsl.attn_out.dtype == np.float32
    assert icl.meta["reference"]["cache_id"] == gd.meta["reference"]["cache_id"] == zsl.meta["cache_id"]
    assert icl.meta["demo_ids"] == gd.meta["demo_ids"] and "demo_ids" not in zsl.meta  # ZSL has none
    assert (gd.meta["method"], gd.meta["kind"]) == ("gd", "gd")
    assert 0 < icl.meta["true_k"] <= 3  # the 64-token context leaves room for few demonstrations
    assert icl.meta["n_context"] > zsl.meta["n_context"] == 1
    assert np.array_equal(zsl.example_id, gd.example_id)
    # the query keys are the same in every setting, the attention outputs are not
    np.testing.assert_array_equal(zsl.query_len, icl.query_len)
    np.testing.assert_array_equal(np.isnan(zsl.score_rows()), np.isnan(icl.score_rows()))
    assert not np.allclose(zsl.outputs(), icl.outputs()) and not np.allclose(zsl.outputs(), gd.outputs())
    # the same run in float32: the compact cache's values to the change's three digits
    run_extraction(_config(), setting="gd", out_path=str(tmp_path / "gd32.arrow"), **common)
    full = cache.read_cache(tmp_path / "gd32.arrow")
    change = full.outputs() - zsl.outputs()
    assert np.abs(gd.outputs() - full.outputs()).max() <= 2**-11 * np.abs(change).max() + 1e-6
    meta, log = cache.read_train_log(tmp_path / "gd_log.parquet")
    assert meta["n_train_steps"] == 3 and log["grad_norm"].shape == (3, 2) and not log["skipped"].any()


def test_run_rejects_a_query_longer_than_the_context(tmp_path, model_dirs):
    long = pd.DataFrame({"sentence": [" ".join(WORDS * 20)], "label": [0], "example_id": [0]})
    long.to_parquet(tmp_path / "eval.parquet")
    rows(12, 3).to_parquet(tmp_path / "train.parquet")
    with pytest.raises(prompts.PromptError, match="longest evaluation prompt"):
        run_extraction(
            _config(),
            model_name="tiny",
            variant="trained",
            task="sst2",
            seed=2,
            setting="zsl",
            model_dir=str(model_dirs["gpt2"]),
            train_path=str(tmp_path / "train.parquet"),
            eval_path=str(tmp_path / "eval.parquet"),
            out_path=str(tmp_path / "zsl.arrow"),
        )
    assert not (tmp_path / "zsl.arrow").exists()


def test_out_of_memory_halves_the_batch_and_keeps_the_results(load_tiny, tokenizer, monkeypatch):
    model = load_tiny("gpt2")
    rec = capture.attach(model)
    label_ids = prompts.label_token_ids(tokenizer, SPEC)
    queries = prompts.build_queries(tokenizer, SPEC, rows(7, 5), label_ids, "answer")
    reference = extract.evaluate(model, rec, [tokenizer.bos_token_id], queries, label_ids, batch_size=8)
    forward, sizes = model.base_model.forward, []

    def small_memory(input_ids, **kwargs):  # a GPU that fits at most two sequences
        sizes.append(input_ids.shape[0])
        if input_ids.shape[0] > 2:
            raise torch.cuda.OutOfMemoryError("simulated")
        return forward(input_ids=input_ids, **kwargs)

    monkeypatch.setattr(model.base_model, "forward", small_memory)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    backed_off = extract.evaluate(model, rec, [tokenizer.bos_token_id], queries, label_ids, batch_size=8)
    assert sizes[:3] == [7, 4, 2] and max(sizes[3:]) <= 2
    for key in ("attn_out", "label_logprobs", "attn_scores"):
        np.testing.assert_allclose(backed_off[key], reference[key], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("arch, setting", [("gpt2", "gd"), ("xglm", "gd"), ("xglm", "icl")])
def test_two_runs_with_one_seed_give_identical_caches(tmp_path, model_dirs, task_files, arch, setting):
    train, evaluation = task_files
    common = dict(
        model_name="tiny",
        variant="trained",
        task="sst2",
        seed=3,
        model_dir=str(model_dirs[arch]),
        train_path=train,
        eval_path=evaluation,
        setting=setting,
    )
    for name in ("a", "b"):
        run_extraction(_config(), out_path=str(tmp_path / f"{name}.arrow"), **common)
    a, b = cache.read_cache(tmp_path / "a.arrow"), cache.read_cache(tmp_path / "b.arrow")
    assert a.meta.pop("cache_id") != b.meta.pop("cache_id")  # each cache its own id
    assert a.meta == b.meta
    for key in ("example_id", "pred", "label_logprobs", "attn_out", "attn_scores", "context_scores"):
        assert np.array_equal(getattr(a, key), getattr(b, key), equal_nan=True), key


def test_default_batch_size_is_larger_on_a_gpu():
    assert extract.evaluation_batch_size(None, torch.device("cuda")) == 128
    assert extract.evaluation_batch_size(None, torch.device("cpu")) == 16
    assert extract.evaluation_batch_size(5, torch.device("cuda")) == 5


@pytest.mark.parametrize("separator", ["eos", "newline"])
def test_a_cache_says_how_to_rebuild_every_token_sequence_it_was_computed_from(
    tmp_path, model_dirs, task_files, separator
):
    """From the cache's metadata, the data files and the tokenizer alone (no config, no code of the
    extraction): the ICL context and each query, rebuilt, have the recorded lengths, and running
    them reproduces the recorded attention output. With either separator (demo_separator)."""
    from icl_gd.models import loading

    train, evaluation = task_files
    config = _config(methods={"gd": {"kind": "gd", "lr": 0.5, "demo_labels": "switched"}}, demo_separator=separator)
    run_extraction(
        config,
        task="sst2",
        seed=3,
        setting="gd",
        model_name="tiny",
        variant="trained",
        model_dir=str(model_dirs["gpt2"]),
        train_path=train,
        eval_path=evaluation,
        out_path=str(tmp_path / "gd.arrow"),
    )
    run_extraction(
        config,
        task="sst2",
        seed=3,
        setting="icl",
        model_name="tiny",
        variant="trained",
        model_dir=str(model_dirs["gpt2"]),
        train_path=train,
        eval_path=evaluation,
        out_path=str(tmp_path / "icl.arrow"),
    )
    icl, gd = cache.read_cache(tmp_path / "icl.arrow"), cache.read_cache(tmp_path / "gd.arrow")
    meta = icl.meta
    line_end = meta["tokenizer"]["line_end_ids"]
    assert meta["demo_separator"] == gd.meta["demo_separator"] == separator and "line_end" in meta["prompt_rules"]
    tokenizer = loading.load_tokenizer(meta["tokenizer"]["model_dir"])
    assert (
        tokenizer.bos_token_id == meta["tokenizer"]["bos_token_id"]
        and len(tokenizer) == meta["tokenizer"]["vocab_size"]
    )
    assert meta["data"]["train_sha256"] == checksums.sha256_of(train) and meta["data"]["splits"] == {
        "train": "train",
        "eval": "validation",
    }
    assert set(meta["prompt_rules"]) >= {"example_id", "eval_set", "demonstrations", "prompt", "icl", "finetuning"}

    newline = tokenizer.encode("a\n", add_special_tokens=False)[len(tokenizer.encode("a", add_special_tokens=False)) :]
    assert line_end == ([tokenizer.eos_token_id] if separator == "eos" else newline)

    def encode(row):  # the prompt rule: template, newlines as the line end
        text = meta["template"].format(**{k: row[k] for k in ("sentence",)})
        ids = []
        for i, line in enumerate(text.split("\n")):
            ids += (line_end if i else []) + tokenizer.encode(line, add_special_tokens=False)
        return ids

    train_rows = pd.read_parquet(train).set_index("example_id")
    eval_rows = pd.read_parquet(evaluation).set_index("example_id")
    context = [meta["tokenizer"]["bos_token_id"]]
    for demo_id, label in list(zip(meta["demo_ids"], meta["demo_label_ids"]))[: meta["true_k"]]:
        context += encode(train_rows.loc[demo_id]) + [meta["label_ids"][label], *line_end]
    assert len(context) == meta["n_context"]
    queries = [encode(eval_rows.loc[i]) + [meta["label_ids"][0]] for i in icl.example_id]  # record_position label_word
    assert meta["record_position"] == "label_word" and [len(q) for q in queries] == list(icl.query_len)
    # the finetuning run says which labels it trained on (switched) and how many steps
    assert gd.meta["demo_labels"] == "switched" and gd.meta["n_train_steps"] == len(gd.meta["demo_ids"]) == 3
    assert all(a != b for a, b in zip(gd.meta["demo_label_ids"], train_rows.loc[gd.meta["demo_ids"], "label"]))
    model = loading.load_model(meta["tokenizer"]["model_dir"], device="cpu")
    rec = capture.attach(model)
    ids = torch.tensor([context + queries[0]])
    with torch.no_grad(), rec.record(torch.tensor([ids.shape[1] - 1])):
        model.base_model(input_ids=ids)
        attn_out, _ = rec.stacked()
    np.testing.assert_allclose(attn_out[0].numpy(), icl.attn_out[0], rtol=1e-4, atol=1e-5)
    # the content-free queries (calibration): every text field one of the texts, in the same context
    free = meta["content_free"]
    assert free["texts"] == ["N/A", "", "[MASK]"] and "content_free" not in gd.meta
    for text, recorded in zip(free["texts"], free["label_logprobs"]):
        query = encode({"sentence": text})
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([context + query])).logits[0, -1]
        expected = torch.log_softmax(logits.float(), -1)[meta["label_ids"]].numpy()
        np.testing.assert_allclose(recorded, expected, rtol=1e-4, atol=1e-5)


def test_a_run_where_no_demonstration_fits_stops_and_says_why(tmp_path, model_dirs, task_files):
    """The prompts fit the 64-token context, but beside the longest one no demonstration does."""
    train, _ = task_files
    long = rows(4, 5)
    long.loc[0, "sentence"] = " ".join(WORDS * 5)
    long.to_parquet(tmp_path / "eval.parquet")
    common = dict(
        task="sst2",
        seed=2,
        setting="icl",
        model_name="tiny",
        variant="trained",
        model_dir=str(model_dirs["gpt2"]),
        train_path=train,
        eval_path=str(tmp_path / "eval.parquet"),
    )
    with pytest.raises(
        prompts.PromptError,
        match=r"'sst2', seed 2: only 0 of k = 3 demonstrations fit \(min_true_k = 1\)"
        r".*longest evaluation prompt is \d+ tokens and the model's context 64",
    ):
        run_extraction(_config(), out_path=str(tmp_path / "icl.arrow"), **common)
    assert not (tmp_path / "icl.arrow").exists()
    run_extraction(_config(min_true_k=0), out_path=str(tmp_path / "icl.arrow"), **common)  # on purpose
    assert cache.read_meta(tmp_path / "icl.arrow")["true_k"] == 0


def test_development_queries_are_train_rows_that_no_seed_takes_as_a_demonstration(tmp_path, model_dirs, task_files):
    """evaluate_on: development: ZSL and ICL read the same held-out train rows, none of them among any
    of the task's seeds' first k demonstrations (n_seeds notwithstanding), and the caches say so."""
    train, evaluation = task_files
    config = _config(tasks={"sst2": {"seeds": [2, 3]}}, n_seeds=1, evaluate_on="development")
    common = dict(model_name="tiny", variant="trained", task="sst2", seed=2, model_dir=str(model_dirs["gpt2"]))
    for setting in ("zsl", "icl"):
        run_extraction(
            config,
            setting=setting,
            train_path=train,
            eval_path=evaluation,
            out_path=str(tmp_path / f"{setting}.arrow"),
            **common,
        )
    zsl, icl = cache.read_cache(tmp_path / "zsl.arrow"), cache.read_cache(tmp_path / "icl.arrow")
    train_ids = set(pd.read_parquet(train)["example_id"])
    taken = set()
    for seed in (2, 3):
        taken |= set(splits.select_demos(pd.read_parquet(train), seed, 3, 0)["example_id"])
    assert list(zsl.example_id) == list(icl.example_id) and len(icl.example_id) == 5
    assert set(icl.example_id) <= train_ids - taken and not set(icl.example_id) & set(icl.meta["demo_ids"])
    assert icl.meta["queries"] == zsl.meta["queries"] == {"split": "development", "seeds": [2, 3], "k": 3}
    # the protocol's evaluation split: the spec as it was before the key, the cache says which split
    run_extraction(
        _config(), setting="zsl", train_path=train, eval_path=evaluation, out_path=str(tmp_path / "e.arrow"), **common
    )
    assert cache.read_cache(tmp_path / "e.arrow").meta["queries"] == {"split": "evaluation"}


def test_icl_on_novel_label_words_reads_the_held_out_pool_and_keeps_the_gold(tokenizer, task_files):
    """Setting icl_novel: each class's label word drawn from the tokenizer's held-out pool (never a
    protocol word, never a pool-trained reader's training label), the same for a task and seed on
    every call and another at another seed; the demonstrations end in them, the queries are read
    among them, and their gold is ZSL's."""
    from icl_gd.data import label_pools
    from icl_gd.planning import plan

    config = _config()
    held_out = set(label_pools.label_pools(tokenizer).held_out)

    def prepared(setting: str, seed: int = 2):
        return extract.sequences_of(plan.run_spec(config, "sst2", setting, seed), tokenizer, 512, *task_files)

    zsl, icl, novel = prepared("zsl"), prepared("icl"), prepared(cfg.NOVEL_SETTING)
    assert set(novel.label_ids) <= held_out and len(set(novel.label_ids)) == 2
    assert not set(novel.label_ids) & set(icl.label_ids)
    assert list(novel.task_spec.label_words) == [tokenizer.decode([i]).strip() for i in novel.label_ids]
    assert [q.gold for q in novel.queries] == [q.gold for q in zsl.queries]
    assert [d[-1] for d in novel.demo_ids] == [novel.label_ids[int(c)] for c in novel.demos["label"]]
    assert novel.demos["example_id"].tolist() == icl.demos["example_id"].tolist()  # the same demonstrations
    assert prepared(cfg.NOVEL_SETTING).label_ids == novel.label_ids
    assert any(prepared(cfg.NOVEL_SETTING, seed).label_ids != novel.label_ids for seed in (3, 4, 5))
