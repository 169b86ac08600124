# Report: the papers' tables and figures, built from the aggregated metrics only.


localrules:
    first_page,
    table,
    tables,
    figure,
    figure_after_claims,
    figures,


rule table:
    input:
        unpack(table_inputs),
    output:
        # md, tex and csv for papers and scripts; the report shows the rendered HTML
        multiext(f"{REPORT_DIR}/tables/{{table}}", ".md", ".tex", ".csv"),
        html=report(
            f"{REPORT_DIR}/tables/{{table}}.html",
            caption="../report/tables.rst",
            category="Tables",
            labels={"table": "{table}"},
        ),
    wildcard_constraints:
        table="|".join(TABLES),
    params:
        code=code_of("table.py"),
        model=REPORT_MODEL,
        variant=REPORT_VARIANT,
        methods=REPORT_METHODS,
        n_seeds=max(len(cfg.task_seeds(config, t)) for t in TASKS),
        baseline=plan.report_baseline(config),
        layer_causal=plan.layer_causal_methods(config, clipped=False),
        clipped=plan.layer_causal_methods(config, clipped=True),
        paper002=plan.paper002_methods(config),
        roles=table_roles,
        records=cost_records,
        k_sweep=lambda w: plan.k_sweeps(config) if w.table == "k_sweep" else [],
        published=published_version,
        significance=config["statistics"]["significance_level"],
        ci_level=config["statistics"]["ci_level"],
        caption=table_caption,
        configfiles=[Path(f).name for f in workflow.configfiles] or ["config.yaml"],
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/table/{table}.log",
        benchmark="results/benchmarks/table/{table}.tsv",
    script:
        "../scripts/table.py"


rule figure:
    input:
        unpack(figure_inputs),
    output:
        png=report(
            f"{REPORT_DIR}/figures/{{figure}}.png",
            caption="../report/figures.rst",
            category="Figures",
            labels={"figure": "{figure}", "format": "PNG"},
        ),
        pdf=report(
            f"{REPORT_DIR}/figures/{{figure}}.pdf",
            caption="../report/figures.rst",
            category="Figures",
            labels={"figure": "{figure}", "format": "PDF"},
        ),
    wildcard_constraints:
        figure=_names_regex([f for f in FIGURES if f not in LAST_FIGURES]),
    params:
        code=code_of("figure.py"),
        published=published_version,
        figure=figure_params,
        about=figure_about,
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/figures/{figure}.log",
        benchmark="results/benchmarks/figures/{figure}.tsv",
    script:
        "../scripts/figure.py"


# The figures that wait for the claims, drawn as soon as the claims are in: the forest plot is a
# run's longest figure (7-9 s on the default run), and the claims its last analysis.
use rule figure as figure_after_claims with:
    wildcard_constraints:
        figure=_names_regex([f for f in FIGURES if f in LAST_FIGURES]),
    priority: ANALYSIS_PRIORITY


# `snakemake figures` renders every figure the config plans.
rule figures:
    input:
        expand(f"{REPORT_DIR}/figures/{{figure}}.{{ext}}", figure=FIGURES, ext=["png", "pdf"]),


# `snakemake tables` renders every table the config plans.
rule tables:
    input:
        expand(f"{REPORT_DIR}/tables/{{table}}.{{ext}}", table=TABLES, ext=["md", "tex", "csv", "html"]),


# The report's first page (icl_gd/report/summary.py): what was run and what it found, as Markdown beside
# the tables and as the landing page of `snakemake --report` (the Snakefile's report: directive).
rule first_page:
    input:
        unpack(first_page_inputs),
    output:
        md=f"{REPORT_DIR}/summary.md",
        rst=f"{REPORT_DIR}/summary.rst",
    params:
        code=code_of("first_page.py"),
        published=PUBLISHED_VERSION,
        model=REPORT_MODEL,
        variant=REPORT_VARIANT,
        roles=plan.published_roles(config),
        tables=TABLES,
        figures=FIGURES,
        ci_level=config["statistics"]["ci_level"],
        about=first_page_about,
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/first_page.log",
        benchmark="results/benchmarks/first_page.tsv",
    script:
        "../scripts/first_page.py"
