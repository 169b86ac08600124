"""The plan of a run: why each job, table and figure exists, as plain functions of the validated
config. ``workflow/rules/common.smk`` turns these into paths and input functions; nothing here
knows of files or of Snakemake.

- the runs: every (model, variant, task, seed, method), and the settings each compares (ZSL, ICL
  on the method's demonstrations, the method); and the premise's own further seeds
  (``premise.seeds``), which only the premise reads;
- the run spec of each extraction job (``run_spec``): everything the job reads from the config,
  and the very object that Snakemake's params trigger compares, so a config edit reruns exactly
  the caches it changes;
- the report: its model, variant, methods and baseline method; the layer-causal and paper 002
  pairings; the tables and figures the config has data for; learning-rate sweeps; the run of the
  gradient-norm heatmaps.

Stands on ``config`` and ``common.names`` only.
"""

from __future__ import annotations

import json

from icl_gd.common import names
from icl_gd.config import resolve as cfg

# ---------------------------------------------------------------------------------------------
# runs


def runs(config: dict) -> list[dict]:
    """Every (model, variant, task, seed, method) of the config, in config order."""
    return [
        dict(model=model, variant=variant, task=task, seed=seed, method=method)
        for model in config["models"]
        for variant, methods in config["variants"].items()
        for task in config["tasks"]
        for seed in cfg.task_seeds(config, task)
        for method in methods
        if cfg.method_runs_on(config, method, task)
    ]


def run_settings(config: dict, method: str) -> list[str]:
    """The caches a run compares: ZSL, ICL on the method's demonstrations, and the method."""
    return ["zsl", cfg.icl_setting(config, method), method]


def cache_seed(config: dict, task: str, setting: str, seed: int) -> int:
    """The seed folder of a setting's cache. ZSL uses no demonstrations and no randomness, so its
    cache does not depend on the seed: one per (model, variant, task), the first seed's, which every
    seed's runs compare with (and, in the compact layout, store their changes from)."""
    return cfg.task_seeds(config, task)[0] if setting == "zsl" else int(seed)


def extractions(config: dict) -> list[dict]:
    """Every cache the runs need, once: (model, variant, task, seed, setting), sorted; with ICL on
    permuted labels and on novel label words where the premise reads it (:func:`permuted_runs`),
    and the premise's further seeds' caches (:func:`premise_runs`, :func:`premise_icl_runs`)."""
    seen = set()
    # a premise run without a finetuned model has ZSL and ICL only
    planned = [(r, 3) for r in runs(config) + premise_runs(config)] + [(r, 2) for r in premise_icl_runs(config)]
    for run, n_settings in planned:
        for setting in run_settings(config, run["method"])[:n_settings]:
            seed = cache_seed(config, run["task"], setting, run["seed"])
            seen.add((run["model"], run["variant"], run["task"], seed, setting))
    seen |= {(*key, setting) for key in permuted_runs(config) for setting in cfg.LABEL_TESTS}
    return [dict(model=m, variant=v, task=t, seed=s, setting=x) for m, v, t, s, x in sorted(seen)]


def premise_method(config: dict) -> str | None:
    """The method whose runs of the trained variant the claims' premise reads (ICL and ZSL of the
    published method gd's runs, ``metrics.premise``), where the run tests the claims
    (``report.reproduction``) and the trained variant runs it; None elsewhere."""
    if not config["report"]["reproduction"] or "trained" not in config["variants"]:
        return None
    method = published_roles(config).get("gd")
    return method if method in config["variants"]["trained"] else None


def permuted_runs(config: dict) -> set[tuple[str, str, str, int]]:
    """The (model, variant, task, seed) whose ICL also runs on consistently permuted labels
    (setting ``icl_permuted``, ``data.splits.permute_labels``) and on novel label words (setting
    ``icl_novel``, ``data.label_pools``): the trained variant's, on every task
    and seed whose runs the premise reads (:func:`premise_method`), at the config's k and in the
    run's own order of its demonstrations (the premise reads no further order). Every run of such a
    (model, variant, task, seed) scores it, as every run scores ZSL (rule score_run)."""
    method = premise_method(config)
    claims = {
        (r["model"], r["variant"], r["task"], r["seed"])
        for r in runs(config)
        if r["variant"] == "trained" and r["method"] == method
    }
    further = {
        (r["model"], r["variant"], r["task"], r["seed"]) for r in premise_runs(config) + premise_icl_runs(config)
    }
    return claims | further


