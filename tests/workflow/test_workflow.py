"""The whole workflow on a tiny config, in a temporary directory: outputs, values and reruns."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from icl_gd.activations import cache
from icl_gd.common import benchmark, frames
from icl_gd.config import resolve as cfg
from icl_gd.metrics import claim_definitions, formulas, scoring

REPO = Path(__file__).resolve().parents[2]
# what a clone holds that the workflow runs from (the end-to-end test runs in a copy of it, as a
# user runs in their clone, so that it can edit the code and move the whole run)
CHECKOUT = ("Snakefile", "config.yaml", "workflow", "src", "profiles", "envs", "docs", "models")

TINY = {
    "models": {
        "tiny": {
            "source": "builtin",
            "n_layer": 2,
            "n_embd": 32,
            "n_head": 2,
            "n_positions": 512,
            "vocab_size": 600,
            "pretrain_steps": 10,
            "pretrain_len": 64,
            # the default model's shipped folder: another recipe's, so the build trains, having read it
            "weights": "models/tiny",
        },
    },
    "variants": {"trained": ["gd", "lcgd"], "untrained": ["gd"]},
    "methods": {"gd": {"kind": "gd"}, "lcgd": {"kind": "lcgd"}},
    "tasks": {"sst2": {"source": "synthetic"}, "cb": {"source": "synthetic"}},
    "n_seeds": 2,
    "k": 4,
    "max_eval": 12,
    "batch_size": 5,
    "synthetic": {"n_train": 40, "n_eval": 20},
}


def checkout(folder: Path) -> Path:
    """A copy of the repository's workflow and package in ``folder``, as a user's clone."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in CHECKOUT:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, folder / name)
    return folder


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    snakefile = workdir / "Snakefile" if (workdir / "Snakefile").exists() else REPO / "Snakefile"
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(snakefile),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def jobs_planned(workdir: Path, *args: str) -> dict[str, int]:
    """Rule -> job count of a dry run."""
    out = snakemake(workdir, "-n", "--cores", "1", *args).stdout
    counts = {}
    lines = out.splitlines()
    if "job" in "".join(lines) and "total" in out:
        start = next(i for i, line in enumerate(lines) if line.startswith("job "))
        for line in lines[start + 2 :]:
            parts = line.split()
            if len(parts) != 2 or parts[0] == "total":
                break
            counts[parts[0]] = int(parts[1])
    return counts


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    workdir = checkout(tmp_path_factory.mktemp("workflow") / "clone")
    (workdir / "config.yaml").write_text(yaml.safe_dump(TINY))
    snakemake(workdir, "--cores", "2")
    return workdir


@pytest.mark.slow
def test_caches_have_the_documented_schema(finished_run):
    seeds = {"sst2": [2, 3], "cb": [3, 4]}
    for variant, methods in TINY["variants"].items():
        for task, task_seeds in seeds.items():
            for seed in task_seeds:
                # one ZSL per task, the first seed's: it does not depend on the seed
                assert (finished_run / f"results/activations/tiny/{variant}/{task}/seed{seed}/zsl.arrow").exists() == (
                    seed == task_seeds[0]
                )
                for setting in ["zsl", "icl", *methods] if seed == task_seeds[0] else ["icl", *methods]:
                    path = finished_run / f"results/activations/tiny/{variant}/{task}/seed{seed}/{setting}.arrow"
                    run = cache.read_cache(path)
                    n_labels = len(cfg.TASK_PRESETS[task]["label_words"])
                    assert run.meta["setting"] == setting and run.meta["seed"] == seed
                    assert run.n_examples == TINY["max_eval"]
                    # compact: ZSL's values in float32, the other settings' changes from them in float16
                    assert run.is_change == (setting != "zsl") and run.meta["layout"] == "compact"
                    if run.is_change:  # every seed's changes are from the task's one ZSL cache
                        assert (
                            run.reference.path.resolve()
                            == path.parent.parent.resolve() / f"seed{task_seeds[0]}/zsl.arrow"
                        )
                    assert run.attn_out.shape == (12, 2, 32) and run.outputs().shape == (12, 2, 32)
                    assert run.attn_scores.shape == (2 * 2 * run.query_len.sum(),)  # unpadded
                    assert run.label_logprobs.shape == (12, n_labels)
                    # log-probabilities of a distribution over the whole vocabulary
                    assert np.all(run.label_logprobs < 0) and np.all(np.exp(run.label_logprobs).sum(1) < 1)
                    assert np.array_equal(run.pred, run.label_logprobs.argmax(1))
                    valid = ~np.isnan(run.score_rows())
                    assert np.array_equal(valid.sum(-1), np.broadcast_to(run.query_len[:, None, None], valid.shape[:3]))
                    if setting == "zsl":  # no demonstrations
                        assert "true_k" not in run.meta and "demo_ids" not in run.meta
                    else:
                        assert 1 <= run.meta["true_k"] <= TINY["k"]
                    expected_context = 1 if setting != "icl" else run.meta["n_context"]
                    assert run.context_scores.shape[2] == expected_context
                    if setting == "icl":
                        assert expected_context > 1 + run.meta["true_k"]


