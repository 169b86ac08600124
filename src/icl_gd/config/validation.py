"""Checking a config: the JSON schema, its defaults, and the names and references the schema
cannot express.

Kept apart from ``config``, whose task presets and run resolution are inputs of every extraction
rule: editing the checks here reruns nothing (a checked value that changes a run reaches it as a
rule parameter, and Snakemake's params trigger catches that).
"""

from __future__ import annotations

import copy
import re

from icl_gd.config.resolve import (
    MODEL_VARIANTS,
    NAME_PATTERN,
    TASK_PRESETS,
    ConfigError,
    gguf_file,
    is_base_setting,
    method_spec,
    task_spec,
)

__all__ = ["ConfigError", "check_names", "validate"]


def check_names(config: dict) -> None:
    """Names become path wildcards: keep them plain and keep settings apart from method names;
    every method a key names exists."""
    for section in ("models", "tasks", "methods"):
        for name in config.get(section, {}):
            if not re.fullmatch(NAME_PATTERN, name):
                raise ConfigError(
                    f"{section}.{name!r}: names become folder names; use letters, digits, '_', '.' or '-'"
                )
    for method in config.get("methods", {}):
        if is_base_setting(method):
            raise ConfigError(
                f"methods.{method}: zsl and icl[_switched|_permuted][_k<n>] are reserved setting names; rename the method"
            )
        spec = method_spec(config, method)
        if spec.get("choose"):
            _check_choice(config, method, spec)
        unknown = [t for t in spec.get("tasks") or [] if t not in config.get("tasks", {})]
        if unknown:
            raise ConfigError(
                f"methods.{method}.tasks names {unknown}, which are not under 'tasks' "
                f"({sorted(config.get('tasks', {}))}); name configured tasks, or remove the key"
            )
    for variant, methods in config.get("variants", {}).items():
        if variant not in MODEL_VARIANTS:
            raise ConfigError(f"variants.{variant}: unknown model variant; choose from {MODEL_VARIANTS}")
        for method in methods or []:
            if method not in config.get("methods", {}):
                raise ConfigError(f"variants.{variant} lists method {method!r}, which is not defined under 'methods'")
    trained = config.get("variants", {}).get("trained") or []
    for method in (config.get("premise") or {}).get("finetuning") or []:
        if method not in trained:
            raise ConfigError(
                f"premise.finetuning names {method!r}, which the trained variant does not run ({trained}); "
                "name a method of variants.trained, or remove it"
            )
    for name, model in config.get("models", {}).items():
        if model.get("source", "builtin") == "builtin" and model.get("n_embd", 64) % model.get("n_head", 4):
            raise ConfigError(
                f"models.{name}.n_embd: {model.get('n_embd', 64)} does not split into n_head = {model.get('n_head', 4)} "
                "heads of equal width; make n_embd a multiple of n_head"
            )
        if model.get("source", "builtin") == "builtin" and model.get("sliding_window"):
            if model.get("architecture", "gpt2") != "qwen2":
                raise ConfigError(
                    f"models.{name}.sliding_window: a GPT-2 attends to the whole context; set architecture: qwen2 "
                    "for sliding layers, or sliding_window: null"
                )
            if model.get("sliding_layers", 1) > model.get("n_layer", 4):
                raise ConfigError(
                    f"models.{name}.sliding_layers: {model['sliding_layers']} sliding layers, but the model has "
                    f"n_layer = {model.get('n_layer', 4)}; use at most n_layer"
                )
        if model.get("source", "builtin") == "builtin":
            _check_recipe(model, name)
            _check_pretrain_tasks(config, model, name)
        if model.get("source") == "gguf":
            gguf_file(model, name)  # at start-up: a missing file or package stops the run before any job
    for task in config.get("tasks", {}):
        spec = task_spec(config, task)
        if spec.source == "synthetic" and task not in TASK_PRESETS:
            raise ConfigError(
                f"tasks.{task}: {task!r} is not a built-in synthetic twin ({', '.join(TASK_PRESETS)}); give its "
                "data: source: local with a path (a folder of <split>.parquet|jsonl|csv files or a "
                "save_to_disk folder), or source: hub with a hub_id"
            )
        if spec.source == "hub" and not spec.hub_id:
            raise ConfigError(f"tasks.{task}: source hub needs a hub_id (a dataset id on the hub, e.g. nyu-mll/glue)")
        if spec.source == "local" and not spec.path:
            raise ConfigError(f"tasks.{task}: source local needs a path (a folder of <split>.parquet|jsonl|csv files)")
    synthetic = [t for t in config.get("tasks", {}) if task_spec(config, t).source == "synthetic"]
    n_train = config.get("synthetic", {}).get("n_train")
    if synthetic and n_train is not None and config.get("k", 0) > n_train:
        raise ConfigError(
            f"k: {config['k']} demonstrations a seed, but the synthetic twins ({', '.join(synthetic)}) have "
            f"synthetic.n_train = {n_train} training rows; raise synthetic.n_train or lower k"
        )
    baseline = config.get("statistics", {}).get("baseline_method")
    if baseline is not None and baseline not in config.get("methods", {}):
        raise ConfigError(
            f"statistics.baseline_method: {baseline!r} is not defined under 'methods'; name one of "
            f"{sorted(config.get('methods', {}))}, or null for no alpha and no method comparisons"
        )


