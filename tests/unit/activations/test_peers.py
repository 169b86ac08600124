"""The peers of benchmarks/against_peers.py record what the workflow's extraction records (issue 40).

Every installed peer (TransformerLens only with the ``peers`` extra) runs ZSL and ICL prompts on
tiny models of the architectures the benchmark uses, and must agree with ``extract.evaluate`` to a
relative error of 1e-4, the benchmark's own bar; so that neither the benchmark nor its peers rot.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icl_gd.activations import peers
from icl_gd.data.prompts import Query

TOLERANCE = 1e-4


def prompts_of(tokenizer, n_queries: int = 5):
    gen = torch.Generator().manual_seed(7)
    vocab = len(tokenizer)
    context = [tokenizer.bos_token_id] + torch.randint(5, vocab, (30,), generator=gen).tolist()
    queries = []
    for i in range(n_queries):  # lengths differ, so that batches pad
        ids = torch.randint(5, vocab, (4 + 3 * i,), generator=gen).tolist()
        queries.append(Query(example_id=i, gold=i % 2, ids=ids, answer_offset=len(ids) - 2, record_offset=len(ids) - 1))
    return context, queries, [5, 6]


@pytest.mark.parametrize("arch", ["gpt2", "llama", "neox"])
def test_every_installed_peer_records_what_the_workflow_records(arch, model_dirs, tokenizer):
    context, queries, label_ids = prompts_of(tokenizer)
    bos = [tokenizer.bos_token_id]
    installed = [peer for peer in peers.PEERS if peers.missing(peer) is None]
    assert {"workflow", "hooks", "reference_loop"} <= set(installed)
    expected = {}
    for peer in installed:
        loaded = peers.load(model_dirs[arch], peer)
        for setting, ctx in (("zsl", bos), ("icl", context)):
            out = peers.record(peer, loaded, ctx, queries, label_ids, batch_size=2)
            assert set(out) == set(peers.RECORDS)
            if peer == "workflow":
                expected[setting] = out
                continue
            errors = peers.agreement(out, expected[setting])
            assert max(errors.values()) <= TOLERANCE, (peer, setting, errors)
    # the records are not trivially equal: ICL's context changes every one of them
    assert peers.relative_error(expected["icl"]["attn_out"], expected["zsl"]["attn_out"]) > 1e-2


def test_agreement_catches_a_peer_that_records_something_else(model_dirs, tokenizer):
    context, queries, label_ids = prompts_of(tokenizer, n_queries=3)
    out = peers.record(
        "workflow", peers.load(model_dirs["llama"], "workflow"), context, queries, label_ids, batch_size=3
    )
    shifted = {key: value.copy() for key, value in out.items()}
    shifted["attn_scores"][0, 0, 0, 0] += 1.0  # one score of one head
    errors = peers.agreement(shifted, out)
    assert errors["attn_scores"] > TOLERANCE and errors["attn_out"] == 0.0
    longer = {
        **out,
        "attn_scores": np.concatenate([out["attn_scores"], np.zeros_like(out["attn_scores"][..., :1])], -1),
    }
    assert peers.agreement(longer, out)["attn_scores"] == float("inf")  # a score where the query has no key


def test_a_missing_peer_says_what_to_install(monkeypatch):
    real = peers.importlib.util.find_spec
    monkeypatch.setattr(
        peers.importlib.util, "find_spec", lambda name: None if name == "transformer_lens" else real(name)
    )
    assert "pip install -e '.[peers]'" in peers.missing("transformer_lens")
    assert peers.missing("hooks") is None
    with pytest.raises(RuntimeError, match=r"\.\[peers\]"):
        peers.load("unused", "transformer_lens")
    with pytest.raises(ValueError, match="unknown peer"):
        peers.missing("nnsight")