def _premise_further(config: dict) -> list[tuple[str, str, int]]:
    """(model, task, seed) of the premise's seeds that the claims do not read (``premise.seeds``),
    on the tasks the premise reads; a config that asks for them and reads no premise stops here."""
    method = premise_method(config)
    further = [
        (model, task, seed)
        for model in config["models"]
        for task in config["tasks"]
        if method is not None and cfg.method_runs_on(config, method, task)
        for seed in cfg.premise_only_seeds(config, task)
    ]
    if method is None and any(cfg.premise_only_seeds(config, t) for t in config["tasks"]):
        raise cfg.ConfigError(
            "premise.seeds: this config reads no premise (it needs report.reproduction and a trained variant that "
            "runs GD at the protocol's rate); remove premise.seeds"
        )
    return further


def premise_runs(config: dict) -> list[dict]:
    """The runs of the premise's further seeds (``premise.seeds`` beyond the claims'): the trained
    variant's run of each method in ``premise.finetuning``, which finetuning's side of the premise
    reads there too (``metrics.premise.finetuning_claim``). No claim, table or figure but the
    premise's reads them. None where ``premise.seeds`` is unset."""
    wanted = (config.get("premise") or {}).get("finetuning") or []
    return [
        dict(model=model, variant="trained", task=task, seed=seed, method=method)
        for model, task, seed in _premise_further(config)
        for method in wanted
        if cfg.method_runs_on(config, method, task)
    ]


def premise_icl_runs(config: dict) -> list[dict]:
    """The premise's further seeds where its own method (:func:`premise_method`) does not finetune
    (it is not in ``premise.finetuning``): ZSL, ICL on that method's demonstrations and ICL on
    permuted labels, scored without a finetuned model (rule score_premise_icl)."""
    method = premise_method(config)
    if method in ((config.get("premise") or {}).get("finetuning") or []):
        return []
    return [dict(model=m, variant="trained", task=t, seed=s, method=method) for m, t, s in _premise_further(config)]


def order_runs(config: dict) -> list[dict]:
    """The runs that also run in further orders of their demonstrations (config key ``orders``):
    the report variant's, each with ``order`` 1 .. orders - 1 (order 0 is the run's own). None where
    ``orders`` is 1."""
    variant = report_variant(config)
    return [
        dict(run, order=order)
        for run in runs(config)
        if run["variant"] == variant
        for order in range(1, int(config.get("orders", 1)))
    ]


def order_extractions(config: dict) -> list[dict]:
    """The caches of the further orders, once: (model, variant, task, seed, order, setting), sorted;
    each run's ICL setting and its method (ZSL has no demonstrations to reorder)."""
    seen = {
        (r["model"], r["variant"], r["task"], r["seed"], r["order"], setting)
        for r in order_runs(config)
        for setting in run_settings(config, r["method"])[1:]
    }
    return [dict(model=m, variant=v, task=t, seed=s, order=o, setting=x) for m, v, t, s, o, x in sorted(seen)]


def baseline_of(config: dict, variant: str, method: str) -> str | None:
    """The method a run is compared with (alpha, paired tests), if its variant runs it."""
    baseline = config["statistics"]["baseline_method"]
    if baseline is None or method == baseline or baseline not in config["variants"][variant]:
        return None
    return baseline


