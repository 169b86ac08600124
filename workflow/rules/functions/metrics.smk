# The metrics stage's paths and input functions (rules in workflow/rules/metrics.smk).
# Functions only: Snakemake's linter asks that a file hold rules or functions, not both.


# A run's per-example values (rule score_run), which every analysis over runs reads.
RUN_EXAMPLES = "results/metrics/examples/{model}/{variant}/{task}/seed{seed}/{method}.parquet"


ORDER_EXAMPLES = "results/metrics/orders/examples/{model}/{variant}/{task}/seed{seed}/order{order}/{method}.parquet"


ORDER_RUN = "results/metrics/orders/runs/{model}/{variant}/{task}/seed{seed}/{method}.parquet"


def run_in_every_order(wildcards):
    """One run's per-example files in its own order, then in each further one."""
    own = RUN_EXAMPLES.format(**wildcards)
    return [own] + [ORDER_EXAMPLES.format(**wildcards, order=o) for o in range(1, config["orders"])]


def all_order_runs():
    """Every run with its order sensitivity (none where orders is 1)."""
    keys = sorted({tuple(r[k] for k in ("model", "variant", "task", "seed", "method")) for r in ORDER_RUNS})
    return [ORDER_RUN.format(model=m, variant=v, task=t, seed=s, method=x) for m, v, t, s, x in keys]


def all_run_metrics():
    return ["results/metrics/runs/{model}/{variant}/{task}/seed{seed}/{method}.parquet".format(**r) for r in RUNS]


def all_run_examples():
    return [RUN_EXAMPLES.format(**r) for r in RUNS]


# A run of the premise alone, on a seed the claims do not read (config key premise.seeds): ZSL, ICL,
# ICL on permuted labels and on novel label words, no finetuned model (plan.premise_icl_runs).
PREMISE_ICL = "results/metrics/premise_icl/{model}/{variant}/{task}/seed{seed}/{method}.parquet"


def premise_icl_caches(wildcards):
    """A premise run's ZSL (its task's), ICL on its method's demonstrations, and ICL on permuted labels
    and on novel label words."""
    return {"zsl": zsl_cache(wildcards), "icl": CACHE.format(**wildcards, setting=cfg.icl_setting(config, wildcards.method)),
            "permuted": CACHE.format(**wildcards, setting=cfg.PERMUTED_SETTING),
            "novel": CACHE.format(**wildcards, setting=cfg.NOVEL_SETTING)}


def all_premise_examples():
    """The runs of the premise's further seeds, which only the premise reads: the finetuning
    methods' (premise.finetuning, scored as every run is) and the premise's own without one."""
    full = [RUN_EXAMPLES.format(**r) for r in plan.premise_runs(config)]
    return full + [PREMISE_ICL.format(**r) for r in plan.premise_icl_runs(config)]


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
