# Report: the papers' tables and figures, built from the aggregated metrics only.


localrules:
    tables,
    figure,
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


rule figure:
    input:
        unpack(figure_inputs),
    output:
        png=report(
            "reports/figures/{figure}.png",
            caption="../report/figures.rst",
            category="Figures",
            labels={"figure": "{figure}", "format": "PNG"},
        ),
        pdf=report(
            "reports/figures/{figure}.pdf",
            caption="../report/figures.rst",
            category="Figures",
            labels={"figure": "{figure}", "format": "PDF"},
        ),
    wildcard_constraints:
        figure=_names_regex(FIGURES),
    params:
        figure=figure_params,
        about=figure_about,
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/figures/{figure}.log",
    script:
        "../scripts/figures.py"


# `snakemake figures` renders every figure the config plans.
rule figures:
    input:
        expand("reports/figures/{figure}.{ext}", figure=FIGURES, ext=["png", "pdf"]),