def run_spec(
    config: dict,
    task: str,
    setting: str,
    seed: int,
    order: int = 0,
    model: str | None = None,
    chosen: dict | None = None,
) -> dict:
    """Everything an extraction job of ``setting`` on ``task`` and ``seed`` reads from the config,
    resolved, and nothing else: the job executes this object, and the rule passes it as a
    parameter, so Snakemake's params trigger reruns exactly the caches a config edit changes (a
    new ``k`` reruns ICL and the training methods, not ZSL, which uses no demonstrations).

    How a job runs (``device``, ``batch_size``) is not part of it: it must not change results.
    ``order`` > 0: the same run on a further order of its demonstrations (``order_extractions``);
    the run's own order (0) leaves the spec as it was, so that ``orders`` reruns none of its caches.
    ``model``: the run's model, whose ``demo_separator`` may be its own; the reference's separator
    (eos) leaves the spec as it was before the key existed, so that no cache reruns for it.
    ``chosen``: for a method that chooses its rate and epochs on development rows
    (``cfg.choice_grid``), the choice (``lr``, ``epochs``) of its model, variant and task
    (:func:`choice_spec`); without it such a spec is a plan's (``lr`` None, the grid's most
    epochs: what the cost and disk estimates count), not a job's. One epoch, the papers', leaves
    the spec as it was before the key existed."""
    task_spec = cfg.task_spec(config, task)
    spec = {
        "task": task,
        "seed": int(seed),
        "setting": setting,
        "template": task_spec.template,
        "label_words": list(task_spec.label_words),
        "source": task_spec.source,
        "hub_id": task_spec.hub_id,
        "hub_config": task_spec.hub_config,
        "path": task_spec.path,
        "splits": task_spec.splits,
        "max_eval": config["max_eval"],
        "record_position": config["record_position"],
        "dtype": config["dtype"],
        "cache_dtype": config["cache_dtype"],
    }
    if (separator := cfg.demo_separator(config, task, model)) != "eos":
        spec["demo_separator"] = separator  # a text's newlines too: ZSL's prompts as well
    k = None if setting == "zsl" else cfg.setting_k(config, setting)
    if (queries := cfg.held_out(config, task, k)) is not None:  # the evaluation split's leaves the spec as it was
        spec["queries"] = queries
    if setting == "zsl":
        return spec
    spec.update(
        k=k,
        permutation=cfg.permutation_index(config, task, seed),
        demo_labels=cfg.demo_labels(config, setting),
        min_true_k=config["min_true_k"],
    )
    if order:
        spec["order"] = int(order)
    if not cfg.is_base_setting(setting):
        method = cfg.method_spec(config, setting)
        grid = cfg.choice_grid(config, setting)
        if grid is None:
            lr, epochs = cfg.learning_rate(config, task, setting), int(method.get("epochs") or 1)
        elif chosen is None:
            lr, epochs = None, max(grid["epochs"])
        else:
            lr, epochs = float(chosen["lr"]), int(chosen["epochs"])
        spec.update(
            kind=method["kind"], clip_grad_norm=method.get("clip_grad_norm"), lr=lr, ft_demos=config["ft_demos"]
        )
        if epochs != 1:
            spec["epochs"] = epochs
    return spec


# ---------------------------------------------------------------------------------------------
# finetuning's setting, chosen on development rows


def choices(config: dict) -> list[dict]:
    """Every (model, variant, task, method) whose method chooses its learning rate and epochs on
    development rows (``methods.<name>.choose``): one choice each, which every seed's and order's
    finetuning of it reads."""
    seen = []
    for r in runs(config):
        key = dict(model=r["model"], variant=r["variant"], task=r["task"], method=r["method"])
        if cfg.choice_grid(config, r["method"]) is not None and key not in seen:
            seen.append(key)
    return seen


def choice_jobs(config: dict) -> list[dict]:
    """The choice jobs (rule choose_finetuning): one per (model, task) with a choice, which makes
    every choice of its variants and methods (:func:`choices`). One job, not one per choice: on
    the default run's tiny model a job's start costs as much as its grid."""
    jobs = []
    for c in choices(config):
        job = dict(model=c["model"], task=c["task"])
        if job not in jobs:
            jobs.append(job)
    return jobs


def choice_job_spec(config: dict, model: str, task: str) -> dict:
    """What a choice job executes, and its rerun trigger: each of its choices (:func:`choice_spec`)
    with its variant, in plan order."""
    return {
        "choices": [
            {"variant": c["variant"], **choice_spec(config, model, c["variant"], task, c["method"])}
            for c in choices(config)
            if (c["model"], c["task"]) == (model, task)
        ]
    }


def choice_spec(config: dict, model: str, variant: str, task: str, method: str) -> dict:
    """One choice of a choice job (:func:`choice_job_spec`): the grid, and
    per seed of the task the method's run (:func:`run_spec`, without a rate) with the development
    rows as its queries: the train rows that no seed of the task (all its ``seeds``, whatever
    ``n_seeds``) takes among its first k demonstrations (the config's k, or the method's where
    larger), ``examples`` of them (``data.splits.select_dev``). Never an evaluation example."""
    grid = cfg.choice_grid(config, method)
    if grid is None:
        raise cfg.ConfigError(f"methods.{method} has no choose key: its rate is its own, nothing to choose")
    held = {
        "split": "development",
        "seeds": [int(s) for s in cfg.task_spec(config, task).seeds],
        "k": max(int(config["k"]), cfg.setting_k(config, method)),
    }
    seeds = []
    for seed in cfg.task_seeds(config, task):
        spec = run_spec(config, task, method, seed, model=model)
        spec.pop("epochs", None)
        seeds.append({**spec, "lr": None, "queries": held, "max_eval": grid["examples"]})
    return {"method": method, "grid": {"lr": grid["lr"], "epochs": grid["epochs"]}, "runs": seeds}


# ---------------------------------------------------------------------------------------------
# the report


def report_model(config: dict) -> str:
    return config["report"]["model"] or next(iter(config["models"]))


def report_variant(config: dict) -> str:
    """The variant the per-method tables and figures show: trained, when it runs."""
    return "trained" if "trained" in config["variants"] else next(iter(config["variants"]))


