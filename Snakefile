# Does in-context learning behave like gradient descent? From data to the papers' tables.
# Stages, one file each under workflow/rules/: data -> models -> activations -> metrics -> report.

from snakemake.utils import min_version

min_version("9.0")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/activations.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/report.smk"


report: report_description()


rule all:
    input:
        all_activations(),
        all_order_activations(),
        rules.aggregate_metrics.output.summary,
        "results/metrics/summary.csv",
        "results/metrics/comparisons.csv",
        report_outputs(),
    default_target: True


onstart:
    start_warm_worker()


onsuccess:
    stop_warm_worker()
    remove_stale_reports()


onerror:
    stop_warm_worker()
