# Config validation, the run grid, and the path and input helpers every stage uses.

import json
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(workflow.basedir) / "src"))  # works before `pip install -e .` too

from icl_gd import config as cfg
from icl_gd import labels, runtime, validation


# A config file named on the command line replaces config.yaml rather than being merged into it:
# a merge would keep the default's models and tasks in every other config's runs.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"



with open(Path(workflow.basedir) / "workflow/schemas/config.schema.yaml") as _schema:
    _validated = validation.validate(config, yaml.safe_load(_schema))
config.clear()
config.update(_validated)

SRC = Path(workflow.basedir) / "src" / "icl_gd"
# Snakemake's code trigger sees a rule's own script, not the modules it imports: list them as
# inputs, so that editing the extraction code reruns the extraction and editing a metric reruns
# only the metrics and what follows.
EXTRACTION_CODE = [
    str(SRC / f"{m}.py")
    for m in ("config", "cache", "data", "models", "prompts", "capture", "training", "extract")
]
MODEL_CODE = [str(SRC / f"{m}.py") for m in ("config", "data", "models", "prompts", "builtin")]
METRICS_CODE = [str(SRC / f"{m}.py") for m in ("cache", "metrics", "scoring")]
REPORT_CODE = [str(SRC / f"{m}.py") for m in ("labels", "tables", "figures", "report")]
# the gradient-norm figure reads training logs through the cache module
FIGURE_CODE = REPORT_CODE + [str(SRC / "cache.py")]


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


def runs():
    """Every (model, variant, task, seed, method) of the config."""
    for model in MODELS:
        for variant, methods in config["variants"].items():
            for task in TASKS:
                for seed in cfg.task_seeds(config, task):
                    for method in methods:
                        yield dict(model=model, variant=variant, task=task, seed=seed, method=method)


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


def task_files(wildcards):
    return {
        "train": f"resources/datasets/{wildcards.task}/train.parquet",
        "eval": f"resources/datasets/{wildcards.task}/eval.parquet",
    }


def synthetic_source(wildcards):
    """A synthetic task is normalised from its twin; hub and local tasks need no input file."""
    if cfg.task_spec(config, wildcards.task).source != "synthetic":
        return {}
    return {
        "twin_train": f"resources/synthetic/{wildcards.task}/train.parquet",
        "twin_eval": f"resources/synthetic/{wildcards.task}/eval.parquet",
    }


def run_params(wildcards):
    """The config values a cache depends on (params trigger: a config edit reruns just those)."""
    return cfg.run_params(config, wildcards.task, wildcards.setting)


def task_config(wildcards):
    return config["tasks"][wildcards.task]


def run_settings(method):
    """The caches a run compares: ZSL, ICL on the method's demonstrations, and the method."""
    return ["zsl", cfg.icl_setting(config, method), method]


def baseline_of(variant, method):
    """The method a run is compared with (alpha, paired tests), if its variant runs it."""
    baseline = config["statistics"]["baseline_method"]
    if baseline is None or method == baseline or baseline not in config["variants"][variant]:
        return None
    return baseline


def setting_caches(wildcards):
    """ZSL, ICL and FT caches of a run, and its baseline method's cache for alpha."""
    base = "results/activations/{model}/{variant}/{task}/seed{seed}".format(**wildcards)
    caches = {role: f"{base}/{s}.parquet" for role, s in zip(("zsl", "icl", "ft"), run_settings(wildcards.method))}
    baseline = baseline_of(wildcards.variant, wildcards.method)
    if baseline is not None:
        caches["base"] = f"{base}/{baseline}.parquet"
    return caches


def all_activations():
    files = set()
    for run in runs():
        base = "results/activations/{model}/{variant}/{task}/seed{seed}".format(**run)
        files.update(f"{base}/{s}.parquet" for s in run_settings(run["method"]))
    return sorted(files)


def all_run_metrics():
    return ["results/metrics/runs/{model}/{variant}/{task}/seed{seed}/{method}.parquet".format(**r) for r in runs()]


def all_run_examples():
    return ["results/metrics/examples/{model}/{variant}/{task}/seed{seed}/{method}.parquet".format(**r) for r in runs()]


