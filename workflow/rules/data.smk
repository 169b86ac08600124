# Data: each task's train and evaluation splits as parquet, with stable example ids.
# Data rules are local rules: hub downloads need the submitting node's network.


localrules:
    synthetic_twin,
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
        code=TWIN_CODE,
    conda:
        "../../envs/analysis.yaml"
    log:
        "results/logs/synthetic_twin/{twin}.log",
    script:
        "../scripts/synthetic_twin.py"


rule prepare_task:
    input:
        unpack(synthetic_source),
    output:
        train="resources/datasets/{task}/train.parquet",
        eval="resources/datasets/{task}/eval.parquet",
    params:
        task=task_config,
        code=DATA_CODE,
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/prepare_task/{task}.log",
    script:
        "../scripts/prepare_task.py"
