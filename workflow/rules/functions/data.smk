# The data stage's input functions and parameters (rules in workflow/rules/data.smk).
# Functions only: Snakemake's linter asks that a file hold rules or functions, not both.


def task_files(wildcards):
    return {
        "train": f"resources/datasets/{wildcards.task}/train.parquet",
        "eval": f"resources/datasets/{wildcards.task}/eval.parquet",
    }


def task_sources(wildcards):
    """A synthetic task is normalised from its twin, a package task from its corpus's archive (rule
    fetch_package); hub and local tasks need no input file."""
    spec = cfg.task_spec(config, wildcards.task)
    if spec.source == "package":
        return {"archive": str(corpora.archive_path(corpora.get(spec.corpus)))}
    if spec.source != "synthetic":
        return {}
    return {
        "twin_train": f"resources/synthetic/{wildcards.task}/train.parquet",
        "twin_eval": f"resources/synthetic/{wildcards.task}/eval.parquet",
    }


def data_code(wildcards):
    """The code a task's data job executes (its rerun trigger): a package task's includes corpora.py."""
    return PACKAGE_DATA_CODE if cfg.task_spec(config, wildcards.task).source == "package" else DATA_CODE


# The distribution files that the config's package tasks read (rule fetch_package).
PACKAGE_ARCHIVES = sorted({corpora.get(s.corpus).dist.file for s in (cfg.task_spec(config, t) for t in config["tasks"])
                           if s.source == "package"})


def fetch_archive(dist, target, log):
    """Rule fetch_package's job, in Snakemake's own process (icl_gd.data.corpora.fetch: pip, the hash
    pinned), its messages in the rule's log."""
    with open(log, "w") as f, contextlib.redirect_stderr(f):
        corpora.fetch(corpora.Distribution(**dist), target)


def data_sources():
    """Each task's data, as the data table's caption and the first page say it: its source, and for
    a package corpus where the text comes from and what the task's label rule made of it (sizes)."""
    out = {}
    for task in TASKS:
        spec = cfg.task_spec(config, task)
        entry = {"source": spec.source}
        if spec.source == "package":
            corpus = corpora.get(spec.corpus)
            label_rule = corpus.rules[spec.label_rule]
            entry.update({"corpus": corpus.name, "about": corpora.corpus_about(corpus),
                          "short": f"{corpus.short}; licence: {corpus.licence}",
                          "rule": corpora.rule_about(corpus, label_rule, list(spec.label_words)),
                          "size": corpora.size_about(corpus, label_rule)})
        elif spec.source == "hub":
            entry["id"] = spec.hub_id
        elif spec.source == "local":
            entry["path"] = spec.path
        out[task] = entry
    return out


# The activation cache of a (model, variant, task, seed, setting): icl_gd.activations.cache.SUFFIX.


def task_config(wildcards):
    """The task's spec, resolved from its preset and the config (prepare_task executes it). Not its
    seeds or learning rate: they are the extractions' (their run specs), so a new rate reruns the
    finetuning only, not the data and everything made from it."""
    spec = cfg.task_spec(config, wildcards.task).to_params()
    return {key: value for key, value in spec.items() if key not in ("seeds", "lr")}


def preset(task):
    """What the synthetic twins and the built-in model read of a built-in task's preset."""
    spec = cfg.task_spec({"tasks": {task: {}}}, task)
    return {"template": spec.template, "label_words": list(spec.label_words)}