def all_training_logs():
    return ["results/training/{model}/{variant}/{task}/seed{seed}/{method}.parquet".format(**r) for r in runs()]


def report_model():
    return config["report"]["model"] or MODELS[0]


def model_spec(wildcards):
    return config["models"][wildcards.model]


def report_variant():
    """The variant the per-method tables and figures show: trained, when it runs."""
    return "trained" if "trained" in config["variants"] else VARIANTS[0]


def report_methods():
    return config["variants"][report_variant()] or METHODS[:1]


def report_baseline():
    """The method alpha is measured against in the report variant, if that variant runs it."""
    variant = report_variant()
    return next((baseline_of(variant, m) for m in report_methods() if baseline_of(variant, m)), None)


def _spec(method, **changes):
    return {**cfg.method_spec(config, method), **changes}


def layer_causal_methods(clipped):
    """The report variant's layer-causal methods on gold labels, with or without clipping."""
    specs = {m: _spec(m) for m in report_methods()}
    return [
        m for m, spec in specs.items()
        if spec["kind"] == "lcgd" and spec["demo_labels"] == "gold" and (spec["clip_grad_norm"] is not None) == clipped
    ]


def paper002_methods():
    """Label-switched and linearized methods, each after its plain counterpart (the method whose
    spec differs only in demo_labels / kind), as paper 002 compares them."""
    ordered = []
    for m in report_methods():
        spec = _spec(m)
        if spec["demo_labels"] == "gold" and spec["kind"] != "linearized":
            continue
        plain = _spec(m, demo_labels="gold", kind="gd" if spec["kind"] == "linearized" else spec["kind"])
        twins = [p for p in report_methods() if p != m and _spec(p) == plain]
        ordered += [p for p in twins[:1] if p not in ordered] + [m]
    return ordered


def report_tables():
    """The tables that the config has data for."""
    tables = ["accuracy", "methods", "intervals", "data"]  # 003 Table 1, 001 Table 2, CIs, 001 Table 3
    if len(VARIANTS) > 1:
        tables.append("variants")  # paper 001 Table 1
    if report_baseline() and layer_causal_methods(clipped=False):
        tables.append("layer_causal")  # paper 003 Table 2
    if report_baseline() and layer_causal_methods(clipped=True):
        tables.append("clipping")  # paper 003 Table 3
    if paper002_methods():
        tables.append("paper002")  # label switching and linearized FT
    if report_baseline() and len(report_methods()) > 1:
        tables.append("comparisons")
    return tables


TABLES = report_tables()


def grad_norm_run():
    """Task and seed of the gradient-norm heatmaps: ``report.grad_norm_task`` and its first seed.
    The default (Subj, as in the papers) falls back to the first task when the config does not
    run Subj; a task named on purpose must be one of the config's."""
    task = config["report"]["grad_norm_task"]
    if task not in TASKS:
        with open(Path(workflow.basedir) / "workflow/schemas/config.schema.yaml") as schema:
            default = yaml.safe_load(schema)["properties"]["report"]["properties"]["grad_norm_task"]["default"]
        if task != default:
            raise cfg.ConfigError(f"config key report.grad_norm_task: {task!r} is not one of the tasks {TASKS}")
        task = TASKS[0]
    return task, cfg.task_seeds(config, task)[0]


def lr_sweeps():
    """The report variant's methods grouped by everything but their learning rate (``lr``,
    ``lr_scale``): one row (group, method, task, lr) per method and task of every group whose
    methods train some task at different rates. Empty when the config sweeps nothing."""
    groups = {}
    for method in report_methods():
        spec = cfg.method_spec(config, method)
        key = json.dumps({k: v for k, v in spec.items() if k not in ("lr", "lr_scale")}, sort_keys=True, default=str)
        groups.setdefault(key, []).append(method)
    rows = []
    for members in groups.values():
        if not any(len({cfg.learning_rate(config, t, m) for m in members}) > 1 for t in TASKS):
            continue
        # named after the method that trains at the tasks' own rates, when the sweep has one
        plain = [m for m in members if config["methods"][m].get("lr") is None and config["methods"][m].get("lr_scale", 1.0) == 1.0]
        group = labels.method_label(plain[0] if plain else members[0])
        rows += [dict(group=group, method=m, task=t, lr=cfg.learning_rate(config, t, m)) for m in members for t in TASKS]
    return rows


