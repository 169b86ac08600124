# Config validation, and the paths, wildcards and input functions every stage uses. What runs and
# why (the runs, the report's tables and figures, the pairings) is planned in icl_gd/plan.py.

import contextlib
import hashlib
import os
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(workflow.basedir) / "src"))  # works before `pip install -e .` too

from icl_gd.config import resolve as cfg
from icl_gd.data import corpora
from icl_gd.common import names, runtime, warm
from icl_gd import plan
from icl_gd.config import validation


# A config file named on the command line replaces config.yaml rather than being merged into it:
# a merge would keep the default's models and tasks in every other config's runs.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"



_SCHEMA = yaml.safe_load((Path(workflow.basedir) / "workflow/schemas/config.schema.yaml").read_text())
_validated = validation.validate(config, _SCHEMA)
config.clear()
config.update(_validated)
# Once per run, from the process the user started: not from each job's, nor on a SLURM node.
if workflow.is_main_process:
    for _message in validation.precision_warnings(config):
        print(f"warning: {_message}", file=sys.stderr)

SRC = Path(workflow.basedir) / "src" / "icl_gd"


def code_version(*modules):
    """Checksums of the package modules a rule's jobs import, passed as a parameter. Snakemake's
    code trigger sees a rule's own script, not what it imports; through the params trigger an edit
    of a module reruns exactly the jobs that import it (a metric: the metrics and what follows).
    Not as input files: their absolute paths would tie a finished run to where its checkout lay,
    and a moved or copied run would plan everything again. A module is named by its path under
    icl_gd/ (``metrics/formulas``); a subpackage (``report/figures``) counts all
    its modules."""
    versions = {}
    for m in modules:
        if (SRC / m).is_dir():
            digest = hashlib.sha256()
            for path in sorted((SRC / m).glob("*.py")):
                digest.update(path.name.encode())
                digest.update(path.read_bytes())
        else:
            digest = hashlib.sha256((SRC / f"{m}.py").read_bytes())
        versions[m] = digest.hexdigest()[:16]
    return versions


# The code each job executes, module by module (tests/unit/test_code_versions.py checks each list
# against the imports of its rule's script). Not config/resolve.py, data/presets.py or plan.py:
# they decide what a job does, and what they decide reaches it as a parameter (the run spec, a
# task's resolved spec, the presets a twin or the built-in model reads), so an edit of them that
# changes no job's parameters reruns nothing, and one that does reruns exactly the jobs it changes
# (tests/workflow/test_workflow.py). Nor how a job writes and logs (common/atomic, frames, runtime, warm,
# checksums): an edit there changes no result.
EXTRACTION_CODE = code_version("activations/cache", "activations/capture", "activations/extract", "activations/training", "common/provenance", "common/specs", "data/prompts", "data/splits", "models/loading")
MODEL_CODE = code_version("common/specs", "data/prompts", "models/builtin", "models/loading")
VARIANT_CODE = code_version("models/loading")
GGUF_CODE = code_version("models/loading")
STATISTICS_CODE = code_version("models/loading")
TWIN_CODE = code_version("common/specs", "data/twins")
DATA_CODE = code_version("common/specs", "data/sources")
# a task on a package's corpus also executes icl_gd/data/corpora.py (its parser, label rules and split):
# an edit of it remakes those tasks' data, not the others'
PACKAGE_DATA_CODE = code_version("common/specs", "data/corpora", "data/sources")
# a run's scores and their aggregate; the comparisons, the claims' tests and the orders on top
METRICS_CODE = code_version("activations/cache", "common/provenance", "metrics/formulas", "metrics/inference", "metrics/resampling", "metrics/scoring", "metrics/units")
COMPARISONS_CODE = code_version("activations/cache", "common/provenance", "metrics/comparisons", "metrics/formulas", "metrics/inference", "metrics/resampling", "metrics/scoring", "metrics/units")
CLAIMS_CODE = code_version("activations/cache", "common/names", "common/provenance", "metrics/claim_tests", "metrics/claims", "metrics/formulas", "metrics/inference", "metrics/resampling", "metrics/scoring", "metrics/units")
ORDERS_CODE = code_version("activations/cache", "common/provenance", "metrics/formulas", "metrics/inference", "metrics/orders", "metrics/resampling", "metrics/scoring", "metrics/units")
# the data table's statistics: an edit of them reruns no run's scores
TASK_STATISTICS_CODE = code_version("activations/cache", "common/provenance", "metrics/statistics")
DATA_STATISTICS_CODE = code_version("common/provenance")
# every table, figure and the first page: one script each, through report/outputs.py; the claims'
# text (report/claims_text.py) is here, not in CLAIMS_CODE, so that rewording it reruns no test
REPORT_CODE = code_version("activations/cache", "common/names", "common/provenance", "metrics/claims", "metrics/formulas", "metrics/inference", "metrics/resampling", "metrics/units", "report/claims_text", "report/figures", "report/outputs", "report/published", "report/render", "report/selection", "report/summary", "report/tables")
# Every number the papers print, in the workflow's names: the reproduction table and figure read it
# from the checkout (report/outputs.PUBLISHED), and rerun, through this checksum, when it changes.
PUBLISHED_VERSION = hashlib.sha256((Path(workflow.basedir) / "docs" / "published.csv").read_bytes()).hexdigest()[:16]