@pytest.mark.slow
def test_finetuning_changes_predictions_but_not_the_evaluation_set(finished_run):
    base = finished_run / "results/activations/tiny/trained/sst2/seed2"
    zsl, gd = cache.read_cache(base / "zsl.arrow"), cache.read_cache(base / "gd.arrow")
    assert np.array_equal(zsl.example_id, gd.example_id) and np.array_equal(zsl.gold, gd.gold)
    assert not np.allclose(zsl.outputs(), gd.outputs())  # K/V moved, so the attention output did
    meta, log = cache.read_train_log(finished_run / "results/training/tiny/trained/sst2/seed2/gd.parquet")
    assert len(log["loss"]) == TINY["k"] and log["grad_norm"].shape == (TINY["k"], 2)
    assert np.all(log["grad_norm"] > 0) and meta["lr"] == cfg.TASK_PRESETS["sst2"]["lr"]


@pytest.mark.slow
def test_metrics_agree_with_the_caches(finished_run):
    runs = pd.read_parquet(finished_run / "results/metrics/runs.parquet")
    summary = pd.read_parquet(finished_run / "results/metrics/summary.parquet")
    csv = pd.read_csv(finished_run / "results/metrics/summary.csv")
    assert list(summary.columns) == [
        "model",
        "variant",
        "task",
        "method",
        "metric",
        "layer",
        "mean",
        "std",
        "n",
        "ci_low",
        "ci_high",
        "between",
        "within",
    ]
    assert len(csv) == len(summary)
    # 2 variants' methods x 2 tasks x 2 seeds
    assert len(runs[["variant", "task", "seed", "method"]].drop_duplicates()) == (2 + 1) * 2 * 2
    # accuracy recomputed from the caches
    accs = []
    for seed in (2, 3):
        run = cache.read_cache(finished_run / f"results/activations/tiny/trained/sst2/seed{seed}/icl.arrow")
        accs.append(np.mean(run.pred == run.gold))
    row = summary.query("variant == 'trained' and task == 'sst2' and method == 'gd' and metric == 'acc_icl'")
    assert row["n"].item() == 2
    assert row["mean"].item() == pytest.approx(np.mean(accs))
    assert row["std"].item() == pytest.approx(np.std(accs, ddof=1), nan_ok=True)
    # ICL on permuted labels (the premise's): its cache's gold is the permuted gold, and every run of
    # the trained variant scores pred against it
    follows = []
    for seed in (2, 3):
        base = finished_run / f"results/activations/tiny/trained/sst2/seed{seed}"
        permuted, icl = cache.read_cache(base / "icl_permuted.arrow"), cache.read_cache(base / "icl.arrow")
        assert permuted.meta["demo_labels"] == "permuted" and permuted.meta["demo_ids"] == icl.meta["demo_ids"]
        assert np.array_equal(permuted.gold, 1 - icl.gold)  # two classes: the swap
        follows.append(np.mean(permuted.pred == permuted.gold))
    rows = summary.query("variant == 'trained' and task == 'sst2' and metric == 'acc_icl_permuted'")
    assert set(rows["method"]) == {"gd", "lcgd"} and rows["mean"].tolist() == pytest.approx([np.mean(follows)] * 2)
    assert "acc_icl_permuted" not in set(summary.query("variant == 'untrained'")["metric"])
    # ICL on novel label words (beside the premise): the same demonstrations, words of the tokenizer's
    # held-out pool (none a protocol word), the gold kept
    novel = cache.read_cache(finished_run / "results/activations/tiny/trained/sst2/seed2/icl_novel.arrow")
    icl = cache.read_cache(finished_run / "results/activations/tiny/trained/sst2/seed2/icl.arrow")
    assert novel.meta["demo_labels"] == "novel" and novel.meta["demo_ids"] == icl.meta["demo_ids"]
    assert np.array_equal(novel.gold, icl.gold) and not set(novel.meta["label_ids"]) & set(icl.meta["label_ids"])
    assert "acc_icl_novel" in set(summary.query("variant == 'trained'")["metric"])
    # the layer-mean row is the mean of the per-layer rows
    one = runs.query(
        "variant == 'trained' and task == 'cb' and seed == 3 and method == 'lcgd' and metric == 'simam_delta'"
    )
    per_layer = one[one["layer"].notna()].sort_values("layer")["value"]
    assert list(one[one["layer"].notna()]["layer"].astype(int).sort_values()) == [0, 1]
    assert one[one["layer"].isna()]["value"].item() == pytest.approx(np.nanmean(per_layer))
    assert per_layer.between(-1, 1).all()
    # alpha: LCGD against GD's cache of the same seed (paper 001 Fig. 2)
    base = finished_run / "results/activations/tiny/trained/cb/seed3"
    zsl, lcgd, gd = (cache.read_cache(base / f"{s}.arrow") for s in ("zsl", "lcgd", "gd"))
    alpha = runs.query("variant == 'trained' and task == 'cb' and seed == 3 and method == 'lcgd' and metric == 'alpha'")
    expected = formulas.alpha(zsl.score_rows(), lcgd.score_rows(), gd.score_rows())  # from the values, rebuilt
    assert alpha[alpha["layer"].notna()].sort_values("layer")["value"].tolist() == pytest.approx(
        list(expected), abs=1e-4, nan_ok=True
    )
    assert "alpha" not in set(runs.query("method == 'gd'").metric)
    # every interval brackets its mean; one seed's interval is the run's own
    defined = summary.dropna(subset=["ci_low", "mean"])
    assert len(defined) > 0.5 * len(summary)
    assert ((defined.ci_low <= defined["mean"] + 1e-9) & (defined["mean"] <= defined.ci_high + 1e-9)).all()


