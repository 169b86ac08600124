# Report: the papers' tables and figures, built from the aggregated metrics only.


localrules:
    table,
    figures,


rule table:
    input:
        unpack(table_inputs),
    output:
        report(
            multiext("reports/tables/{table}", ".md", ".tex", ".csv"),
            caption="../report/tables.rst",
            category="Tables",
            labels={"table": "{table}", "format": "md / tex / csv"},
        ),
    wildcard_constraints:
        table="|".join(TABLES),
    params:
        model=report_model(),
        variant=report_variant(),
        methods=report_methods(),
        n_seeds=max(len(cfg.task_seeds(config, t)) for t in TASKS),
        baseline=report_baseline(),
        layer_causal=layer_causal_methods(clipped=False),
        clipped=layer_causal_methods(clipped=True),
        paper002=paper002_methods(),
        significance=config["statistics"]["significance_level"],
        configfiles=[Path(f).name for f in workflow.configfiles] or ["config.yaml"],
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/table/{table}.log",
    script:
        "../scripts/table.py"


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
