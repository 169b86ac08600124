# Config validation, the code each job executes (its rerun trigger), wildcards, and the warm
# worker. Each stage's paths and input functions are in workflow/rules/functions/<stage>.smk; what
# runs and why (the runs, the report's tables and figures, the pairings) is planned in icl_gd/planning/plan.py.

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
from icl_gd.planning import plan
from icl_gd.config import validation
from icl_gd.planning import resources as resources_
from icl_gd.models import origins
from icl_gd.common import code_versions


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

# The code each job executes (its rerun trigger, a parameter): the package modules its rule's script
# imports, directly or through other modules, read from the source (icl_gd/common/code_versions.py,
# which says what is left out and why). Not as input files: their absolute paths would tie a
# finished run to where its checkout lay, and a moved or copied run would plan everything again.
def code_of(script, leave_out=()):
    return code_versions.of_script(Path(workflow.basedir) / "workflow" / "scripts" / script, leave_out=leave_out)


# a task on a package's corpus also executes icl_gd/data/corpora.py (its parser, label rules and
# split): an edit of it remakes those tasks' data, not the others' (rule prepare_task, data_code)
PACKAGE_DATA_CODE = code_of("prepare_task.py")
DATA_CODE = code_of("prepare_task.py", leave_out=("data/corpora",))


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


def models_with_parts():
    return [m for m in models_by_source("gguf") if config["models"][m].get("parts")]


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


_WARM = {}


def local_run():
    return getattr(workflow.executor_plugin, "name", "local") == "local"


def warm_worker_wanted():
    """Whether this run's jobs run in the warm worker: local runs only, as a SLURM job or a conda
    env runs a Python of its own."""
    return bool(config["warm_worker"] and warm.enabled() and local_run() and not workflow.deployment_settings.deployment_method)


def start_warm_worker():
    """The worker that runs this run's jobs with the libraries already imported (icl_gd/common/warm.py),
    announced to them in the environment they inherit. The jobs that start before it has finished
    its imports run as they would without it."""
    if warm_worker_wanted():
        _WARM["socket"] = os.environ[warm.SOCKET_ENV] = warm.start_server("results/logs/warm_worker.log")


def stop_warm_worker():
    if "socket" in _WARM:
        os.environ.pop(warm.SOCKET_ENV, None)
        warm.stop_server(_WARM.pop("socket"))


# What the model jobs ask their scheduler for; then each stage's input functions, in the DAG's order.
include: "functions/resources.smk"
include: "functions/data.smk"
include: "functions/models.smk"
include: "functions/activations.smk"
include: "functions/metrics.smk"
include: "functions/report.smk"
