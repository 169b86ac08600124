# The report stage's inputs, parameters and captions (rules in workflow/rules/report.smk).
# Functions only: Snakemake's linter asks that a file hold rules or functions, not both.


# The report's inputs. The metric tables they read are named by the rules that write them
# (rules.<name>.output): called when the DAG is built, after every rule file is read.
REPORT_MODEL = plan.report_model(config)


REPORT_VARIANT = plan.report_variant(config)


REPORT_METHODS = plan.report_methods(config)


TABLES = plan.tables(config)


FIGURES = plan.figures(config)
LAST_FIGURES = ("claims", "premise")  # drawn from the claims' tests (rule figure_after_claims)


_GRAD_NORM_DEFAULT = _SCHEMA["properties"]["report"]["properties"]["grad_norm_task"]["default"]


def grad_norm_run():
    return plan.grad_norm_run(config, _GRAD_NORM_DEFAULT)


def figure_inputs(wildcards):
    """The gradient-norm heatmaps read training logs only; every other figure the metrics."""
    if wildcards.figure == "grad_norms":
        task, seed = grad_norm_run()
        base = f"results/training/{REPORT_MODEL}/{REPORT_VARIANT}/{task}/seed{seed}"
        return {"train_logs": [f"{base}/{method}.parquet" for method in REPORT_METHODS]}
    if wildcards.figure == "reproduction":
        return {"summary": rules.aggregate_metrics.output.summary}
    if wildcards.figure == "claims":
        return {"claims": rules.evaluate_claims.output.table}
    if wildcards.figure == "premise":
        return {"summary": rules.aggregate_metrics.output.summary, "premise": rules.evaluate_claims.output.premise}
    if wildcards.figure == "orders":
        return {"orders": rules.order_sensitivity.output.table}
    if wildcards.figure == "sizes":
        return {"summary": rules.aggregate_metrics.output.summary, "sizes": rules.model_statistics.output[0]}
    return {"runs": rules.aggregate_metrics.output.runs, "summary": rules.aggregate_metrics.output.summary}


def figure_params(wildcards):
    return plan.figure_params(config, wildcards.figure)


def figure_about(wildcards):
    """For the captions: the config file(s) and ``--config`` overrides, every task with its seeds,
    and the run of the gradient-norm heatmaps. A parameter, so that running with another config
    reruns the figure jobs (seconds each) and a caption always names the config of its figure."""
    about = run_about()
    if wildcards.figure == "grad_norms":
        about["grad_norm_task"], about["grad_norm_seed"] = grad_norm_run()
    return about


def _shown_path(f):
    path = Path(f).resolve()
    for root in (Path.cwd(), Path(workflow.basedir).resolve()):
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return str(f)


def run_about():
    """The config file(s), ``--config`` overrides and every task with its seeds."""
    # Relative to the working directory, else to the workflow's own folder (a run with --directory
    # elsewhere and a shipped config), so that no report names a path on the machine that made it.
    files = [_shown_path(f) for f in workflow.configfiles]
    about = dict(
        configfiles=files,
        # --config, but for warm_worker: how jobs start is no part of a figure, and must rerun none
        overrides=", ".join(f"{k}={v}" for k, v in workflow.config_settings.config.items() if k != "warm_worker"),
        seeds={task: cfg.task_seeds(config, task) for task in TASKS},
    )
    return about


REPORT_DIR = config["report"]["dir"].rstrip("/")


def report_outputs():
    return [f"{REPORT_DIR}/summary.md", f"{REPORT_DIR}/summary.rst"] + expand(f"{REPORT_DIR}/tables/{{table}}.{{ext}}", table=TABLES, ext=["md", "tex", "csv", "html"]) + expand(
        f"{REPORT_DIR}/figures/{{figure}}.{{ext}}", figure=FIGURES, ext=["png", "pdf"]
    )


def first_page_inputs(wildcards):
    inputs = {"data": rules.data_statistics.output[0], "summary": rules.aggregate_metrics.output.summary}
    if config["report"]["reproduction"]:
        inputs["claims"] = rules.evaluate_claims.output.table
        inputs["premise"] = rules.evaluate_claims.output.premise
        inputs["premise_methods"] = rules.evaluate_claims.output.premise_methods
    if "orders" in TABLES:  # the further orders' caches are behind the page too: their provenance
        inputs["orders"] = rules.order_sensitivity.output.table
    if "choice" in TABLES:  # what each choosing method chose
        inputs["choice"] = choice_tables()
    if "claims_chosen" in TABLES:  # the claims again at the chosen setting
        inputs["claims_chosen"] = rules.evaluate_claims_chosen.output.table
    return inputs


def choice_tables():
    """Every choice of the run (rule choose_finetuning), in plan order."""
    return [rules.choose_finetuning.output.table.format(**job) for job in plan.choice_jobs(config)]


def first_page_about(wildcards):
    """What was run, for the first page: as the figures' captions say it, with the models' sources
    and the variants and k."""
    about = run_about()
    about.update(
        models={name: spec.get("id") or spec.get("package") or spec["source"] for name, spec in config["models"].items()},
        data=data_sources(),
        checkpoints=origins.checkpoint_note(config["models"]),
        variants=list(config["variants"]),
        k=sorted({cfg.setting_k(config, m) for methods in config["variants"].values() for m in methods}),
    )
    return about