def _check_choice(config: dict, method: str, spec: dict) -> None:
    """A method that chooses its rate and epochs (``choose``) sets neither itself, and its
    development rows are not the run's queries."""
    fixed = [
        key
        for key, unset in (("lr", None), ("lr_scale", 1.0), ("epochs", 1))
        if spec.get(key) is not None and spec.get(key) != unset
    ]
    if fixed:
        raise ConfigError(
            f"methods.{method}.choose picks the learning rate and the epochs from its grid, but "
            f"methods.{method}.{fixed[0]} sets it too; remove methods.{method}.{fixed[0]}, or the choose key"
        )
    if config.get("evaluate_on", "evaluation") == "development":
        raise ConfigError(
            f"methods.{method}.choose picks on the development rows, which evaluate_on: development makes every "
            "run's queries too: a choice read on the rows it is then scored on; use evaluate_on: evaluation"
        )


def _resolve(schema: dict, root: dict) -> dict:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    node = root
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


def _fill_defaults(value, schema: dict, root: dict):
    """Fill ``default``s into ``value`` in place, also inside maps (``additionalProperties``)."""
    schema = _resolve(schema, root)
    if not isinstance(value, dict):
        return
    if "anyOf" in schema and "properties" not in schema:  # an object or null: the object's defaults
        objects = [s for s in map(lambda s: _resolve(s, root), schema["anyOf"]) if "properties" in s]
        if objects:
            _fill_defaults(value, objects[0], root)
        return
    for key, sub in schema.get("properties", {}).items():
        sub = _resolve(sub, root)
        if key not in value and "default" in sub:
            value[key] = copy.deepcopy(sub["default"])
        if key in value:
            _fill_defaults(value[key], sub, root)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key in set(value) - set(schema.get("properties", {})):
            _fill_defaults(value[key], extra, root)


def validate(config: dict, schema: dict) -> dict:
    """Check ``config`` against the JSON schema and return a copy with every default filled in.

    The error names the offending key as a dotted path, e.g. ``tasks.sst2.lr``.
    """
    import jsonschema

    config = copy.deepcopy(config)
    # `--config key=false` arrives as the string 'false': Snakemake reads only True and False as booleans
    for key, sub in schema.get("properties", {}).items():
        if sub.get("type") == "boolean" and str(config.get(key)).lower() in ("true", "false"):
            config[key] = str(config[key]).lower() == "true"
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(config), key=lambda e: list(e.path))
    if errors:
        err = min(errors, key=lambda e: len(e.path))
        best = jsonschema.exceptions.best_match([err])
        where = ".".join(str(p) for p in best.absolute_path) or "(top level)"
        hint = ""
        if best.validator == "additionalProperties":
            node = _resolve(best.schema, schema)
            allowed = sorted(node.get("properties", {}))
            if allowed:
                hint = f"; allowed keys here: {', '.join(allowed)}"
        raise ConfigError(f"config key {where}: {best.message}{hint}")
    _fill_defaults(config, schema, schema)
    check_names(config)
    return config


