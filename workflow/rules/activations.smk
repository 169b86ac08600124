# Activations: one cache per (model, variant, task, seed, setting). zsl, icl, icl_switched and
# icl_permuted evaluate the model as it is; every other setting names a training method, which
# finetunes a copy first. In the compact layout (cache_dtype) every setting but zsl stores its
# change from the zsl cache of its run, which is therefore its input. ZSL has a rule of its own: a rule whose
# jobs take another job of the same rule as input breaks Snakemake's --until on it (its issue 823).


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
        code=code_of("extract.py"),
    threads: 1
    priority: 1
    resources:
        gpu=MODEL_GPUS,
        jobs_per_gpu=JOBS_PER_GPU,
        mem_mb=job_request(8000, 60, "mem_mb"),
        runtime=job_request(8000, 60, "runtime"),
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/extract/{model}/{variant}/{task}/seed{seed}/{setting}.log",
        benchmark="results/benchmarks/extract/{model}/{variant}/{task}/seed{seed}/{setting}.tsv",
    script:
        "../scripts/extract.py"


# ZSL: extract_base's job on a path without a setting, which run_spec and reference_cache read as
# zsl (no demonstrations, no reference cache); first in line, as a new run group starts with it.
use rule extract_base as extract_zsl with:
    output:
        cache=cache_output(ZSL_CACHE),
    priority: 0
    log:
        "results/logs/extract/{model}/{variant}/{task}/seed{seed}/zsl.log",
        benchmark="results/benchmarks/extract/{model}/{variant}/{task}/seed{seed}/zsl.tsv",


# A method with a choose key (its learning rate and epochs picked on development rows, per model,
# variant and task): one job per (model, task) trains every grid point of each variant's choosing
# methods on each seed's demonstrations and scores it on held-out train rows. A checkpoint, not an input of the
# finetuning: each finetuning job reads its choice into its run spec (run_spec, through
# finetuning_choice), so that a new grid reruns the choice, then only the finetuning whose chosen
# value changed, by Snakemake's params trigger; as an input file, every one of them would rerun
# on its newer time (docs/reruns.md, "A choice made on development rows").
checkpoint choose_finetuning:
    input:
        unpack(task_files),
        unpack(choice_models),
    output:
        table="results/choice/{model}/{task}.parquet",
    params:
        choice=choice_spec,
        code=code_of("choose_finetuning.py"),
    threads: 1
    # before the extractions: every finetuning of its task waits for it
    priority: SCORE_PRIORITY
    resources:
        gpu=MODEL_GPUS,
        jobs_per_gpu=JOBS_PER_GPU,
        mem_mb=job_request(16000, 120, "mem_mb"),
        runtime=job_request(16000, 120, "runtime"),
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/choose_finetuning/{model}/{task}.log",
        benchmark="results/benchmarks/choose_finetuning/{model}/{task}.tsv",
    script:
        "../scripts/choose_finetuning.py"


rule finetune_and_extract:
    input:
        unpack(task_files),
        unpack(reference_cache),
        unpack(finetuning_choice_made),
        model=model_dir,
    output:
        cache=cache_output(),
        train_log="results/training/{model}/{variant}/{task}/seed{seed}/{setting}.parquet",
    wildcard_constraints:
        setting=_names_regex(METHODS),
    params:
        run=run_spec,
        code=code_of("extract.py"),
    threads: 1
    priority: 1
    resources:
        gpu=MODEL_GPUS,
        jobs_per_gpu=JOBS_PER_GPU,
        mem_mb=job_request(16000, 120, "mem_mb"),
        runtime=job_request(16000, 120, "runtime"),
    conda:
        "../../envs/models.yaml"
    log:
        "results/logs/extract/{model}/{variant}/{task}/seed{seed}/{setting}.log",
        benchmark="results/benchmarks/extract/{model}/{variant}/{task}/seed{seed}/{setting}.tsv",
    script:
        "../scripts/extract.py"


# The further orders of a run's demonstrations (config key orders): ICL and the method on the same
# demonstrations in another order, planned only when orders > 1 (icl_gd/planning/plan.py, order_runs); the
# jobs of the run's own rules, with the order in their run spec (run_spec reads the wildcard).
use rule extract_base as extract_order with:
    output:
        cache=cache_output(ORDER_CACHE),
    log:
        "results/logs/extract/{model}/{variant}/{task}/seed{seed}/order{order}/{setting}.log",
        benchmark="results/benchmarks/extract/{model}/{variant}/{task}/seed{seed}/order{order}/{setting}.tsv",


use rule finetune_and_extract as finetune_order with:
    output:
        cache=cache_output(ORDER_CACHE),
        train_log="results/training/{model}/{variant}/{task}/seed{seed}/order{order}/{setting}.parquet",
    log:
        "results/logs/extract/{model}/{variant}/{task}/seed{seed}/order{order}/{setting}.log",
        benchmark="results/benchmarks/extract/{model}/{variant}/{task}/seed{seed}/order{order}/{setting}.tsv",