@pytest.mark.slow
def test_methods_are_compared_with_gd_paired_by_example(finished_run):
    table = pd.read_parquet(finished_run / "results/metrics/comparisons.parquet")
    assert len(pd.read_csv(finished_run / "results/metrics/comparisons.csv")) == len(table)
    # trained: lcgd vs gd, per task and compared metric; untrained runs gd only
    assert set(zip(table.variant, table.method, table.baseline)) == {("trained", "lcgd", "gd")}
    assert len(table) == 2 * 5 and (table.n_seeds == 2).all() and (table.n_examples <= 12).all()
    row = table.query("task == 'sst2' and metric == 'acc_ft'").iloc[0]
    accs = {}
    for method in ("lcgd", "gd"):
        accs[method] = np.mean(
            [
                np.mean(r.pred == r.gold)
                for r in (
                    cache.read_cache(finished_run / f"results/activations/tiny/trained/sst2/seed{seed}/{method}.arrow")
                    for seed in (2, 3)
                )
            ]
        )
    assert row.mean_method == pytest.approx(accs["lcgd"]) and row.mean_baseline == pytest.approx(accs["gd"])
    assert row["diff"] == pytest.approx(accs["lcgd"] - accs["gd"])
    assert 0 < row.p_value <= 1 and row.significant == (row.p_value < 0.05)