def precision_warnings(config: dict) -> list[str]:
    """What a validated config gives up against float32, one message per choice: half-precision
    finetuning (``dtype``) and float16 caches (``cache_dtype``). Printed once at start-up
    (``workflow/rules/common.smk``); the document named holds the measurements."""
    warnings = []
    if config["dtype"] in ("float16", "bfloat16"):
        warnings.append(
            f"dtype: {config['dtype']}: the model computes and finetunes in half precision. On a real "
            "pretrained model the change finetuning makes to the attention outputs, which SimAOU, "
            "SimAOU_norm, SimAM_delta and alpha measure, is then not resolved where it is within a few "
            "times half precision's noise floor (small learning rates), and departs from float32's where a "
            "rate throws the model far from its weights. float32 is the recommendation; measurements, and "
            "benchmarks/precision.py to check your model and data: docs/precision.md"
        )
    if config["cache_dtype"] == "float16":
        warnings.append(
            "cache_dtype: float16: every recorded activation is rounded to float16 (three significant "
            "digits), which shifts the similarities of small changes (SimAM_delta, SimAOU_norm at the "
            "smallest learning rates: up to 0.8 of an interval's half-width on the built-in model); "
            "compact, the default, keeps float32's metrics for a little more disk. docs/precision.md "
            '("Which cache_dtype")'
        )
    return warnings


def _check_recipe(model: dict, name: str) -> None:
    """A built-in model's pretraining keys that cannot work together."""
    if model.get("attention_init", "default") == "mimetic" and model.get("architecture", "gpt2") != "qwen2":
        raise ConfigError(
            f"models.{name}.attention_init: mimetic starts a Qwen2 attention layer as a copying head; set "
            "architecture: qwen2, or attention_init: default"
        )
    pooling = model.get("pooling_layers", 0)
    if pooling and model.get("architecture", "gpt2") != "qwen2":
        raise ConfigError(
            f"models.{name}.pooling_layers: a GPT-2's layers cannot pool; set architecture: qwen2, or pooling_layers: 0"
        )
    if pooling > model.get("n_layer", 4):
        raise ConfigError(
            f"models.{name}.pooling_layers: {pooling} pooling layers, but the model has n_layer = "
            f"{model.get('n_layer', 4)}; use at most n_layer"
        )
    low, high = model.get("pretrain_demos", [1, 16])
    if low > high:
        raise ConfigError(f"models.{name}.pretrain_demos: [{low}, {high}] is [fewest, most]; write [{high}, {low}]")
    if model.get("pretrain_canonical_steps", 0) > model.get("pretrain_steps", 150):
        raise ConfigError(
            f"models.{name}.pretrain_canonical_steps: {model['pretrain_canonical_steps']} canonical steps of "
            f"pretrain_steps = {model.get('pretrain_steps', 150)} in all; use at most pretrain_steps"
        )


def _check_pretrain_tasks(config: dict, model: dict, name: str) -> None:
    """The tasks a built-in model trains on in place of the twins (``pretrain_tasks``): the config's
    own (their prepared train splits) and built-in ones (the protocol's templates and label words,
    which the pretraining episodes are written in)."""
    tasks = model.get("pretrain_tasks")
    if not tasks:
        return
    for task in tasks:
        if task not in config.get("tasks", {}):
            raise ConfigError(
                f"models.{name}.pretrain_tasks: {task!r} is not a task of this config, so it has no prepared train "
                f"split to train on; name some of {', '.join(config.get('tasks', {}))}, or add it under tasks"
            )
        if task not in TASK_PRESETS:
            raise ConfigError(
                f"models.{name}.pretrain_tasks: {task!r} is not one of the built-in tasks ({', '.join(TASK_PRESETS)}), "
                "whose templates and label words the pretraining episodes are written in; remove it"
            )
    unknown = sorted(set(model.get("pretrain_leave_out") or ()) - set(tasks))
    if unknown:
        raise ConfigError(
            f"models.{name}.pretrain_leave_out: {', '.join(map(repr, unknown))} is not among pretrain_tasks "
            f"({', '.join(tasks)}), the tasks this model trains on; name some of those"
        )