def report_methods(config: dict) -> list[str]:
    return config["variants"][report_variant(config)] or list(config["methods"])[:1]


def report_baseline(config: dict) -> str | None:
    """The method alpha is measured against in the report variant, if that variant runs it."""
    variant = report_variant(config)
    return next((b for m in report_methods(config) if (b := baseline_of(config, variant, m))), None)


def _spec(config: dict, method: str, **changes) -> dict:
    return {**cfg.method_spec(config, method), **changes}


def layer_causal_methods(config: dict, clipped: bool) -> list[str]:
    """The report variant's layer-causal methods on gold labels, with or without clipping."""
    found = []
    for method in report_methods(config):
        spec = _spec(config, method)
        if spec["kind"] == "lcgd" and spec["demo_labels"] == "gold" and (spec["clip_grad_norm"] is not None) == clipped:
            found.append(method)
    return found


def paper002_methods(config: dict) -> list[str]:
    """Label-switched and linearized methods, each after its plain counterpart (the method whose
    spec differs only in demo_labels / kind), as paper 002 compares them."""
    methods = report_methods(config)
    ordered = []
    for method in methods:
        spec = _spec(config, method)
        if spec["demo_labels"] == "gold" and spec["kind"] != "linearized":
            continue
        plain = _spec(config, method, demo_labels="gold", kind="gd" if spec["kind"] == "linearized" else spec["kind"])
        twins = [p for p in methods if p != method and _spec(config, p) == plain]
        ordered += [p for p in twins[:1] if p not in ordered] + [method]
    return ordered


def tables(config: dict) -> list[str]:
    """The tables the config has data for."""
    planned = ["accuracy", "methods", "intervals", "data"]  # 003 Table 1, 001 Table 2, CIs, 001 Table 3
    if len(config["variants"]) > 1:
        planned.append("variants")  # paper 001 Table 1
    if report_baseline(config) and layer_causal_methods(config, clipped=False):
        planned.append("layer_causal")  # paper 003 Table 2
    if report_baseline(config) and layer_causal_methods(config, clipped=True):
        planned.append("clipping")  # paper 003 Table 3
    if paper002_methods(config):
        planned.append("paper002")  # label switching and linearized FT
    if report_baseline(config) and len(report_methods(config)) > 1:
        planned.append("comparisons")
    if k_sweeps(config):
        planned.append("k_sweep")  # accuracies and similarities against the demonstrations
    if order_runs(config):
        planned.append("orders")  # Shen et al. 2023: order sensitivity of ICL and each method
    if choices(config):
        planned.append("choice")  # each choosing method's grid on the development rows, and its choice
    if config["report"]["reproduction"]:
        planned += ["reproduction", "claims", "premise"]  # the run beside the published numbers and claims
        if chosen_roles(config):
            planned.append("claims_chosen")  # the claims again, GD and its kin at the chosen setting
    planned.append("costs")  # what each rule's jobs took (their benchmark records)
    return planned


def _sweeps(config: dict, varying: tuple[str, ...], column: str, value, plain) -> list[dict]:
    """The report variant's methods grouped by everything in their spec but ``varying``: one row
    (group, method, task, ``column``: ``value(task, method)``) per method and task of every group
    whose methods differ in that value on some task. A group is named after its first ``plain``
    method (the one at the protocol's setting), else after its methods' kind (GD, LCGD)."""
    groups: dict[str, list[str]] = {}
    for method in report_methods(config):
        spec = cfg.method_spec(config, method)
        key = json.dumps({k: v for k, v in spec.items() if k not in varying}, sort_keys=True, default=str)
        groups.setdefault(key, []).append(method)
    rows = []
    for members in groups.values():
        found = [dict(method=m, task=t, **{column: value(t, m)}) for m in members for t in config["tasks"]]
        if not any(len({r[column] for r in found if r["task"] == t}) > 1 for t in config["tasks"]):
            continue
        plain_members = [m for m in members if plain(m)]
        # a group with no method at the protocol's setting (rates of its own only): named by its kind
        group = names.method_label(plain_members[0] if plain_members else cfg.method_spec(config, members[0])["kind"])
        rows += [dict(group=group, **r) for r in found]
    return rows


def lr_sweeps(config: dict) -> list[dict]:
    """Methods that differ only in their learning rate (``lr``, ``lr_scale``): rows (group, method,
    task, lr). Empty when the config sweeps nothing."""
    return _sweeps(
        config,
        ("lr", "lr_scale"),
        "lr",
        lambda t, m: cfg.learning_rate(config, t, m) if cfg.choice_grid(config, m) is None else None,
        lambda m: config["methods"][m].get("lr") is None and config["methods"][m].get("lr_scale", 1.0) == 1.0,
    )


