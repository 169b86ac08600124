# The activations stage's paths and input functions (rules in workflow/rules/activations.smk).
# Functions only: Snakemake's linter asks that a file hold rules or functions, not both.


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


def all_order_activations():
    return [] if config["caches"] == "temporary" else [ORDER_CACHE.format(**e) for e in plan.order_extractions(config)]


# Priorities keep a run depth-first: scoring (which frees a run group's caches) first, then the
# settings of a run group whose ZSL is done, then the ZSL of a new group. With `caches: temporary`
# only the groups in flight are on disk, about one per job slot, not every group whose ZSL is done.
SCORE_PRIORITY = 2
# The analyses over every run (the aggregate, the order sensitivity, the claims) before the figures
# and tables that do not wait for them: the claims and the figures after them are a run's last jobs.
ANALYSIS_PRIORITY = 1


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
    The ZSL rule has no setting wildcard; only the further orders' rules have an order. A method
    that chooses its rate and epochs on development rows runs at its choice (finetuning_choice)."""
    setting = wildcards.get("setting", "zsl")
    return plan.run_spec(config, wildcards.task, setting, int(wildcards.seed), order=int(wildcards.get("order", 0)),
                         model=wildcards.model, chosen=finetuning_choice(wildcards, setting))


# The methods that choose their learning rate and epochs on development rows (methods.<name>.choose).
CHOOSING_METHODS = [m for m in METHODS if cfg.choice_grid(config, m) is not None]


def choice_spec(wildcards):
    """What a choice job executes, and its rerun trigger (plan.choice_job_spec)."""
    return plan.choice_job_spec(config, wildcards.model, wildcards.task)


def choice_models(wildcards):
    """The folders of the variants a choice job finetunes, as model_<variant>."""
    variants = dict.fromkeys(c["variant"] for c in plan.choices(config) if (c["model"], c["task"]) == (wildcards.model, wildcards.task))
    return {f"model_{v}": variant_dir(wildcards.model, v) for v in variants}


def _choice(wildcards, setting):
    """The finished choice job of a run's method (Snakemake's checkpoint object), or None where
    the method keeps its own rate; until that job has run, Snakemake's IncompleteCheckpointException,
    which holds the run back until it has."""
    if setting not in CHOOSING_METHODS:
        return None
    return checkpoints.choose_finetuning.get(model=wildcards.model, task=wildcards.task)


def finetuning_choice_made(wildcards):
    """No input file: the choice enters a finetuning job as its run spec's rate and epochs
    (finetuning_choice). Asking for the checkpoint here is what orders the job after its choice,
    and has Snakemake plan it again once the choice is made."""
    _choice(wildcards, wildcards.get("setting", "zsl"))
    return {}


def finetuning_choice(wildcards, setting):
    """A choosing method's (lr, epochs) for this run's model, variant and task, read from its
    choice job's table; None for a method that keeps its own rate."""
    found = _choice(wildcards, setting)
    if found is None:
        return None
    from icl_gd.metrics import setting_choice  # pandas: only in a run that chooses

    return setting_choice.read_chosen(found.output.table, wildcards.variant, setting)


# The (model, variant, task, seed) whose ICL also runs on permuted labels and on novel label words:
# where the premise reads them.
PERMUTED_RUNS = plan.permuted_runs(config)


def setting_caches(wildcards):
    """ZSL, ICL and FT caches of a run, its baseline method's cache for alpha, and where the
    premise reads its task and seed, ICL on permuted labels and on novel label words."""
    _, icl, method = plan.run_settings(config, wildcards.method)
    caches = {"zsl": zsl_cache(wildcards), "icl": CACHE.format(**wildcards, setting=icl),
              "ft": CACHE.format(**wildcards, setting=method)}
    baseline = plan.baseline_of(config, wildcards.variant, wildcards.method)
    if baseline is not None:
        caches["base"] = CACHE.format(**wildcards, setting=baseline)
    if (wildcards.model, wildcards.variant, wildcards.task, int(wildcards.seed)) in PERMUTED_RUNS:
        caches["permuted"] = CACHE.format(**wildcards, setting=cfg.PERMUTED_SETTING)
        caches["novel"] = CACHE.format(**wildcards, setting=cfg.NOVEL_SETTING)
    return caches


def all_activations():
    """Every cache, as a target of the run: in `caches: temporary` none (a target is kept)."""
    if config["caches"] == "temporary":
        return []
    return [CACHE.format(**e) for e in plan.extractions(config)]