@pytest.mark.slow
def test_report_tables_and_figures(finished_run):
    summary = pd.read_parquet(finished_run / "results/metrics/summary.parquet")
    md = (finished_run / "results/reports/tables/methods.md").read_text()
    assert "SST2" in md.upper() and "CB" in md.upper()
    mean = summary.query(
        "variant == 'trained' and task == 'sst2' and method == 'gd' and metric == 'simaou_norm' and layer.isna()"
    )["mean"].item()
    assert f"{mean:.2f}".replace("-0.00", "0.00") in md
    assert "\\begin{tabular}" in (finished_run / "results/reports/tables/methods.tex").read_text()
    for stem in ("accuracy", "methods", "variants"):
        assert (finished_run / f"results/reports/tables/{stem}.csv").stat().st_size > 0
    # one model, no learning-rate sweep: neither the models nor the lr_sweep figure is planned
    planned = (
        "per_layer",
        "accuracy",
        "alpha",
        "grad_norms",
        "prediction_changes",
        "output_distributions",
        "reproduction",
        "claims",
        "premise",
    )
    assert sorted(p.name for p in (finished_run / "results/reports/figures").iterdir()) == sorted(
        f"{stem}.{ext}" for stem in planned for ext in ("png", "pdf")
    )
    for stem in planned:
        png = (finished_run / f"results/reports/figures/{stem}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
        assert (finished_run / f"results/reports/figures/{stem}.pdf").read_bytes()[:5] == b"%PDF-"
        assert (finished_run / f"results/logs/figures/{stem}.log").exists()


def _csv(finished_run, stem):
    return pd.read_csv(finished_run / f"results/reports/tables/{stem}.csv", dtype=str, keep_default_na=False)


def _cell(mean, std, decimals):
    text = f"{mean:.{decimals}f}" + ("" if np.isnan(std) else f" ± {std:.{decimals}f}")
    return text.replace("-0.00 ", "0.00 ")


@pytest.mark.slow
def test_every_table_agrees_with_the_aggregated_metrics(finished_run):
    summary = pd.read_parquet(finished_run / "results/metrics/summary.parquet")
    run_level = summary[summary.layer.isna()].set_index(["variant", "method", "metric", "task"])
    tables = {p.stem for p in (finished_run / "results/reports/tables").glob("*.csv")}
    assert tables == {
        "accuracy",
        "methods",
        "variants",
        "intervals",
        "data",
        "layer_causal",
        "comparisons",
        "reproduction",
        "claims",
        "premise",
        "costs",
    }
    # the premise table's similarity is the summary's GD SimAOU_norm
    premise = _csv(finished_run, "premise").set_index("Task")
    for task in ("sst2", "cb"):
        mean = run_level.loc[("trained", "gd", "simaou_norm", task), "mean"]
        assert float(premise.loc[task.upper(), "SimAOU_norm"]) == pytest.approx(mean, abs=5e-4)
        follows = run_level.loc[("trained", "gd", "acc_icl_permuted", task), "mean"]
        assert float(premise.loc[task.upper(), "ICL, permuted labels (%)"]) == pytest.approx(100 * follows, abs=0.05)
    # it learns in context where all three of the premise's intervals lie above 0, at one level
    tested = pd.read_parquet(finished_run / "results/metrics/premise.parquet")
    lows = tested[["icl_zsl_low", "icl_majority_low", "icl_permuted_majority_low"]]
    assert tested["learns"].tolist() == (lows > 0).all(axis=1).tolist()
    assert tested["level"].tolist() == pytest.approx([1 - 0.05 / (2 * 3)] * 2)  # 2 tasks x 3 cells

    # every published cell of the run's tasks, variants and methods, with the run's own value
    reproduction = _csv(finished_run, "reproduction")
    covered = set(zip(reproduction["Setting"], reproduction["Task"]))
    assert covered == {(s, t) for s in ("GD, trained", "LCGD, trained", "GD, no training") for t in ("SST2", "CB")}
    for row in reproduction.itertuples():
        if row.Metric == "SimAOU_norm" and row.Setting == "LCGD, trained":
            mean = run_level.loc[("trained", "lcgd", "simaou_norm", row.Task.lower()), "mean"]
            assert abs(float(getattr(row, "_6").split(" [")[0]) - mean) <= 0.005  # "This run [95% interval]"
    assert set(reproduction["Within"]) <= {"yes", "no"}
    md = (finished_run / "results/reports/tables/reproduction.md").read_text()
    assert "Cells covered:" in md and "Model: tiny" in md
    claims_table = _csv(finished_run, "claims")
    verdicts = dict(zip(claims_table["Claim"], claims_table["Verdict"]))
    assert set(verdicts.values()) <= set(claim_definitions.VERDICTS)
    assert all(v == "not run" for c, v in verdicts.items() if "lipp" in c or "False labels" in c)
    assert all(v != "not run" for c, v in verdicts.items() if c.startswith("Layer-causal GD achieves"))

    layer_causal = _csv(finished_run, "layer_causal").set_index("Metric")
    assert list(layer_causal.columns) == ["SST2", "CB", "Average"]
    assert list(layer_causal.index) == [
        "SimAOU (Random)",
        "SimAOU (GD)",
        "SimAOU (LCGD)",
        "SimAM (ZSL)",
        "SimAM (GD)",
        "SimAM (LCGD)",
    ]
    for label, method, metric in (("SimAOU (LCGD)", "lcgd", "simaou_norm"), ("SimAM (ZSL)", "gd", "simam_before")):
        for task, column in (("sst2", "SST2"), ("cb", "CB")):
            row = run_level.loc[("trained", method, metric, task)]
            assert layer_causal.loc[label, column].rstrip("†") == _cell(row["mean"], row["std"], 4)

    accuracy = _csv(finished_run, "accuracy").set_index("Metric")
    row = run_level.loc[("trained", "gd", "acc_icl_permuted", "sst2")]
    assert accuracy.loc["ICL, permuted labels, accuracy (%)", "SST2"] == _cell(100 * row["mean"], 100 * row["std"], 1)
    row = run_level.loc[("trained", "gd", "rec2ftp", "cb")]
    expected = "—" if np.isnan(row["mean"]) else _cell(row["mean"], row["std"], 1)
    assert accuracy.loc["Rec2FTP (%)", "CB"].rstrip("†") == expected  # † where a seed had no FT fix

    methods = _csv(finished_run, "methods").set_index("Metric")
    assert list(methods.index[:2]) == ["Random SimAOU", "Random SimAOU (Gaussian)"]
    row = run_level.loc[("trained", "gd", "simaou_random", "sst2")]
    assert methods.loc["Random SimAOU", "SST2"] == _cell(row["mean"], row["std"], 2)

    comparisons = pd.read_parquet(finished_run / "results/metrics/comparisons.parquet").set_index(["metric", "task"])
    table = _csv(finished_run, "comparisons").set_index(["Metric", "Comparison"])
    one = comparisons.loc[("simam_delta", "cb")]
    cell = table.loc[("SimAM_delta", "LCGD − GD"), "CB"]
    assert cell.startswith(f"{one['diff']:+.3f}") and cell.endswith("*") == bool(one["significant"])

    intervals = _csv(finished_run, "intervals").set_index(["Metric", "Method"])
    row = run_level.loc[("trained", "lcgd", "simam_delta", "sst2")]
    assert intervals.loc[
        ("SimAM_delta", "LCGD"), "SST2"
    ] == f"{row['mean']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]".replace("-0.00", "0.00")

    data = _csv(finished_run, "data").set_index("Task")
    assert list(data.index) == ["SST2", "CB"] and (data["# Evaluated"] == "12").all()
    assert (data["# Validation"] == "20").all() and (data["# Train"] == "40").all()
    assert all(int(d.split(" / ")[1]) == TINY["k"] for d in data["Demonstrations (true k / k)"])


@pytest.mark.slow
def test_every_job_records_what_it_took_and_the_costs_table_sums_the_records(finished_run):
    records = sorted((finished_run / "results/benchmarks").rglob("*.tsv"))
    caches = list((finished_run / "results/activations").rglob("*.arrow"))
    extraction = [p for p in records if p.relative_to(finished_run / "results/benchmarks").parts[0] == "extract"]
    assert len(extraction) == len(caches) > 0
    for path in records:
        record = benchmark.read(path)
        assert record["s"] > 0 and record["max_rss"] > 50 and record["cpu_time"] >= 0, path
    costs_ = _csv(finished_run, "costs").set_index(["Rule", "Setting"])
    total = costs_.loc[("all", "—")]
    assert int(total["Jobs"]) == int(total["Recorded"]) > len(caches)
    rows = costs_.drop(index=("all", "—"))
    extract_rules = ("extract_zsl", "extract_base", "finetune_and_extract", "extract_order", "finetune_order")
    assert rows[rows.index.get_level_values(0).isin(extract_rules)]["Jobs"].astype(int).sum() == len(caches)


def test_the_jobs_ran_in_the_warm_worker_which_stopped(finished_run):
    """The run's jobs ran in copies of the warm worker (those that started before it was ready
    ran in place); it stopped after the run, and a dry run starts none."""
    log = finished_run / "results/logs/warm_worker.log"
    text = log.read_text()
    assert "serving on" in text and text.rstrip().endswith("stopped")
    assert text.count(" exited 0 ") >= 10 and " exited 1" not in text
    before = log.stat().st_mtime_ns
    (finished_run / "results/reports/tables/accuracy.md").unlink()  # a job for the dry run to plan
    try:
        assert jobs_planned(finished_run) == {"table": 1, "all": 1}
        snakemake(finished_run, "--lint")
        assert log.stat().st_mtime_ns == before  # neither started a worker
    finally:
        snakemake(finished_run, "--cores", "1")
    assert log.stat().st_mtime_ns != before  # the run did
    assert jobs_planned(finished_run, "--config", "warm_worker=false") == {}  # switching it off reruns nothing


@pytest.mark.slow
def test_every_cache_log_and_metrics_table_says_which_software_made_it(finished_run):
    import transformers

    from icl_gd.common import provenance

    base = finished_run / "results/activations/tiny/trained/sst2/seed2"
    for path in (base / "zsl.arrow", base / "gd.arrow"):
        record = cache.read_cache(path).meta["provenance"]
        assert record["transformers"] == transformers.__version__ and record["device"] == "cpu"
        assert record["dtype"] == "float32" and set(provenance.SOFTWARE) <= set(record)
    meta, _ = cache.read_train_log(finished_run / "results/training/tiny/trained/sst2/seed2/gd.parquet")
    assert meta["provenance"]["torch"] == provenance.software()["torch"]
    for table in ("summary", "runs", "comparisons", "claims", "data_statistics"):
        made_by = frames.read_provenance(finished_run / f"results/metrics/{table}.parquet")
        assert len(made_by["caches"]) == 1 and made_by["caches"][0]["devices"] == ["cpu"], table
        assert made_by["computed"]["numpy"] == np.__version__, table
    page = (finished_run / "results/reports/summary.md").read_text()
    assert "Caches made with Python" in page and f"transformers {transformers.__version__}" in page
    assert "Caches made with" in (finished_run / "results/reports/tables/data.md").read_text()


@pytest.mark.slow
def test_the_report_opens_in_a_browser_on_what_the_run_found(finished_run):
    """`snakemake --report`, opened as a user opens it, in a real headless Chromium: the first page
    says what the run found (a claim's verdict as the claims table has it), its link opens the
    claims table rendered (a cell of it), and the forest plot's image loads."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is in the test extra: pip install -e '.[test]'"
    )
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium: the README's set-up installs Debian's (apt-get install chromium)")
    snakemake(finished_run, "--report", "report.html")
    claims_csv = _csv(finished_run, "claims")
    row = claims_csv[claims_csv["Claim"].str.startswith("ICL is more accurate than zero-shot on every task")].iloc[0]
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto((finished_run / "report.html").as_uri())
            page.get_by_text("What this run found").wait_for(timeout=30_000)
            landing = page.inner_text("body")
            assert f"{row['Verdict']}: 003 Table 1, ICL is more accurate than zero-shot on every task" in landing
            assert "Models: tiny" in landing and "evaluation examples per task and seed" in landing
            # the claims table, rendered: its link opens the table's entry, the eye shows it
            page.get_by_role("link", name="the claims table").click()
            page.locator('a[iconname="eye"]').first.click()
            table = page.frame_locator("iframe").locator("table")
            table.wait_for(timeout=30_000)
            text = table.inner_text()
            assert "Tasks: hold / break / negligible / open" in text and row["SST2"] in text and row["Verdict"] in text
            # back to the first page, then the forest plot: its image loads
            page.goto((finished_run / "report.html").as_uri())
            page.get_by_role("link", name="the forest plot").click()
            page.locator('a[iconname="eye"]').first.click()
            image = page.locator("img[src^='data:image/png']")
            image.wait_for(timeout=30_000)
            assert image.evaluate("img => img.complete && img.naturalWidth > 1000")
        finally:
            browser.close()


def planned_after_edit(workdir: Path, module: str, edit=lambda text: text + "\nEDITED = 1\n") -> dict[str, int]:
    """The jobs a dry run plans after an edit of src/icl_gd/<module> (by default a new constant: code
    that means something else), which is then undone."""
    path = workdir / "src/icl_gd" / module
    original = path.read_text()
    try:
        path.write_text(edit(original))
        return jobs_planned(workdir)
    finally:
        path.write_text(original)


@pytest.mark.slow
def test_nothing_to_do_after_a_run_and_metric_edits_rerun_only_metrics(finished_run):
    assert jobs_planned(finished_run) == {}
    # a comment, a docstring and blank lines (one dry run for the three): the code means what it
    # meant, nothing to do; a changed constant: what the metrics compute may change, they rerun
    reworded = planned_after_edit(
        finished_run,
        "metrics/formulas.py",
        lambda text: (
            text.replace('"""', '"""Reworded. ', 1).replace("\n\n\ndef ", "\n\n\n\n\ndef ") + "\n# why, not what\n"
        ),
    )
    assert reworded == {}
    planned = planned_after_edit(
        finished_run,
        "metrics/formulas.py",
        lambda text: text.replace("_CHUNK_ELEMENTS = 1 << 18", "_CHUNK_ELEMENTS = 1 << 17"),
    )
    assert set(planned) == {
        "score_run",
        "aggregate_metrics",
        "compare_methods",
        "evaluate_claims",
        "table",
        "figure",
        "figure_after_claims",
        "first_page",
        "all",
    }
    assert planned["score_run"] == 12
    # the gradient norms come from the training logs, not the metrics
    assert planned["figure"] + planned["figure_after_claims"] == 8
    # the data table's statistics rerun their own jobs and what shows them, no run's scores
    planned = planned_after_edit(finished_run, "metrics/statistics.py")
    assert set(planned) == {"task_statistics", "data_statistics", "table", "first_page", "all"}
    assert planned["table"] == 1  # the data table
    # rewording the claims' text remakes the report and tests nothing again
    planned = planned_after_edit(finished_run, "report/claim_wording.py")
    assert set(planned) == {"table", "figure", "figure_after_claims", "first_page", "all"}
    # how a job writes its files changes no result: nothing to do
    assert planned_after_edit(finished_run, "common/atomic.py") == {}


@pytest.mark.slow
def test_further_orders_plan_their_own_jobs_and_rerun_nothing_else(finished_run):
    assert jobs_planned(finished_run) == {}
    planned = jobs_planned(finished_run, "--config", "orders=2")
    # the trained variant's runs: 2 tasks x 2 seeds, ICL once and each of its 2 methods, in 1 further order
    assert planned.pop("extract_order") == 2 * 2 and planned.pop("finetune_order") == 2 * 2 * 2
    assert planned.pop("score_order") == planned.pop("order_run") == 2 * 2 * 2
    assert planned.pop("order_sensitivity") == 1
    # what reads them: the claims (one more is tested), the orders table and figure, the first page;
    # no cache of the run's own order, no score of it, no aggregate
    assert set(planned) == {"evaluate_claims", "table", "figure", "figure_after_claims", "first_page", "all"}
    assert planned["table"] == 4  # claims, premise, orders and costs (its records and inputs change)
    # every figure's caption names the --config overrides it was made with: all 9 again, and the orders one
    assert planned["figure"] + planned["figure_after_claims"] == 9 + 1


@pytest.mark.slow
def test_a_config_edit_reruns_exactly_the_caches_it_changes(finished_run):
    config_file = finished_run / "config.yaml"
    try:
        config_file.write_text(yaml.safe_dump({**TINY, "k": 3}))
        planned = jobs_planned(finished_run)
        # ICL (not ZSL; and the trained variant's on permuted labels and on novel label words) and both
        # training methods, per variant, task and seed; then what follows
        assert planned["extract_base"] == 2 * 2 * 2 + 2 * 2 * 2 and planned["finetune_and_extract"] == 3 * 2 * 2
        assert "prepare_task" not in planned and "build_builtin_model" not in planned
        config_file.write_text(yaml.safe_dump({**TINY, "batch_size": 3}))  # must not change results
        assert jobs_planned(finished_run) == {}
        # the reference's separator named, and not: the same runs
        config_file.write_text(yaml.safe_dump({**TINY, "demo_separator": "eos"}))
        assert jobs_planned(finished_run) == {}
        # another separator for the model: every extraction (ZSL too: a text's newlines), no model job
        newline = {**TINY["models"]["tiny"], "demo_separator": "newline"}
        config_file.write_text(yaml.safe_dump({**TINY, "models": {"tiny": newline}}))
        planned = jobs_planned(finished_run)
        assert {"extract_zsl", "extract_base", "finetune_and_extract"} <= set(planned)
        assert not {"build_builtin_model", "make_variant", "prepare_task"} & set(planned)
    finally:
        config_file.write_text(yaml.safe_dump(TINY))
    assert jobs_planned(finished_run) == {}


@pytest.mark.slow
def test_an_edit_of_the_planning_reruns_no_extraction_unless_it_changes_a_run_spec(finished_run):
    """planning/plan.py, config/resolve.py and data/presets.py decide what each job does; what they decide
    reaches the job as its run spec, which the params trigger compares, so their code is in no
    job's checksum."""
    package = finished_run / "src/icl_gd"
    plan_py, config_py, presets_py = (
        package / "planning/plan.py",
        package / "config/resolve.py",
        package / "data/presets.py",
    )
    originals = {path: path.read_text() for path in (plan_py, config_py, presets_py)}
    assert '"lr": 5e-4,' in originals[presets_py]  # SST-2's protocol rate
    try:
        plan_py.write_text(originals[plan_py] + "\n\ndef a_new_helper(config):\n    return sorted(config)\n")
        config_py.write_text(originals[config_py] + "\nEDITED = 1  # an edit that changes no spec\n")
        assert jobs_planned(finished_run) == {}
        presets_py.write_text(originals[presets_py].replace('"lr": 5e-4,', '"lr": 6e-4,'))
        planned = jobs_planned(finished_run)
    finally:
        for path, text in originals.items():
            path.write_text(text)
    # SST-2's finetuning only: 2 seeds x (trained: gd, lcgd; untrained: gd); then its scores and the report
    assert planned["finetune_and_extract"] == 6 and planned["score_run"] == 6
    assert not {
        "extract_zsl",
        "extract_base",
        "build_builtin_model",
        "synthetic_twin",
        "prepare_task",
        "make_variant",
    } & set(planned)
    assert jobs_planned(finished_run) == {}


def test_a_precision_that_departs_from_float32_is_warned_of_once(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**TINY, "dtype": "bfloat16", "cache_dtype": "float16"}))
    err = snakemake(tmp_path, "-n").stderr
    assert err.count("warning: dtype: bfloat16") == 1 and err.count("warning: cache_dtype: float16") == 1
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(TINY))
    assert "warning: " not in snakemake(tmp_path, "-n").stderr


