# Config validation, the run grid, and the path and input helpers every stage uses.

import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(workflow.basedir) / "src"))  # works before `pip install -e .` too

from icl_gd import config as cfg
from icl_gd import validation


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
    """The method the others are compared with in the report, if the report variant runs it."""
    baseline = config["statistics"]["baseline_method"]
    return baseline if baseline in report_methods() else None


def _spec(method, **changes):
    spec = {k: v for k, v in cfg.method_spec(config, method).items()}
    spec.update(changes)
    return spec


def layer_causal_methods(clipped):
    """The report variant's layer-causal methods on gold labels, with or without clipping."""
    return [
        m for m in report_methods()
        if _spec(m)["kind"] == "lcgd" and _spec(m)["demo_labels"] == "gold"
        and (_spec(m)["clip_grad_norm"] is not None) == clipped
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
# paper 001 Fig. 3 (per-layer similarity); accuracy per task
FIGURES = ["per_layer", "accuracy"]


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
