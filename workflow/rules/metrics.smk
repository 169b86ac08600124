# Metrics: pure functions of the caches, per run, then aggregated over seeds. These rules import
# no model code, so editing a metric never reruns an extraction. They are cheap: local rules.


localrules:
    disk_estimate,
    scores,
    score_run,
    score_order,
    score_premise_icl,
    order_run,
    order_sensitivity,
    aggregate_metrics,
    compare_methods,
    evaluate_claims,
    evaluate_claims_chosen,
    task_statistics,
    data_statistics,


rule score_run:
    input:
        unpack(setting_caches),
    output:
        scores="results/metrics/runs/{model}/{variant}/{task}/seed{seed}/{method}.parquet",
        examples=RUN_EXAMPLES,
    wildcard_constraints:
        method=_names_regex(METHODS),
    params:
        code=code_of("score_run.py"),
        random_seed=config["random_baseline_seed"],
        statistics=config["statistics"],
    priority: SCORE_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/score_run/{model}/{variant}/{task}/seed{seed}/{method}.log",
        benchmark="results/benchmarks/score_run/{model}/{variant}/{task}/seed{seed}/{method}.tsv",
    script:
        "../scripts/score_run.py"


# A run of the premise alone, on a seed that only the premise reads (config key premise.seeds): the
# per-example predictions of ZSL, ICL and ICL on permuted labels, which the claims' job reads with
# the runs' (icl_gd/metrics/premise.py).
rule score_premise_icl:
    input:
        unpack(premise_icl_caches),
    output:
        examples=PREMISE_ICL,
    wildcard_constraints:
        method=_names_regex(METHODS),
    params:
        code=code_of("score_premise_icl.py"),
    priority: SCORE_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/score_premise_icl/{model}/{variant}/{task}/seed{seed}/{method}.log",
        benchmark="results/benchmarks/score_premise_icl/{model}/{variant}/{task}/seed{seed}/{method}.tsv",
    script:
        "../scripts/score_premise_icl.py"


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
        code=code_of("score_order.py"),
        random_seed=config["random_baseline_seed"],
    priority: SCORE_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/score_order/{model}/{variant}/{task}/seed{seed}/order{order}/{method}.log",
        benchmark="results/benchmarks/score_order/{model}/{variant}/{task}/seed{seed}/order{order}/{method}.tsv",
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
        code=code_of("order_run.py"),
    priority: ANALYSIS_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/order_run/{model}/{variant}/{task}/seed{seed}/{method}.log",
        benchmark="results/benchmarks/order_run/{model}/{variant}/{task}/seed{seed}/{method}.tsv",
    script:
        "../scripts/order_run.py"


rule order_sensitivity:
    input:
        all_order_runs(),
    output:
        table="results/metrics/orders.parquet",
        csv="results/metrics/orders.csv",
    params:
        code=code_of("order_sensitivity.py"),
        statistics=config["statistics"],
    priority: ANALYSIS_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/order_sensitivity.log",
        benchmark="results/benchmarks/order_sensitivity.tsv",
    script:
        "../scripts/order_sensitivity.py"


# Every run scored, and nothing after: a target to cut a long run into pieces of runs, each with
# the caches it needs: `snakemake scores --batch scores=1/3`, 2/3, 3/3, then a plain run
# (docs/reruns.md). Batching `all` cannot do it: the report among its inputs needs every run.
rule scores:
    input:
        all_run_examples(),
        all_premise_examples(),


rule aggregate_metrics:
    input:
        runs=all_run_metrics(),
        examples=all_run_examples(),
    output:
        runs="results/metrics/runs.parquet",
        summary="results/metrics/summary.parquet",
        csv="results/metrics/summary.csv",
    params:
        code=code_of("aggregate_metrics.py"),
        statistics=config["statistics"],
    priority: ANALYSIS_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/aggregate_metrics.log",
        benchmark="results/benchmarks/aggregate_metrics.tsv",
    script:
        "../scripts/aggregate_metrics.py"


rule compare_methods:
    input:
        examples=all_run_examples(),
    output:
        table="results/metrics/comparisons.parquet",
        csv="results/metrics/comparisons.csv",
    params:
        code=code_of("compare_methods.py"),
        statistics=config["statistics"],
    priority: ANALYSIS_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/compare_methods.log",
        benchmark="results/benchmarks/compare_methods.tsv",
    script:
        "../scripts/compare_methods.py"