@pytest.mark.slow
def test_temporary_caches_are_deleted_once_scored_and_a_metric_edit_extracts_again(tmp_path, finished_run):
    """`caches: temporary`: every cache is a temp() output, gone once the jobs that read it are done;
    the run's tables are those of a run that keeps them, and nothing is left to do after it."""
    workdir = checkout(tmp_path / "clone")
    (workdir / "config.yaml").write_text(yaml.safe_dump({**TINY, "caches": "temporary"}))
    snakemake(workdir, "--cores", "2")
    assert list((workdir / "results/activations").rglob("*.arrow")) == []
    assert sorted((workdir / "results/training").rglob("*.parquet"))  # the training logs stay
    for table in ("accuracy", "methods", "data"):
        assert (workdir / f"results/reports/tables/{table}.md").read_text() == (
            finished_run / f"results/reports/tables/{table}.md"
        ).read_text(), table
    assert jobs_planned(workdir) == {}
    metrics_py = workdir / "src/icl_gd/metrics/formulas.py"
    metrics_py.write_text(metrics_py.read_text() + "\nEDITED = 1\n")  # code that means something else
    planned = jobs_planned(workdir)
    # every cache again: ZSL of 2 variants x 2 tasks, ICL of each of their 2 seeds (and the trained
    # variant's on permuted labels and on novel label words), and the 3 methods
    assert (planned["extract_zsl"], planned["extract_base"], planned["finetune_and_extract"], planned["score_run"]) == (
        4,
        8 + 8,
        12,
        12,
    )


