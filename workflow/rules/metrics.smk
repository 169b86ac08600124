# Metrics: pure functions of the caches, per run, then aggregated over seeds. These rules import
# no model code, so editing a metric never reruns an extraction. They are cheap: local rules.


localrules:
    score_run,
    aggregate_metrics,


rule score_run:
    input:
        unpack(setting_caches),
        code=METRICS_CODE,
    output:
        "results/metrics/runs/{model}/{variant}/{task}/seed{seed}/{method}.parquet",
    wildcard_constraints:
        method=_names_regex(METHODS),
    params:
        random_seed=config["random_baseline_seed"],
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/score_run/{model}/{variant}/{task}/seed{seed}/{method}.log",
    script:
        "../scripts/score_run.py"


rule aggregate_metrics:
    input:
        runs=all_run_metrics(),
        code=METRICS_CODE,
    output:
        runs="results/metrics/runs.parquet",
        summary="results/metrics/summary.parquet",
        csv="results/metrics/summary.csv",
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/aggregate_metrics.log",
    script:
        "../scripts/aggregate_metrics.py"