def published_version(wildcards):
    return PUBLISHED_VERSION if "reproduction" in (wildcards.get("table"), wildcards.get("figure")) else None


def _names_regex(names):
    names = sorted(names)
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


def models_by_source(source):
    return [m for m, spec in config["models"].items() if spec["source"] == source]


def tasks_by_source(source):
    return [t for t in config["tasks"] if cfg.task_spec(config, t).source == source]


MODELS = list(config["models"])
TASKS = list(config["tasks"])
METHODS = list(config["methods"])
VARIANTS = list(config["variants"])
BUILTIN_TASKS = list(cfg.TASK_PRESETS)
# A model job asks for the gpu resource only where it will run on CUDA: on a CPU-only machine the
# profile's gpu cap would otherwise run the extractions one at a time. Cluster profiles set it.
_N_GPUS = len(runtime.visible_gpus())  # nvidia-smi once, not per question
MODEL_GPUS = int(runtime.wants_gpu(config["device"], count=_N_GPUS))
# The gpu cap (profile or --resources gpu=N) counts model jobs on GPUs at once, over all GPUs;
# claim_gpu lets that many, spread over the GPUs, share one. Handed over as a resource, not a
# param: params are a rerun trigger, and how jobs share a GPU does not change what they compute.
# profiles/slurm sets it to 1 (set-resources), as each SLURM job has a GPU of its own.
JOBS_PER_GPU = runtime.jobs_per_gpu(getattr(workflow.global_resources.get("gpu"), "value", None), _N_GPUS)


wildcard_constraints:
    model=_names_regex(MODELS),
    task=_names_regex(TASKS),
    twin=_names_regex(BUILTIN_TASKS),
    variant=_names_regex(cfg.MODEL_VARIANTS),
    seed=r"\d+",
    order=r"[1-9]\d*",


RUNS = plan.runs(config)


def variant_dir(model, variant):
    """Where a model variant lives: a local model is read in place, all else under resources/."""
    spec = config["models"][model]
    if variant == "trained" and spec["source"] == "local":
        return spec["path"]
    return f"resources/models/{model}/{variant}"


def model_dir(wildcards):
    return variant_dir(wildcards.model, wildcards.variant)


def trained_model_dir(wildcards):
    return variant_dir(wildcards.model, "trained")


def trained_model_dirs(wildcards):
    """Every model's trained folder, by model name."""
    return {model: variant_dir(model, "trained") for model in MODELS}


def task_files(wildcards):
    return {
        "train": f"resources/datasets/{wildcards.task}/train.parquet",
        "eval": f"resources/datasets/{wildcards.task}/eval.parquet",
    }


def task_sources(wildcards):
    """A synthetic task is normalised from its twin, a package task from its corpus's archive (rule
    fetch_package); hub and local tasks need no input file."""
    spec = cfg.task_spec(config, wildcards.task)
    if spec.source == "package":
        return {"archive": str(corpora.archive_path(corpora.get(spec.corpus)))}
    if spec.source != "synthetic":
        return {}
    return {
        "twin_train": f"resources/synthetic/{wildcards.task}/train.parquet",
        "twin_eval": f"resources/synthetic/{wildcards.task}/eval.parquet",
    }


def data_code(wildcards):
    """The code a task's data job executes (its rerun trigger): a package task's includes corpora.py."""
    return PACKAGE_DATA_CODE if cfg.task_spec(config, wildcards.task).source == "package" else DATA_CODE


# The distribution files that the config's package tasks read (rule fetch_package).
PACKAGE_ARCHIVES = sorted({corpora.get(s.corpus).dist.file for s in (cfg.task_spec(config, t) for t in config["tasks"])
                           if s.source == "package"})


def fetch_archive(dist, target, log):
    """Rule fetch_package's job, in Snakemake's own process (icl_gd.data.corpora.fetch: pip, the hash
    pinned), its messages in the rule's log."""
    with open(log, "w") as f, contextlib.redirect_stderr(f):
        corpora.fetch(corpora.Distribution(**dist), target)