# The papers' claims tested on every model of the run (icl_gd/metrics/claim_definitions.py): per task the paired
# difference and its interval, the verdict, and what an inconclusive one would need; their premise,
# whether the model learns in context on each task (icl_gd/metrics/premise.py), and finetuning's side
# of it, whether each method of the trained variant learns (FT above ZSL); and each claim read again
# over the tasks where the model learns in context, and where finetuning learns as well.
rule evaluate_claims:
    input:
        examples=all_run_examples(),
        orders=all_order_runs(),
        premise=all_premise_examples(),
    output:
        table="results/metrics/claims.parquet",
        csv="results/metrics/claims.csv",
        premise="results/metrics/premise.parquet",
        premise_csv="results/metrics/premise.csv",
        premise_methods="results/metrics/premise_methods.parquet",
        premise_methods_csv="results/metrics/premise_methods.csv",
    params:
        code=code_of("evaluate_claims.py"),
        roles=plan.published_roles(config),
        statistics=config["statistics"],
        labels={task: list(cfg.task_spec(config, task).label_words) for task in TASKS},
    priority: ANALYSIS_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/evaluate_claims.log",
        benchmark="results/benchmarks/evaluate_claims.tsv",
    script:
        "../scripts/evaluate_claims.py"


# The claims read a second time with GD and its kin at the rate chosen on development rows, where
# the config runs them at both (plan.chosen_roles): the same script, other roles, no premise.
rule evaluate_claims_chosen:
    input:
        examples=all_run_examples(),
        orders=all_order_runs(),
        premise=all_premise_examples(),
    output:
        table="results/metrics/claims_chosen.parquet",
        csv="results/metrics/claims_chosen.csv",
    params:
        code=code_of("evaluate_claims.py"),
        roles=plan.chosen_roles(config),
        statistics=config["statistics"],
        labels={task: list(cfg.task_spec(config, task).label_words) for task in TASKS},
    priority: ANALYSIS_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/evaluate_claims_chosen.log",
        benchmark="results/benchmarks/evaluate_claims_chosen.tsv",
    script:
        "../scripts/evaluate_claims.py"


rule task_statistics:
    input:
        unpack(task_statistics_files),
    output:
        "results/metrics/data_statistics/{task}.parquet",
    params:
        code=code_of("task_statistics.py"),
    priority: SCORE_PRIORITY
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/task_statistics/{task}.log",
        benchmark="results/benchmarks/task_statistics/{task}.tsv",
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
        code=code_of("data_statistics.py"),
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/data_statistics.log",
        benchmark="results/benchmarks/data_statistics.tsv",
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
        benchmark="results/benchmarks/disk_estimate.tsv",
    script:
        "../scripts/disk_estimate.py"


# What the config's model jobs will take, per job and in total, printed and written to
# results/cost_estimate.tsv: `snakemake --cores all cost_estimate`. Like disk_estimate it needs each
# model's folder and the tasks' data; it times every path of each model where it runs (icl_gd/planning/timing.py)
# at two small sizes, side by side as the run's jobs, in a minute or two. The model rules' memory
# and time requests read the table (functions/resources.smk). No declared output, so that naming it
# always measures anew.
rule cost_estimate:
    input:
        models=[variant_dir(model, "trained") for model in MODELS],
        data=[f"resources/datasets/{task}/{split}.parquet" for task in TASKS for split in ("train", "eval")],
    params:
        model_dirs={model: variant_dir(model, "trained") for model in MODELS},
        task_files={task: {split: f"resources/datasets/{task}/{split}.parquet" for split in ("train", "eval")} for task in TASKS},
        table="results/cost_estimate.tsv",
        # how the run's jobs start: forked by the warm worker, or a Python importing torch each
        warm=lambda wildcards: warm_worker_wanted(),
        # jobs side by side: locally as many as --cores (single-threaded extractions; at most 4 in
        # the calibration), on a cluster one (each job a GPU and cores of its own)
        copies=lambda wildcards: max(1, min(int(workflow.cores or 1), 4)) if local_run() else 1,
        # a named cost_device's local run: its model jobs on the GPUs at once, the gpu cap (the
        # default profile's 4), whatever this machine's cores; else as the calibration's copies
        gpu_jobs=lambda wildcards: (
            int(getattr(workflow.global_resources.get("gpu"), "value", None) or max(1, min(int(workflow.cores or 1), 4)))
            if local_run()
            else 1
        ),
    threads: 2
    # not a local rule: on a cluster it calibrates where the model jobs will run
    resources:
        gpu=MODEL_GPUS,
        jobs_per_gpu=1,
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/cost_estimate.log",
        benchmark="results/benchmarks/cost_estimate.tsv",
    script:
        "../scripts/cost_estimate.py"
