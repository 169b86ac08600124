# Metrics: pure functions of the caches, per run, then aggregated over seeds. These rules import
# no model code, so editing a metric never reruns an extraction. They are cheap: local rules.


localrules:
    disk_estimate,
    scores,
    score_run,
    score_order,
    order_run,
    order_sensitivity,
    aggregate_metrics,
    compare_methods,
    evaluate_claims,
    task_statistics,
    data_statistics,


rule score_run:
    input:
        unpack(setting_caches),
    output:
        scores="results/metrics/runs/{model}/{variant}/{task}/seed{seed}/{method}.parquet",
        examples="results/metrics/examples/{model}/{variant}/{task}/seed{seed}/{method}.parquet",
    wildcard_constraints:
        method=_names_regex(METHODS),
    params:
        code=METRICS_CODE,
        random_seed=config["random_baseline_seed"],
        statistics=config["statistics"],
    priority: SCORE_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/score_run/{model}/{variant}/{task}/seed{seed}/{method}.log",
    script:
        "../scripts/score_run.py"


# The further orders of a run (config key orders): each order scored as the run is, then the run's
# order sensitivity per example (icl_gd/metrics/orders.py), then the table over tasks and seeds.
rule score_order:
    input:
        unpack(order_setting_caches),
    output:
        examples=ORDER_EXAMPLES,
    wildcard_constraints:
        method=_names_regex(METHODS),
    params:
        code=METRICS_CODE,
        random_seed=config["random_baseline_seed"],
    priority: SCORE_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/score_order/{model}/{variant}/{task}/seed{seed}/order{order}/{method}.log",
    script:
        "../scripts/score_order.py"


rule order_run:
    input:
        run_in_every_order,
    output:
        ORDER_RUN,
    wildcard_constraints:
        method=_names_regex(METHODS),
    params:
        code=ORDERS_CODE,
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/order_run/{model}/{variant}/{task}/seed{seed}/{method}.log",
    script:
        "../scripts/order_run.py"


rule order_sensitivity:
    input:
        all_order_runs(),
    output:
        table="results/metrics/orders.parquet",
        csv="results/metrics/orders.csv",
    params:
        code=ORDERS_CODE,
        statistics=config["statistics"],
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/order_sensitivity.log",
    script:
        "../scripts/order_sensitivity.py"


# Every run scored, and nothing after: a target to cut a long run into pieces of runs, each with
# the caches it needs: `snakemake scores --batch scores=1/3`, 2/3, 3/3, then a plain run
# (docs/reruns.md). Batching `all` cannot do it: the report among its inputs needs every run.
rule scores:
    input:
        all_run_examples(),


rule aggregate_metrics:
    input:
        runs=all_run_metrics(),
        examples=all_run_examples(),
    output:
        runs="results/metrics/runs.parquet",
        summary="results/metrics/summary.parquet",
        csv="results/metrics/summary.csv",
    params:
        code=METRICS_CODE,
        statistics=config["statistics"],
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/aggregate_metrics.log",
    script:
        "../scripts/aggregate_metrics.py"


rule compare_methods:
    input:
        examples=all_run_examples(),
    output:
        table="results/metrics/comparisons.parquet",
        csv="results/metrics/comparisons.csv",
    params:
        code=COMPARISONS_CODE,
        statistics=config["statistics"],
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/compare_methods.log",
    script:
        "../scripts/compare_methods.py"


# The papers' claims tested on every model of the run (icl_gd/metrics/claims.py): per task the paired
# difference and its interval, the verdict, and what an inconclusive one would need.
rule evaluate_claims:
    input:
        examples=all_run_examples(),
        orders=all_order_runs(),
    output:
        table="results/metrics/claims.parquet",
        csv="results/metrics/claims.csv",
    params:
        code=CLAIMS_CODE,
        roles=plan.published_roles(config),
        statistics=config["statistics"],
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/evaluate_claims.log",
    script:
        "../scripts/evaluate_claims.py"


rule task_statistics:
    input:
        unpack(task_statistics_files),
    output:
        "results/metrics/data_statistics/{task}.parquet",
    params:
        code=TASK_STATISTICS_CODE,
    priority: SCORE_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/task_statistics/{task}.log",
    script:
        "../scripts/task_statistics.py"


# One job per task above, so that with `caches: temporary` a task's caches are deleted once its own
# runs are scored, not kept until every task's are.
rule data_statistics:
    input:
        expand("results/metrics/data_statistics/{task}.parquet", task=TASKS),
    output:
        "results/metrics/data_statistics.parquet",
    params:
        code=DATA_STATISTICS_CODE,
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/data_statistics.log",
    script:
        "../scripts/data_statistics.py"


# What the config's caches will take on disk, printed: `snakemake --cores 1 disk_estimate`. It needs
# each model's folder (its config and tokenizer; a hub model is downloaded) and the tasks' data,
# nothing else: no extraction runs. A rule without an output, so that naming it always prints.
rule disk_estimate:
    input:
        models=[variant_dir(model, "trained") for model in MODELS],
        data=[f"resources/datasets/{task}/{split}.parquet" for task in TASKS for split in ("train", "eval")],
    params:
        model_dirs={model: variant_dir(model, "trained") for model in MODELS},
        task_files={task: {split: f"resources/datasets/{task}/{split}.parquet" for split in ("train", "eval")} for task in TASKS},
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/disk_estimate.log",
    script:
        "../scripts/disk_estimate.py"
