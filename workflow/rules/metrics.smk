# Metrics: pure functions of the caches, per run, then aggregated over seeds. These rules import
# no model code, so editing a metric never reruns an extraction. They are cheap: local rules.


localrules:
    score_run,
    aggregate_metrics,
    compare_methods,
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
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/score_run/{model}/{variant}/{task}/seed{seed}/{method}.log",
    script:
        "../scripts/score_run.py"


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
        code=METRICS_CODE,
        statistics=config["statistics"],
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/compare_methods.log",
    script:
        "../scripts/compare_methods.py"


rule data_statistics:
    input:
        files=[path for task in data_statistics_files().values() for path in task.values()],
    output:
        "results/metrics/data_statistics.parquet",
    params:
        code=METRICS_CODE,
        tasks=data_statistics_files(),
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/data_statistics.log",
    script:
        "../scripts/data_statistics.py"