@pytest.mark.slow
def test_the_disk_estimate_is_what_the_run_wrote(finished_run):
    """`snakemake disk_estimate` counts every cache from the model's shape and tokenizer and the
    data, before any extraction; after the run, within 2% of the bytes the caches take."""
    out = snakemake(finished_run, "--cores", "1", "disk_estimate").stdout
    estimate = int(re.search(r"caches: keep .*\(([\d,]+) bytes\)", out).group(1).replace(",", ""))
    written = sum(p.stat().st_size for p in (finished_run / "results/activations").rglob("*.arrow"))
    assert "32 activation caches (compact layout), 4 run groups" in out
    assert abs(estimate - written) <= 0.02 * written, (estimate, written)
    assert jobs_planned(finished_run) == {}  # it writes nothing a later run would redo


def test_the_cost_estimate_times_every_path_and_predicts_every_model_job(finished_run):
    """`snakemake cost_estimate` on this machine (calibrated) and on a named GPU (assumed): one
    row per model job of the run, each with its counted FLOPs as the job itself counted them."""
    table_path = finished_run / "results/cost_estimate.tsv"
    try:
        # one pass of the calibration (its repeats: tests/unit/planning/test_timing.py)
        out = snakemake(finished_run, "--cores", "2", "cost_estimate", "--config", "cost_calibration_s=0").stdout
        assert "timed on this machine" in out and "total:" in out
        table = pd.read_csv(table_path, sep="\t")
        caches = list((finished_run / "results/activations").rglob("*.arrow"))
        assert len(table) == len(caches) + 1  # and the built-in model's pretraining
        assert (table["seconds"] > 0).all() and (table["peak_mb"] > 100).all()
        # each extraction's FLOPs as its own record counted them
        extraction = table[table["rule"] != "build_builtin_model"]
        for row in extraction.itertuples():
            run = f"results/benchmarks/extract/tiny/{row.variant}/{row.task}/seed{int(row.seed)}"
            record = finished_run / run / (f"order{int(row.order)}" if row.order else "") / f"{row.setting}.tsv"
            assert benchmark.read(record)["gflop"] == pytest.approx(row.gflop, rel=1e-3, abs=1e-4), record
        assert jobs_planned(finished_run) == {}  # it writes nothing a later run would redo
        out = snakemake(finished_run, "--cores", "1", "cost_estimate", "--config", "cost_device=A100").stdout
        # a GPU this machine is not: the figures measured on one (H100, H200) or scaled from them, named
        assert "A100 (19.5 TFLOP/s dense peak at 32-bit): SCALED, not measured: the H100's rates" in out
        assert pd.read_csv(table_path, sep="\t")["gpu_mb"].notna().all()
    finally:
        table_path.unlink(missing_ok=True)