def k_sweeps(config: dict) -> list[dict]:
    """Methods that differ only in their number of demonstrations (``k``): rows (group, method,
    task, k). Empty when the config sweeps no k."""
    return _sweeps(
        config,
        ("k",),
        "k",
        lambda t, m: cfg.setting_k(config, m),
        lambda m: cfg.method_spec(config, m).get("k") in (None, config["k"]),
    )


def figures(config: dict) -> list[str]:
    """The figures the config has data for."""
    planned = ["per_layer", "accuracy"]  # paper 001 Fig. 3; accuracy per task
    planned += ["alpha"] if report_baseline(config) else []  # paper 001 Fig. 2
    planned += ["grad_norms", "prediction_changes"]  # paper 001 Fig. 4 / 003 Fig. 3; paper 003 Fig. 1
    planned += ["output_distributions"]  # Shen et al. 2023: KL(ICL || FT) beside KL(ICL || ZSL)
    planned += ["orders"] if order_runs(config) else []  # Shen et al. 2023: order sensitivity
    planned += ["lr_sweep"] if lr_sweeps(config) else []
    planned += ["k_sweep"] if k_sweeps(config) else []
    planned += ["models", "sizes"] if len(config["models"]) > 1 else []
    planned += ["reproduction", "claims", "premise"] if config["report"]["reproduction"] else []
    return planned


def grad_norm_run(config: dict, default_task: str) -> tuple[str, int]:
    """Task and seed of the gradient-norm heatmaps: ``report.grad_norm_task`` and its first seed.
    The schema's default (``default_task``, Subj as in the papers) falls back to the first task
    when the config does not run it; a task named on purpose must be one of the config's."""
    task, tasks = config["report"]["grad_norm_task"], list(config["tasks"])
    if task not in tasks:
        if task != default_task:
            raise cfg.ConfigError(f"config key report.grad_norm_task: {task!r} is not one of the tasks {tasks}")
        task = tasks[0]
    return task, cfg.task_seeds(config, task)[0]


def figure_params(config: dict, figure: str) -> dict:
    """What ``report.write_figures`` needs for one figure, and nothing more: a config edit then
    reruns only the figures it changes (params trigger)."""
    params = dict(model=report_model(config), variant=report_variant(config), methods=report_methods(config))
    if figure in (
        "per_layer",
        "accuracy",
        "alpha",
        "lr_sweep",
        "k_sweep",
        "models",
        "sizes",
        "output_distributions",
        "orders",
    ):
        params["ci_level"] = config["statistics"]["ci_level"]
    if figure in (
        "per_layer",
        "alpha",
        "models",
        "output_distributions",
        "orders",
    ):  # colours follow a method's kind, not its name
        params["kinds"] = {m: cfg.method_spec(config, m)["kind"] for m in params["methods"]}
    if figure == "alpha":
        params["baseline"] = report_baseline(config)
    if figure == "lr_sweep":
        params["lr_sweep"] = lr_sweeps(config)
    if figure == "k_sweep":
        params["k_sweep"] = k_sweeps(config)
    if figure in ("models", "sizes"):
        params["models"] = list(config["models"])
    if figure in ("reproduction", "claims", "premise"):
        params.update(ci_level=config["statistics"]["ci_level"], roles=published_roles(config))
    return params


def published_roles(config: dict) -> dict[str, str]:
    """The published methods (docs/published.csv) this config runs: published name -> its method,
    at the protocol's rates; a role that no method plays there is played by the method that chooses
    its rate on development rows, where one does (a config that runs its GD at its best alone)."""
    protocol, chosen = _roles_both_ways(config)
    return {
        role: protocol.get(role, chosen.get(role))
        for role in cfg.PROTOCOL_METHODS
        if role in protocol or role in chosen
    }


def chosen_roles(config: dict) -> dict[str, str]:
    """Where the config runs a published method both at the protocol's rate and at a rate chosen on
    development rows: the roles played at the chosen one, which the claims are read with a second
    time (table claims_chosen); a role with no choosing method is left out, so that no claim mixes
    the two settings. Empty where no role is played at both."""
    protocol, chosen = _roles_both_ways(config)
    return chosen if set(protocol) & set(chosen) else {}


def _roles_both_ways(config: dict) -> tuple[dict[str, str], dict[str, str]]:
    """The published roles at the protocol's rates, and at rates chosen on development rows."""
    methods = list(config["methods"])
    return cfg.protocol_roles(config, methods), cfg.protocol_roles(config, methods, chosen=True)
