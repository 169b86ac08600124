# Activations: one cache per (model, variant, task, seed, setting). zsl, icl and icl_switched
# evaluate the model as it is; every other setting names a training method, which finetunes a
# copy first. In the compact layout (cache_dtype) every setting but zsl stores its change from
# the zsl cache of its run, which is therefore its input. ZSL has a rule of its own: a rule whose
# jobs take another job of the same rule as input breaks Snakemake's --until on it (its issue 823).


rule extract_zsl:
    input:
        unpack(task_files),
        model=model_dir,
    output:
        cache=zsl_cache_output(),
    params:
        run=zsl_run_spec,
        code=EXTRACTION_CODE,
    threads: 1
    priority: 0
    resources:
        gpu=MODEL_GPUS,
        jobs_per_gpu=JOBS_PER_GPU,
        mem_mb=8000,
        runtime=60,
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/extract/{model}/{variant}/{task}/seed{seed}/zsl.log",
    script:
        "../scripts/extract.py"


rule extract_base:
    input:
        unpack(task_files),
        unpack(reference_cache),
        model=model_dir,
    output:
        cache=cache_output(),
    wildcard_constraints:
        setting=cfg.ICL_SETTING_PATTERN,
    params:
        run=run_spec,
        code=EXTRACTION_CODE,
    threads: 1
    priority: 1
    resources:
        gpu=MODEL_GPUS,
        jobs_per_gpu=JOBS_PER_GPU,
        mem_mb=8000,
        runtime=60,
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/extract/{model}/{variant}/{task}/seed{seed}/{setting}.log",
    script:
        "../scripts/extract.py"


rule finetune_and_extract:
    input:
        unpack(task_files),
        unpack(reference_cache),
        model=model_dir,
    output:
        cache=cache_output(),
        train_log="results/training/{model}/{variant}/{task}/seed{seed}/{setting}.parquet",
    wildcard_constraints:
        setting=_names_regex(METHODS),
    params:
        run=run_spec,
        code=EXTRACTION_CODE,
    threads: 1
    priority: 1
    resources:
        gpu=MODEL_GPUS,
        jobs_per_gpu=JOBS_PER_GPU,
        mem_mb=16000,
        runtime=120,
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/extract/{model}/{variant}/{task}/seed{seed}/{setting}.log",
    script:
        "../scripts/extract.py"


# The further orders of a run's demonstrations (config key orders): ICL and the method on the same
# demonstrations in another order, planned only when orders > 1 (icl_gd/plan.py, order_runs).
rule extract_order:
    input:
        unpack(task_files),
        unpack(reference_cache),
        model=model_dir,
    output:
        cache=order_cache_output(),
    wildcard_constraints:
        setting=cfg.ICL_SETTING_PATTERN,
    params:
        run=order_run_spec,
        code=EXTRACTION_CODE,
    threads: 1
    priority: 1
    resources:
        gpu=MODEL_GPUS,
        jobs_per_gpu=JOBS_PER_GPU,
        mem_mb=8000,
        runtime=60,
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/extract/{model}/{variant}/{task}/seed{seed}/order{order}/{setting}.log",
    script:
        "../scripts/extract.py"


rule finetune_order:
    input:
        unpack(task_files),
        unpack(reference_cache),
        model=model_dir,
    output:
        cache=order_cache_output(),
        train_log="results/training/{model}/{variant}/{task}/seed{seed}/order{order}/{setting}.parquet",
    wildcard_constraints:
        setting=_names_regex(METHODS),
    params:
        run=order_run_spec,
        code=EXTRACTION_CODE,
    threads: 1
    priority: 1
    resources:
        gpu=MODEL_GPUS,
        jobs_per_gpu=JOBS_PER_GPU,
        mem_mb=16000,
        runtime=120,
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/extract/{model}/{variant}/{task}/seed{seed}/order{order}/{setting}.log",
    script:
        "../scripts/extract.py"