@pytest.mark.slow
def test_the_timeline_places_every_job_of_a_finished_run(finished_run):
    """benchmarks/timeline.py over the run's records: every record counted under its rule, the
    rules in the order they started, every job inside the run's span."""
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/timeline.py"), "--workdir", str(finished_run), "--cores", "2"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:] if line and line[0].isalpha()}
    records = list((finished_run / "results/benchmarks").rglob("*.tsv"))
    caches = list((finished_run / "results/activations").rglob("*.arrow"))
    assert int(rows["extract"][0]) == len(caches)
    assert sum(int(jobs) for jobs, *_ in rows.values()) == len(records)
    assert rows["first_page"][0] == "1"
    # in the order the rules started (other tests rerun parts of this run, so not always the data first)
    firsts = [float(first) for _, first, *_ in rows.values()]
    assert firsts == sorted(firsts) and firsts[0] == 0.0
    span = float(re.search(r"jobs over ([\d.]+) s", out).group(1))
    assert all(0 <= float(first) <= float(last) <= span for _, first, last, *_ in rows.values())


def test_a_bad_config_key_stops_the_run_with_its_name(tmp_path):
    bad = {**TINY, "methods": {"gd": {"kind": "gd", "lerning_rate": 0.1}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(bad))
    proc = snakemake(tmp_path, "-n", check=False)
    assert proc.returncode != 0
    assert "methods.gd" in proc.stderr + proc.stdout and "lerning_rate" in proc.stderr + proc.stdout
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**TINY, "report": {"grad_norm_task": "sbuj"}}))
    proc = snakemake(tmp_path, "-n", check=False)
    assert proc.returncode != 0 and "report.grad_norm_task" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_finished_run_that_is_moved_plans_nothing_and_a_new_config_leaves_only_its_reports(finished_run, tmp_path):
    """The clone with its finished run, copied elsewhere (as from scratch to project space):
    nothing to do, the build job that read the shipped weights in models/tiny included (issue 82:
    their paths were its input files, absolute, and the whole run planned again). Then a second
    config in that copy: its report folder holds its own tables and figures only, and the
    repository's reports/ is not touched."""
    build_log = (finished_run / "results/logs/build_builtin_model/tiny.log").read_text()
    assert "models/tiny were made for another recipe" in build_log  # found, and read
    moved = tmp_path / "elsewhere" / "clone"
    shutil.copytree(finished_run, moved, symlinks=True)  # copy2: modification times kept
    assert (moved / "models/tiny/model.safetensors").exists()
    assert jobs_planned(moved) == {}
    # one variant, one method, no reproduction: fewer tables
    second = {**TINY, "variants": {"trained": ["gd"]}, "report": {"reproduction": False}}
    (moved / "config.yaml").write_text(yaml.safe_dump(second))
    before = sorted(p.name for p in (moved / "results/reports/tables").iterdir())
    snakemake(moved, "--cores", "2")
    tables = sorted(p.stem for p in (moved / "results/reports/tables").glob("*.md"))
    figures = sorted(p.stem for p in (moved / "results/reports/figures").glob("*.png"))
    assert tables == ["accuracy", "costs", "data", "intervals", "methods"] and {"variants.md", "claims.md"} <= set(
        before
    )
    assert figures == [
        "accuracy",
        "grad_norms",
        "output_distributions",
        "per_layer",
        "prediction_changes",
    ]  # no alpha without GD's twin
    assert "Model: tiny" in (moved / "results/reports/tables/methods.md").read_text()
    assert not (moved / "reports").exists()


