# Report: the papers' tables and figures, built from the aggregated metrics only.


localrules:
    tables,
    figures,


rule tables:
    input:
        summary="results/metrics/summary.parquet",
        code=REPORT_CODE,
    output:
        report(
            expand("reports/tables/{table}.{ext}", table=TABLES, ext=["md", "tex", "csv"]),
            caption="../report/tables.rst",
            category="Tables",
        ),
    params:
        model=report_model(),
        variant=report_variant(),
        methods=report_methods(),
        n_seeds=max(len(cfg.task_seeds(config, t)) for t in TASKS),
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/tables.log",
    script:
        "../scripts/tables.py"


rule figures:
    input:
        runs="results/metrics/runs.parquet",
        summary="results/metrics/summary.parquet",
        code=REPORT_CODE,
    output:
        report(
            expand("reports/figures/{figure}.{ext}", figure=FIGURES, ext=["png", "pdf"]),
            caption="../report/figures.rst",
            category="Figures",
        ),
    params:
        model=report_model(),
        variant=report_variant(),
        methods=report_methods(),
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/figures.log",
    script:
        "../scripts/figures.py"