def report_description():
    """The report's landing page: the run's first page once the run has written it, else a page
    that says to run the workflow first."""
    page = Path(REPORT_DIR, "summary.rst").resolve()
    return str(page) if page.exists() else "workflow/report/workflow.rst"


def remove_stale_reports():
    """Tables and figures in the report folder that this config does not plan (an earlier
    config's): a report folder holds what its run produced, nothing else."""
    planned = {Path(p).resolve() for p in report_outputs()}
    for pattern in ("tables/*.md", "tables/*.tex", "tables/*.csv", "tables/*.html", "figures/*.png", "figures/*.pdf"):
        for path in Path(REPORT_DIR).glob(pattern):
            if path.resolve() not in planned:
                path.unlink()
                print(f"removed {path}: not a table or figure of this config", file=sys.stderr)


# The analyses over every run, by the table that shows each one's result.
ANALYSES = {"comparisons": "compare_methods", "claims": "evaluate_claims", "orders": "order_sensitivity"}


def table_inputs(wildcards):
    inputs = {}
    if wildcards.table == "costs":
        # after the jobs it reads the records of: reruns when any of them reran
        inputs["summary"] = rules.aggregate_metrics.output.summary
        for table, name in ANALYSES.items():
            if table in TABLES:
                inputs[table] = getattr(rules, name).output.table
    elif wildcards.table == "orders":
        inputs["orders"] = rules.order_sensitivity.output.table
    elif wildcards.table == "choice":
        inputs["choice"] = choice_tables()
    elif wildcards.table == "comparisons":
        inputs["comparisons"] = rules.compare_methods.output.table
    elif wildcards.table == "data":
        inputs["data"] = rules.data_statistics.output[0]
    elif wildcards.table == "claims":
        inputs["claims"] = rules.evaluate_claims.output.table
        inputs["premise"] = rules.evaluate_claims.output.premise
    elif wildcards.table == "claims_chosen":
        inputs["claims"] = rules.evaluate_claims_chosen.output.table
        inputs["premise"] = rules.evaluate_claims.output.premise
    elif wildcards.table == "premise":
        inputs["premise"] = rules.evaluate_claims.output.premise
        inputs["premise_methods"] = rules.evaluate_claims.output.premise_methods
        inputs["summary"] = rules.aggregate_metrics.output.summary
    else:
        inputs["summary"] = rules.aggregate_metrics.output.summary
    return inputs


def cost_records(wildcards):
    """The costs table's jobs: (rule, setting, path of the job's benchmark record) of every model,
    extraction and scoring job and of the analyses over every run. Read where present, never
    inputs: a run finished before the jobs wrote records would otherwise rerun every job."""
    if wildcards.table != "costs":
        return []
    records = []

    def add(name, label, **wildcards_):
        records.append({"rule": name, "setting": label, "path": str(getattr(rules, name).log.benchmark).format(**wildcards_)})

    builders = {"builtin": "build_builtin_model", "hub": "download_model", "gguf": "convert_gguf_model"}
    for model in MODELS:
        if config["models"][model]["source"] in builders:
            add(builders[config["models"][model]["source"]], "", model=model)
        for variant in config["variants"]:
            if variant != "trained":
                add("make_variant", variant, model=model, variant=variant)
    # ZSL, then ICL by its number of demonstrations, then each method as the config lists them
    def rank(e):
        setting = e["setting"]
        if setting == "zsl":
            return (0, 0, setting)
        if cfg.is_icl_setting(setting):
            return (1, cfg.setting_k(config, setting), setting)
        return (2, METHODS.index(setting), setting)

    for job in plan.choice_jobs(config):
        add("choose_finetuning", "", **job)
    for e in sorted(plan.extractions(config), key=rank):
        kind = "extract_zsl" if e["setting"] == "zsl" else "extract_base" if cfg.is_icl_setting(e["setting"]) else "finetune_and_extract"
        add(kind, e["setting"], **e)
    for e in sorted(plan.order_extractions(config), key=rank):
        add("extract_order" if cfg.is_icl_setting(e["setting"]) else "finetune_order", e["setting"], **e)
    for run in plan.runs(config):
        add("score_run", run["method"], **run)
    for run in ORDER_RUNS:
        add("score_order", run["method"], **run)
    add("aggregate_metrics", "")
    for table, name in ANALYSES.items():
        if table in TABLES:
            add(name, "")
    return records


def table_roles(wildcards):
    """The published methods the run has, for the tables that set it beside the papers: at the
    chosen setting for the claims read there."""
    if wildcards.table == "claims_chosen":
        return plan.chosen_roles(config)
    return plan.published_roles(config) if wildcards.table in ("reproduction", "claims", "premise") else {}


# ------------------------------------------------------------------------------------------------
# Table captions. The caption of a table in the Snakemake report (workflow/report/tables.rst) is
# this parameter, and the table job writes the same text into its .md and .tex: one source.


def table_caption(wildcards):
    # the data table's names the real text its tasks ran on (a package corpus: origin, size, rule, licence)
    # and the pretrained checkpoints (origin and terms of use, where known)
    if wildcards.table != "data":
        return names.table_caption(wildcards.table, ci_level=config["statistics"]["ci_level"])
    caption = names.table_caption("data", ci_level=config["statistics"]["ci_level"], data_sources=data_sources())
    return " ".join(filter(None, [caption, origins.checkpoint_note(config["models"])]))
