# Config validation, the run grid, and the path and input helpers every stage uses.

import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(workflow.basedir) / "src"))  # works before `pip install -e .` too

from icl_gd import config as cfg, runtime


# A config file named on the command line replaces config.yaml rather than being merged into it:
# a merge would keep the default's models and tasks in every other config's runs.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"



with open(Path(workflow.basedir) / "workflow/schemas/config.schema.yaml") as _schema:
    _validated = cfg.validate(config, yaml.safe_load(_schema))
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
MODEL_GPUS = int(runtime.wants_gpu(config["device"]))


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


def run_settings(method):
    """The caches a run compares: ZSL, ICL on the method's demonstrations, and the method."""
    return ["zsl", cfg.icl_setting(config, method), method]


def setting_caches(wildcards):
    base = "results/activations/{model}/{variant}/{task}/seed{seed}".format(**wildcards)
    return {role: f"{base}/{s}.parquet" for role, s in zip(("zsl", "icl", "ft"), run_settings(wildcards.method))}


def all_activations():
    files = set()
    for run in runs():
        base = "results/activations/{model}/{variant}/{task}/seed{seed}".format(**run)
        files.update(f"{base}/{s}.parquet" for s in run_settings(run["method"]))
    return sorted(files)


def all_run_metrics():
    return ["results/metrics/runs/{model}/{variant}/{task}/seed{seed}/{method}.parquet".format(**r) for r in runs()]


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


# paper 003 Table 1 (accuracy, Jaccard); paper 001 Table 2 (methods); paper 001 Table 1 (variants)
TABLES = ["accuracy", "methods"] + (["variants"] if len(VARIANTS) > 1 else [])
# paper 001 Fig. 3 (per-layer similarity); accuracy per task
FIGURES = ["per_layer", "accuracy"]


def report_outputs():
    return expand("reports/tables/{table}.{ext}", table=TABLES, ext=["md", "tex", "csv"]) + expand(
        "reports/figures/{figure}.{ext}", figure=FIGURES, ext=["png", "pdf"]
    )