def data_sources():
    """Each task's data, as the data table's caption and the first page say it: its source, and for
    a package corpus where the text comes from and what the task's label rule made of it (sizes)."""
    out = {}
    for task in TASKS:
        spec = cfg.task_spec(config, task)
        entry = {"source": spec.source}
        if spec.source == "package":
            corpus = corpora.get(spec.corpus)
            label_rule = corpus.rules[spec.label_rule]
            entry.update({"corpus": corpus.name, "about": corpora.corpus_about(corpus),
                          "short": f"{corpus.short}; licence: {corpus.licence}",
                          "rule": corpora.rule_about(corpus, label_rule, list(spec.label_words)),
                          "size": corpora.size_about(corpus, label_rule)})
        elif spec.source == "hub":
            entry["id"] = spec.hub_id
        elif spec.source == "local":
            entry["path"] = spec.path
        out[task] = entry
    return out


# The activation cache of a (model, variant, task, seed, setting): icl_gd.activations.cache.SUFFIX.
CACHE = "results/activations/{model}/{variant}/{task}/seed{seed}/{setting}.arrow"


ZSL_CACHE = "results/activations/{model}/{variant}/{task}/seed{seed}/zsl.arrow"


def cache_output(path=CACHE):
    """An extraction rule's cache: with `caches: temporary` a temp() file, which Snakemake deletes
    once every job that reads it (the metrics, the settings that store their changes from it) is
    done; the run then holds only the caches in flight, not the grid's."""
    return temp(path) if config["caches"] == "temporary" else path


# A further order of a run's demonstrations (config key orders; icl_gd/metrics/orders.py): its ICL and
# finetuned caches beside the run's, the ZSL cache shared.
ORDER_CACHE = "results/activations/{model}/{variant}/{task}/seed{seed}/order{order}/{setting}.arrow"
ORDER_RUNS = plan.order_runs(config)


def order_setting_caches(wildcards):
    """ZSL (the run's), and ICL and the method in the further order."""
    _, icl, method = plan.run_settings(config, wildcards.method)
    return {"zsl": zsl_cache(wildcards), "icl": ORDER_CACHE.format(**wildcards, setting=icl),
            "ft": ORDER_CACHE.format(**wildcards, setting=method)}


ORDER_EXAMPLES = "results/metrics/orders/examples/{model}/{variant}/{task}/seed{seed}/order{order}/{method}.parquet"
ORDER_RUN = "results/metrics/orders/runs/{model}/{variant}/{task}/seed{seed}/{method}.parquet"


def run_in_every_order(wildcards):
    """One run's per-example files in its own order, then in each further one."""
    own = "results/metrics/examples/{model}/{variant}/{task}/seed{seed}/{method}.parquet".format(**wildcards)
    return [own] + [ORDER_EXAMPLES.format(**wildcards, order=o) for o in range(1, config["orders"])]


def all_order_runs():
    """Every run with its order sensitivity (none where orders is 1)."""
    keys = sorted({tuple(r[k] for k in ("model", "variant", "task", "seed", "method")) for r in ORDER_RUNS})
    return [ORDER_RUN.format(model=m, variant=v, task=t, seed=s, method=x) for m, v, t, s, x in keys]


def all_order_activations():
    return [] if config["caches"] == "temporary" else [ORDER_CACHE.format(**e) for e in plan.order_extractions(config)]


# Priorities keep a run depth-first: scoring (which frees a run group's caches) first, then the
# settings of a run group whose ZSL is done, then the ZSL of a new group. With `caches: temporary`
# only the groups in flight are on disk, about one per job slot, not every group whose ZSL is done.
SCORE_PRIORITY = 2


def zsl_cache(wildcards):
    """The ZSL cache of a run: its task's, in the first seed's folder (plan.cache_seed)."""
    seed = plan.cache_seed(config, wildcards.task, "zsl", int(wildcards.seed))
    return CACHE.format(**{**wildcards, "seed": seed, "setting": "zsl"})


def reference_cache(wildcards):
    """The cache whose values a compact cache's changes are relative to: its run's ZSL."""
    if config["cache_dtype"] != "compact" or wildcards.get("setting", "zsl") == "zsl":
        return {}
    return {"reference": zsl_cache(wildcards)}


def run_spec(wildcards):
    """The run an extraction job executes; as a parameter, also its rerun trigger (plan.run_spec).
    The ZSL rule has no setting wildcard; only the further orders' rules have an order."""
    return plan.run_spec(config, wildcards.task, wildcards.get("setting", "zsl"), int(wildcards.seed),
                         order=int(wildcards.get("order", 0)))


