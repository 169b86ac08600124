# Activations: one cache per (model, variant, task, seed, setting). zsl, icl and icl_switched
# evaluate the model as it is; every other setting names a training method, which finetunes a
# copy first.


rule extract_base:
    input:
        unpack(task_files),
        model=model_dir,
    output:
        cache="results/activations/{model}/{variant}/{task}/seed{seed}/{setting}.parquet",
    wildcard_constraints:
        setting=cfg.BASE_SETTING_PATTERN,
    params:
        run=run_spec,
        code=EXTRACTION_CODE,
    threads: 1
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
        model=model_dir,
    output:
        cache="results/activations/{model}/{variant}/{task}/seed{seed}/{setting}.parquet",
        train_log="results/training/{model}/{variant}/{task}/seed{seed}/{setting}.parquet",
    wildcard_constraints:
        setting=_names_regex(METHODS),
    params:
        run=run_spec,
        code=EXTRACTION_CODE,
    threads: 1
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
