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


def model_spec(wildcards):
    return config["models"][wildcards.model]


# The report's inputs. The metric tables they read are named by the rules that write them
# (rules.<name>.output): called when the DAG is built, after every rule file is read.