def task_config(wildcards):
    """The task's spec, resolved from its preset and the config (prepare_task executes it). Not its
    seeds or learning rate: they are the extractions' (their run specs), so a new rate reruns the
    finetuning only, not the data and everything made from it."""
    spec = cfg.task_spec(config, wildcards.task).to_params()
    return {key: value for key, value in spec.items() if key not in ("seeds", "lr")}


def preset(task):
    """What the synthetic twins and the built-in model read of a built-in task's preset."""
    spec = cfg.task_spec({"tasks": {task: {}}}, task)
    return {"template": spec.template, "label_words": list(spec.label_words)}


def setting_caches(wildcards):
    """ZSL, ICL and FT caches of a run, and its baseline method's cache for alpha."""
    _, icl, method = plan.run_settings(config, wildcards.method)
    caches = {"zsl": zsl_cache(wildcards), "icl": CACHE.format(**wildcards, setting=icl),
              "ft": CACHE.format(**wildcards, setting=method)}
    baseline = plan.baseline_of(config, wildcards.variant, wildcards.method)
    if baseline is not None:
        caches["base"] = CACHE.format(**wildcards, setting=baseline)
    return caches


def all_activations():
    """Every cache, as a target of the run: in `caches: temporary` none (a target is kept)."""
    if config["caches"] == "temporary":
        return []
    return [CACHE.format(**e) for e in plan.extractions(config)]


def all_run_metrics():
    return ["results/metrics/runs/{model}/{variant}/{task}/seed{seed}/{method}.parquet".format(**r) for r in RUNS]


def all_run_examples():
    return ["results/metrics/examples/{model}/{variant}/{task}/seed{seed}/{method}.parquet".format(**r) for r in RUNS]


def model_spec(wildcards):
    return config["models"][wildcards.model]


# The report's inputs. The metric tables they read are named by the rules that write them
# (rules.<name>.output): called when the DAG is built, after every rule file is read.
REPORT_MODEL = plan.report_model(config)
REPORT_VARIANT = plan.report_variant(config)
REPORT_METHODS = plan.report_methods(config)
TABLES = plan.tables(config)
FIGURES = plan.figures(config)
_GRAD_NORM_DEFAULT = _SCHEMA["properties"]["report"]["properties"]["grad_norm_task"]["default"]


def grad_norm_run():
    return plan.grad_norm_run(config, _GRAD_NORM_DEFAULT)


def figure_inputs(wildcards):
    """The gradient-norm heatmaps read training logs only; every other figure the metrics."""
    if wildcards.figure == "grad_norms":
        task, seed = grad_norm_run()
        base = f"results/training/{REPORT_MODEL}/{REPORT_VARIANT}/{task}/seed{seed}"
        return {"train_logs": [f"{base}/{method}.parquet" for method in REPORT_METHODS]}
    if wildcards.figure == "reproduction":
        return {"summary": rules.aggregate_metrics.output.summary}
    if wildcards.figure == "claims":
        return {"claims": rules.evaluate_claims.output.table}
    if wildcards.figure == "orders":
        return {"orders": rules.order_sensitivity.output.table}
    if wildcards.figure == "sizes":
        return {"summary": rules.aggregate_metrics.output.summary, "sizes": rules.model_statistics.output[0]}
    return {"runs": rules.aggregate_metrics.output.runs, "summary": rules.aggregate_metrics.output.summary}


def figure_params(wildcards):
    return plan.figure_params(config, wildcards.figure)


def figure_about(wildcards):
    """For the captions: the config file(s) and ``--config`` overrides, every task with its seeds,
    and the run of the gradient-norm heatmaps. A parameter, so that running with another config
    reruns the figure jobs (seconds each) and a caption always names the config of its figure."""
    about = run_about()
    if wildcards.figure == "grad_norms":
        about["grad_norm_task"], about["grad_norm_seed"] = grad_norm_run()
    return about


def run_about():
    """The config file(s), ``--config`` overrides and every task with its seeds."""
    cwd = Path.cwd()
    files = [
        str(Path(f).resolve().relative_to(cwd)) if Path(f).resolve().is_relative_to(cwd) else str(f)
        for f in workflow.configfiles
    ]
    about = dict(
        configfiles=files,
        # --config, but for warm_worker: how jobs start is no part of a figure, and must rerun none
        overrides=", ".join(f"{k}={v}" for k, v in workflow.config_settings.config.items() if k != "warm_worker"),
        seeds={task: cfg.task_seeds(config, task) for task in TASKS},
    )
    return about