# What the report's figures show; a figure that does not apply to the config is not planned.
FIGURES = ["per_layer", "accuracy"]  # paper 001 Fig. 3; accuracy per task
FIGURES += ["alpha"] if report_baseline() else []  # paper 001 Fig. 2
FIGURES += ["grad_norms", "prediction_changes"]  # paper 001 Fig. 4 / 003 Fig. 3; paper 003 Fig. 1
FIGURES += ["lr_sweep"] if lr_sweeps() else []
FIGURES += ["models"] if len(MODELS) > 1 else []


def figure_inputs(wildcards):
    """The gradient-norm heatmaps read training logs only; every other figure the metrics."""
    if wildcards.figure == "grad_norms":
        task, seed = grad_norm_run()
        base = f"results/training/{report_model()}/{report_variant()}/{task}/seed{seed}"
        return {"train_logs": [f"{base}/{method}.parquet" for method in report_methods()], "code": FIGURE_CODE}
    return {"runs": "results/metrics/runs.parquet", "summary": "results/metrics/summary.parquet", "code": FIGURE_CODE}


def figure_params(wildcards):
    """What ``report.write_figures`` needs for one figure, and nothing more: a config edit then
    reruns only the figures it changes (params trigger)."""
    params = dict(model=report_model(), variant=report_variant(), methods=report_methods())
    if wildcards.figure in ("per_layer", "accuracy", "alpha", "lr_sweep", "models"):
        params["ci_level"] = config["statistics"]["ci_level"]
    if wildcards.figure == "alpha":
        params["baseline"] = report_baseline()
    if wildcards.figure == "lr_sweep":
        params["lr_sweep"] = lr_sweeps()
    if wildcards.figure == "models":
        params["models"] = MODELS
    return params


def figure_about(wildcards):
    """For the captions: the config file(s) and ``--config`` overrides, every task with its seeds,
    and the run of the gradient-norm heatmaps. A parameter, so that running with another config
    reruns the figure jobs (seconds each) and a caption always names the config of its figure."""
    cwd = Path.cwd()
    files = [
        str(Path(f).resolve().relative_to(cwd)) if Path(f).resolve().is_relative_to(cwd) else str(f)
        for f in workflow.configfiles
    ]
    about = dict(
        configfiles=files,
        overrides=", ".join(f"{k}={v}" for k, v in workflow.config_settings.config.items()),  # --config
        seeds={task: cfg.task_seeds(config, task) for task in TASKS},
    )
    if wildcards.figure == "grad_norms":
        about["grad_norm_task"], about["grad_norm_seed"] = grad_norm_run()
    return about


def report_outputs():
    return expand("reports/tables/{table}.{ext}", table=TABLES, ext=["md", "tex", "csv"]) + expand(
        "reports/figures/{figure}.{ext}", figure=FIGURES, ext=["png", "pdf"]
    )


def data_statistics_files():
    """Each task's splits, and its ZSL and ICL caches of the report's model and first seed."""
    files = {}
    for task in TASKS:
        seed = cfg.task_seeds(config, task)[0]
        base = f"results/activations/{report_model()}/{report_variant()}/{task}/seed{seed}"
        files[task] = {
            "train": f"resources/datasets/{task}/train.parquet",
            "eval": f"resources/datasets/{task}/eval.parquet",
            "zsl": f"{base}/zsl.parquet",
            "icl": f"{base}/icl.parquet",
        }
    return files


def table_inputs(wildcards):
    inputs = {"code": REPORT_CODE}
    if wildcards.table == "comparisons":
        inputs["comparisons"] = "results/metrics/comparisons.parquet"
    elif wildcards.table == "data":
        inputs["data"] = "results/metrics/data_statistics.parquet"
    else:
        inputs["summary"] = "results/metrics/summary.parquet"
    return inputs


# ------------------------------------------------------------------------------------------------
# Table captions. The caption of a table in the Snakemake report (workflow/report/tables.rst) is
# this parameter, and the table job writes the same text into its .md and .tex: one source.


def table_caption(wildcards):
    return labels.table_caption(wildcards.table, ci_level=config["statistics"]["ci_level"])