@pytest.mark.slow
def test_the_premise_on_further_seeds_plans_them_and_reruns_only_what_reads_the_premise(finished_run, tmp_path):
    """premise.seeds (issue 82, item 3): a copy of the finished run (two seeds a task) asked for the
    premise on three plans each task's third seed's ICL and ICL on permuted labels and novel words, their scores
    without a finetuned model, and what reads the premise; no run of the claims' seeds, no aggregate.
    The premise then reads three seeds, the claims two."""
    workdir = tmp_path / "premise"
    shutil.copytree(finished_run, workdir, symlinks=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump({**TINY, "premise": {"seeds": 3}}))
    planned = jobs_planned(workdir)
    assert planned.pop("extract_base") == 2 * 3 and planned.pop("score_premise_icl") == 2
    assert "evaluate_claims" in planned
    assert set(planned) <= {"evaluate_claims", "table", "figure", "figure_after_claims", "first_page", "all"}
    snakemake(workdir, "--cores", "2", "results/metrics/premise.parquet")
    premise = pd.read_parquet(workdir / "results/metrics/premise.parquet")
    claims = pd.read_parquet(workdir / "results/metrics/claims.parquet")
    assert premise["n_seeds"].tolist() == [3, 3] and claims["n_seeds"].max() == 2
    alone = scoring.read_examples(workdir / "results/metrics/premise_icl/tiny/trained/sst2/seed4/gd.parquet")
    assert alone.pred_ft is None and alone.meta["seed"] == 4 and alone.pred_icl_permuted is not None
    assert alone.pred_icl_novel is not None