REPORT_DIR = config["report"]["dir"].rstrip("/")


def report_outputs():
    return [f"{REPORT_DIR}/summary.md", f"{REPORT_DIR}/summary.rst"] + expand(f"{REPORT_DIR}/tables/{{table}}.{{ext}}", table=TABLES, ext=["md", "tex", "csv", "html"]) + expand(
        f"{REPORT_DIR}/figures/{{figure}}.{{ext}}", figure=FIGURES, ext=["png", "pdf"]
    )


def first_page_inputs(wildcards):
    inputs = {"data": rules.data_statistics.output[0], "summary": rules.aggregate_metrics.output.summary}
    if config["report"]["reproduction"]:
        inputs["claims"] = rules.evaluate_claims.output.table
    return inputs


def first_page_about(wildcards):
    """What was run, for the first page: as the figures' captions say it, with the models' sources
    and the variants and k."""
    about = run_about()
    about.update(
        models={name: spec.get("id") or spec.get("package") or spec["source"] for name, spec in config["models"].items()},
        data=data_sources(),
        variants=list(config["variants"]),
        k=sorted({cfg.setting_k(config, m) for methods in config["variants"].values() for m in methods}),
    )
    return about


def report_description():
    """The report's landing page: the run's first page once the run has written it, else a page
    that says to run the workflow first."""
    page = Path(REPORT_DIR, "summary.rst").resolve()
    return str(page) if page.exists() else "workflow/report/workflow.rst"


def remove_stale_reports():
    """Tables and figures in the report folder that this config does not plan (an earlier
    config's): a report folder holds what its run produced, nothing else."""
    planned = {Path(p).resolve() for p in report_outputs()}
    for pattern in ("tables/*.md", "tables/*.tex", "tables/*.csv", "tables/*.html", "figures/*.png", "figures/*.pdf"):
        for path in Path(REPORT_DIR).glob(pattern):
            if path.resolve() not in planned:
                path.unlink()
                print(f"removed {path}: not a table or figure of this config", file=sys.stderr)


_WARM = {}


def start_warm_worker():
    """The worker that runs this run's jobs with the libraries already imported (icl_gd/common/warm.py),
    announced to them in the environment they inherit. Local runs only: a SLURM job or a conda
    env runs a Python of its own. The jobs that start before it has finished its imports run as
    they would without it."""
    local = getattr(workflow.executor_plugin, "name", "local") == "local"
    if config["warm_worker"] and warm.enabled() and local and not workflow.deployment_settings.deployment_method:
        _WARM["socket"] = os.environ[warm.SOCKET_ENV] = warm.start_server("results/logs/warm_worker.log")


def stop_warm_worker():
    if "socket" in _WARM:
        os.environ.pop(warm.SOCKET_ENV, None)
        warm.stop_server(_WARM.pop("socket"))


def task_statistics_files(wildcards):
    """A task's splits, and its ZSL and ICL caches of the report's model and first seed."""
    seed = cfg.task_seeds(config, wildcards.task)[0]
    run = dict(model=REPORT_MODEL, variant=REPORT_VARIANT, task=wildcards.task, seed=seed)
    return {
        "train": f"resources/datasets/{wildcards.task}/train.parquet",
        "eval": f"resources/datasets/{wildcards.task}/eval.parquet",
        "zsl": CACHE.format(**run, setting="zsl"),
        "icl": CACHE.format(**run, setting="icl"),
    }


def table_inputs(wildcards):
    inputs = {}
    if wildcards.table == "orders":
        inputs["orders"] = rules.order_sensitivity.output.table
    elif wildcards.table == "comparisons":
        inputs["comparisons"] = rules.compare_methods.output.table
    elif wildcards.table == "data":
        inputs["data"] = rules.data_statistics.output[0]
    elif wildcards.table == "claims":
        inputs["claims"] = rules.evaluate_claims.output.table
    else:
        inputs["summary"] = rules.aggregate_metrics.output.summary
    return inputs


def table_roles(wildcards):
    """The published methods the run has, for the two tables that set it beside the papers."""
    return plan.published_roles(config) if wildcards.table in ("reproduction", "claims") else {}


# ------------------------------------------------------------------------------------------------
# Table captions. The caption of a table in the Snakemake report (workflow/report/tables.rst) is
# this parameter, and the table job writes the same text into its .md and .tex: one source.


def table_caption(wildcards):
    # the data table's names the real text its tasks ran on (a package corpus: origin, size, rule, licence)
    sources = data_sources() if wildcards.table == "data" else None
    return names.table_caption(wildcards.table, ci_level=config["statistics"]["ci_level"], data_sources=sources)
