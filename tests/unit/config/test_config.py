"""Tests of icl_gd.config.resolve: schema validation with the real schema, task presets, run specs."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import copy  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from icl_gd.config import resolve as cfg  # noqa: E402
from icl_gd.config import validation  # noqa: E402
from icl_gd.config.resolve import ConfigError  # noqa: E402

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"
MINIMAL = {"tasks": {"sst2": None}}

# docs/protocol.md, "Tasks and data", written out again by hand.
PROTOCOL = {
    "sst2": ("Sentence: {sentence} Label:", ("Negative", "Positive"), (2, 3, 4), 5e-4),
    "sst5": ("Sentence: {text} Label:", ("terrible", "bad", "neutral", "good", "great"), (5, 6, 7), 1.6e-4),
    "mr": ("Review: {text} Sentiment:", ("Negative", "Positive"), (5, 6, 7), 3e-3),
    "subj": ("Input: {text} Type:", ("objective", "subjective"), (4, 5, 6), 3e-3),
    "agnews": (
        "Classify the news articles into the categories of World, Sports, Business, and Technology. "
        "Article: {text} Answer:",
        ("World", "Sports", "Business", "Technology"),
        (3, 4, 5),
        0.2,
    ),
    "cb": (
        "{premise} Question: {hypothesis}. True, False, or Neither? Answer:",
        ("True", "False", "Neither"),
        (3, 4, 5),
        0.08,
    ),
}


@pytest.fixture(scope="module")
def schema():
    return yaml.safe_load(SCHEMA_PATH.read_text())


def model_defaults(schema) -> dict:
    props = schema["definitions"]["model"]["properties"]
    defaults = {key: sub["default"] for key, sub in props.items() if "default" in sub}
    # every model key has a default but the prompt's (demo_separator: unset, the top-level key's
    # applies; a default here would enter every model's parameters), pretrain_leave_out (unset:
    # none) and pretrain_tasks (unset: the twins): a default would change every built-in recipe's
    # checksum, so every shipped weight
    assert set(props) - set(defaults) == {"demo_separator", "pretrain_leave_out", "pretrain_tasks"}
    assert len(defaults) >= 13
    return defaults


def validate(schema, **extra):
    return validation.validate({**copy.deepcopy(MINIMAL), **extra}, schema)


# --------------------------------------------------------------------------------------------
# defaults


def test_validate_fills_top_level_and_nested_defaults(schema):
    given = copy.deepcopy(MINIMAL)
    out = validation.validate(given, schema)
    assert given == MINIMAL  # the input is not modified
    assert out["k"] == 32 and out["max_eval"] == 2000 and out["n_seeds"] is None
    assert out["record_position"] == "label_word" and out["ft_demos"] == "all"
    assert out["dtype"] == "float32" and out["cache_dtype"] == "compact" and out["batch_size"] is None
    assert out["variants"] == {"trained": ["gd", "lcgd"]}
    assert out["synthetic"] == {"n_train": 300, "n_eval": 200, "seed": 0}
    assert out["report"] == {"dir": "results/reports", "model": None, "grad_norm_task": "subj", "reproduction": True}
    # defaults inside a default map: the default model gets every model default
    assert out["models"] == {"tiny": model_defaults(schema)}
    assert out["models"]["tiny"]["source"] == "builtin" and out["models"]["tiny"]["id"] is None
    assert out["methods"] == {
        "gd": {
            "kind": "gd",
            "lr": None,
            "clip_grad_norm": None,
            "demo_labels": "gold",
            "lr_scale": 1.0,
            "k": None,
            "tasks": None,
            "epochs": 1,
            "choose": None,
        },
        "lcgd": {
            "kind": "lcgd",
            "lr": None,
            "clip_grad_norm": None,
            "demo_labels": "gold",
            "lr_scale": 1.0,
            "k": None,
            "tasks": None,
            "epochs": 1,
            "choose": None,
        },
    }


def test_validate_fills_defaults_inside_named_entries(schema):
    out = validate(
        schema,
        models={"mine": {"source": "local", "path": "/m"}, "big": {"n_layer": 8}},
        methods={"gd": {"kind": "gd"}, "lcgd_clip": {"kind": "lcgd", "clip_grad_norm": 12.0}},
        variants={"trained": ["gd", "lcgd_clip"]},
    )
    defaults = model_defaults(schema)
    assert out["models"]["mine"] == {**defaults, "source": "local", "path": "/m"}
    assert out["models"]["big"] == {**defaults, "n_layer": 8}
    assert defaults["n_layer"] != 8 and defaults["source"] == "builtin"
    assert out["methods"]["lcgd_clip"] == {
        "kind": "lcgd",
        "clip_grad_norm": 12.0,
        "lr": None,
        "demo_labels": "gold",
        "lr_scale": 1.0,
        "k": None,
        "tasks": None,
        "epochs": 1,
        "choose": None,
    }
    # inside a method's choose (an object or null): the grid's own defaults
    out = validate(
        schema,
        methods={"gd": {"kind": "gd"}, "best": {"kind": "gd", "choose": {"lr": [0.1]}}},
        variants={"trained": ["gd", "best"]},
    )
    assert out["methods"]["best"]["choose"] == {"lr": [0.1], "epochs": [1], "examples": 100}
    assert out["methods"]["gd"] == {
        "kind": "gd",
        "lr": None,
        "clip_grad_norm": None,
        "demo_labels": "gold",
        "lr_scale": 1.0,
        "k": None,
        "tasks": None,
        "epochs": 1,
        "choose": None,
    }


def test_validate_keeps_given_values(schema):
    out = validate(schema, k=4, synthetic={"n_train": 50}, record_position="answer")
    assert out["k"] == 4 and out["record_position"] == "answer"
    assert out["synthetic"] == {"n_train": 50, "n_eval": 200, "seed": 0}


# --------------------------------------------------------------------------------------------
# errors name the key


@pytest.mark.parametrize(
    "extra, names",
    [
        ({"n_seed": 1}, ["(top level)", "'n_seed'"]),  # a typo'd key
        ({"models": {"tiny": {"n_layers": 2}}}, ["models.tiny", "'n_layers'", "n_layer"]),
        ({"tasks": {"sst2": {"lrr": 0.1}}}, ["tasks.sst2", "'lrr'"]),
        ({"k": "32"}, ["config key k:", "integer"]),  # a wrong type
        ({"tasks": {"sst2": {"lr": "fast"}}}, ["tasks.sst2.lr", "number"]),
        ({"methods": {"gd": {"kind": "gd", "lr": "x"}, "lcgd": {"kind": "lcgd"}}}, ["methods.gd.lr"]),
        ({"methods": {"g": {"kind": "adam"}}}, ["methods.g.kind", "'adam'"]),
        ({"n_seeds": 0}, ["n_seeds"]),
        ({"record_position": "query"}, ["record_position", "'query'"]),
        ({"demo_separator": "tab"}, ["demo_separator", "'tab'"]),
        ({"models": {"tiny": {"demo_separator": "\n"}}}, ["models.tiny.demo_separator"]),
        ({"variants": {"pretrained": ["gd"]}}, ["variants", "'pretrained'"]),  # an unknown variant
    ],
)
def test_schema_errors_name_the_key(schema, extra, names):
    with pytest.raises(ConfigError) as err:
        validate(schema, **extra)
    for name in names:
        assert name in str(err.value)


def test_a_boolean_given_on_the_command_line_is_read_as_one(schema):
    assert validate(schema)["warm_worker"] is True
    for given, read in [("false", False), ("False", False), (False, False), ("true", True)]:
        assert validate(schema, warm_worker=given)["warm_worker"] is read
    with pytest.raises(ConfigError, match="warm_worker"):
        validate(schema, warm_worker="maybe")


def test_variant_listing_an_undefined_method(schema):
    with pytest.raises(ConfigError, match=r"variants\.trained lists method 'sgd'"):
        validate(schema, variants={"trained": ["gd", "sgd"]})


def test_method_named_like_a_setting(schema):
    with pytest.raises(ConfigError, match=r"methods\.zsl: .*reserved"):
        validate(schema, methods={"zsl": {"kind": "gd"}}, variants={"trained": ["zsl"]})


def test_unknown_task_without_template(schema):
    with pytest.raises(ConfigError, match=r"tasks\.mytask\.template"):
        validate(schema, tasks={"mytask": {"source": "local", "path": "data/mytask"}})


def test_unknown_task_with_everything_is_accepted(schema):
    task = {
        "source": "local",
        "path": "d",
        "template": "Q: {question} A:",
        "label_words": ["no", "yes"],
        "seeds": [1],
        "lr": 0.01,
    }
    out = validate(schema, tasks={"mytask": task})
    spec = cfg.task_spec(out, "mytask")
    assert spec.text_fields == ["question"] and spec.n_labels == 2 and spec.path == "d"


def test_a_task_without_data_says_where_to_get_it(schema):
    """A task that is none of the six twins and names no source is an error at validation (not a
    missing-input error of a synthetic file later), saying which sources to give."""
    task = {"template": "Q: {question} A:", "label_words": ["no", "yes"], "seeds": [1], "lr": 0.01}
    with pytest.raises(
        ConfigError,
        match=r"tasks\.foo: 'foo' is not a built-in synthetic twin.*source: local with a path.*source: hub with a hub_id",
    ):
        validate(schema, tasks={"foo": task})
    with pytest.raises(ConfigError, match=r"tasks\.foo: source hub needs a hub_id"):
        validate(schema, tasks={"foo": {**task, "source": "hub"}})
    with pytest.raises(ConfigError, match=r"tasks\.foo: source local needs a path"):
        validate(schema, tasks={"foo": {**task, "source": "local"}})


def test_check_names_without_schema():
    # check_names alone also catches an unknown variant and a method without a valid kind
    with pytest.raises(ConfigError, match=r"variants\.pretrained"):
        validation.check_names({"variants": {"pretrained": []}})
    with pytest.raises(ConfigError, match=r"methods\.m\.kind"):
        validation.check_names({"methods": {"m": {"kind": "sgd"}}})
    with pytest.raises(ConfigError, match="folder names"):
        validation.check_names({"models": {"my model": {}}})


# --------------------------------------------------------------------------------------------
# task presets and run specs


@pytest.mark.parametrize("task", sorted(PROTOCOL))
def test_task_presets_follow_the_protocol(schema, task):
    out = validate(schema, tasks={task: None})
    spec = cfg.task_spec(out, task)
    template, words, seeds, lr = PROTOCOL[task]
    assert spec.template == template
    assert spec.label_words == words
    assert spec.seeds == seeds
    assert spec.lr == lr
    assert spec.source == "synthetic"


def protocol_task_table() -> dict[str, dict]:
    """docs/protocol.md's table of the six tasks, parsed."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or cells[0] not in cfg.TASK_PRESETS:
            continue
        task, hub, splits, template, words, seeds, lr = cells
        hub_id, _, hub_config = hub.partition(", config ")
        train, eval_ = splits.split(" (")[0].split(" / ")
        rows[task] = dict(
            hub_id=hub_id.strip("`"),
            hub_config=hub_config.strip("`") or None,
            splits={"train": train, "eval": eval_},
            template=template.strip("`"),
            label_words=words.split(", "),
            seeds=[int(x) for x in seeds.split(", ")],
            lr=float(lr),
        )
    return rows


def test_the_protocol_document_and_the_presets_agree():
    """docs/protocol.md is read by people, TASK_PRESETS by the code: neither may drift."""
    table = protocol_task_table()
    assert sorted(table) == sorted(cfg.TASK_PRESETS)
    for task, row in table.items():
        assert row == {k: cfg.TASK_PRESETS[task][k] for k in row}, task


def test_task_preset_hub_ids():
    spec = cfg.task_spec({"tasks": {"sst2": {"source": "hub"}}}, "sst2")
    assert (spec.hub_id, spec.hub_config, spec.splits) == (
        "nyu-mll/glue",
        "sst2",
        {"train": "train", "eval": "validation"},
    )
    assert cfg.task_spec({"tasks": {"subj": None}}, "subj").splits["eval"] == "test"


def test_config_overrides_a_preset(schema):
    out = validate(schema, tasks={"sst2": {"lr": 0.01, "seeds": [9, 8]}})
    spec = cfg.task_spec(out, "sst2")
    assert spec.lr == 0.01 and spec.seeds == (9, 8)
    assert spec.template == "Sentence: {sentence} Label:"  # the rest still from the preset


def test_task_spec_of_an_absent_task():
    with pytest.raises(ConfigError, match="'mr' is not under 'tasks'"):
        cfg.task_spec({"tasks": {"sst2": None}}, "mr")


def test_task_seeds_with_n_seeds():
    config = {"tasks": {"sst2": None, "cb": None}}
    assert cfg.task_seeds(config, "sst2") == [2, 3, 4]
    assert cfg.task_seeds({**config, "n_seeds": None}, "cb") == [3, 4, 5]
    assert cfg.task_seeds({**config, "n_seeds": 2}, "sst2") == [2, 3]
    assert cfg.task_seeds({**config, "n_seeds": 1}, "cb") == [3]
    assert cfg.task_seeds({**config, "n_seeds": 5}, "cb") == [3, 4, 5]


def test_permutation_index():
    config = {"tasks": {"sst2": None, "subj": None}}
    assert [cfg.permutation_index(config, "sst2", s) for s in (2, 3, 4)] == [0, 1, 2]
    assert [cfg.permutation_index(config, "subj", s) for s in (4, 5, 6)] == [0, 1, 2]
    with pytest.raises(ConfigError, match="seed 7"):
        cfg.permutation_index(config, "sst2", 7)


def test_learning_rate_method_overrides_task(schema):
    out = validate(
        schema,
        tasks={"sst2": None, "agnews": {"lr": 0.5}},
        methods={"gd": {"kind": "gd"}, "fast": {"kind": "gd", "lr": 0.1}},
        variants={"trained": ["gd", "fast"]},
    )
    assert cfg.learning_rate(out, "sst2", "gd") == 5e-4
    assert cfg.learning_rate(out, "agnews", "gd") == 0.5
    assert cfg.learning_rate(out, "sst2", "fast") == 0.1
    assert cfg.learning_rate(out, "agnews", "fast") == 0.1
    with pytest.raises(ConfigError, match="method 'lcgd'"):
        cfg.learning_rate(out, "sst2", "lcgd")


def test_template_fields():
    assert cfg.template_fields("{premise} Question: {hypothesis}. {premise}") == ["premise", "hypothesis"]
    with pytest.raises(ConfigError, match="plain column name"):
        cfg.template_fields("Input: {} Type:")


def test_lr_scale_sweeps_each_tasks_own_rate():
    config = {
        "tasks": {"sst2": {}, "cb": {}},
        "methods": {"gd_x2": {"kind": "gd", "lr_scale": 2.0}, "fixed": {"kind": "gd", "lr": 0.1, "lr_scale": 0.5}},
    }
    assert cfg.learning_rate(config, "sst2", "gd_x2") == pytest.approx(2 * 5e-4)
    assert cfg.learning_rate(config, "cb", "gd_x2") == pytest.approx(2 * 0.08)
    assert cfg.learning_rate(config, "cb", "fixed") == pytest.approx(0.05)


def test_baseline_method_must_be_a_method(schema):
    out = validate(schema)
    assert out["statistics"] == {
        "baseline_method": "gd",
        "n_boot": 1000,
        "ci_level": 0.95,
        "n_permutations": 10000,
        "significance_level": 0.05,
        "seed": 0,
        "max_replicates": 1048576,
    }
    with pytest.raises(ConfigError, match=r"statistics.baseline_method: 'sgd' is not defined under 'methods'.*or null"):
        validate(schema, statistics={"baseline_method": "sgd"})
    assert validate(schema, statistics={"baseline_method": None})["statistics"]["baseline_method"] is None


# --------------------------------------------------------------------------------------------
# every numeric key at the edges of what the schema allows


def _numeric_keys(node, schema, path=()):
    """(dotted path, its schema) of every integer or number key, maps entered through a sample name."""
    node = validation._resolve(node, schema)
    for key, sub in node.get("properties", {}).items():
        sub = validation._resolve(sub, schema)
        types = sub.get("type") if isinstance(sub.get("type"), list) else [sub.get("type")]
        if {"integer", "number"} & set(types):
            yield path + (key,), sub
        yield from _numeric_keys(sub, schema, path + (key,))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and "$ref" in extra:
        yield from _numeric_keys(extra, schema, path + ("x",))


def _with(path, value):
    """A config that sets one key (in a sample model 'x' / method 'x' / task sst2 where in a map)."""
    base = {
        "methods": {"gd": {"kind": "gd"}, "lcgd": {"kind": "lcgd"}, "x": {"kind": "gd"}},
        "models": {"x": {"source": "builtin", "architecture": "qwen2"}},
        "tasks": {"sst2": {}},
        "k": 1,
    }  # below the twins' smallest size, which another key's bound may set
    node = base
    for part in path[:-1]:
        part = "sst2" if part == "x" and node is base.get("tasks") else part
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return base


def test_every_numeric_key_takes_its_bounds_and_refuses_past_them_by_name(schema):
    keys = list(_numeric_keys(schema, schema))
    assert len(keys) >= 20  # the walk reached into models, methods and tasks
    for path, sub in keys:
        dotted = ".".join(path)
        integer = "integer" in (sub["type"] if isinstance(sub["type"], list) else [sub["type"]])
        step = 1 if integer else 1e-9
        for bound, inside, outside in (
            ("minimum", 0, -step),
            ("exclusiveMinimum", step, 0),
            ("maximum", 0, step),
            ("exclusiveMaximum", -step, 0),
        ):
            if bound not in sub:
                continue
            edge = sub[bound]
            out = validate(schema, **_with(path, edge + inside))
            node = out
            for part in path:
                node = node["sst2" if part == "x" and "sst2" in node and "x" not in node else part]
            assert node == edge + inside, dotted
            pattern = r"\.".join("(x|sst2)" if part == "x" else re.escape(part) for part in path)
            with pytest.raises(ConfigError, match=f"config key {pattern}: "):
                validate(schema, **_with(path, edge + outside))


def test_cross_key_limits_of_the_builtin_model_are_named(schema):
    with pytest.raises(ConfigError, match=r"models\.x\.n_embd: 10 does not split into n_head = 4"):
        validate(schema, models={"x": {"source": "builtin", "n_embd": 10, "n_head": 4}})
    with pytest.raises(
        ConfigError, match=r"models\.x\.sliding_window: a GPT-2 attends to the whole context; set architecture: qwen2"
    ):
        validate(schema, models={"x": {"source": "builtin", "sliding_window": 24}})
    with pytest.raises(
        ConfigError, match=r"models\.x\.sliding_layers: 5 sliding layers, but the model has n_layer = 4"
    ):
        validate(
            schema,
            models={"x": {"source": "builtin", "architecture": "qwen2", "sliding_window": 24, "sliding_layers": 5}},
        )


def test_the_recipe_keys_that_cannot_work_together_are_named(schema):
    qwen2 = {"source": "builtin", "architecture": "qwen2"}
    with pytest.raises(ConfigError, match=r"models\.x\.attention_init: mimetic starts a Qwen2 attention layer"):
        validate(schema, models={"x": {"source": "builtin", "attention_init": "mimetic"}})
    with pytest.raises(ConfigError, match=r"models\.x\.pooling_layers: a GPT-2's layers cannot pool"):
        validate(schema, models={"x": {"source": "builtin", "pooling_layers": 1}})
    with pytest.raises(
        ConfigError, match=r"models\.x\.pooling_layers: 3 pooling layers, but the model has n_layer = 2"
    ):
        validate(schema, models={"x": {**qwen2, "n_layer": 2, "pooling_layers": 3}})
    with pytest.raises(ConfigError, match=r"models\.x\.pretrain_demos: \[8, 2\] is \[fewest, most\]; write \[2, 8\]"):
        validate(schema, models={"x": {**qwen2, "pretrain_demos": [8, 2]}})
    with pytest.raises(
        ConfigError, match=r"models\.x\.pretrain_canonical_steps: 200 canonical steps of pretrain_steps = 100"
    ):
        validate(schema, models={"x": {**qwen2, "pretrain_steps": 100, "pretrain_canonical_steps": 200}})
    with pytest.raises(
        ConfigError, match=r"config key models\.x\.pretrain_curve: .*allowed keys here: every, examples, held_out, k"
    ):
        validate(schema, models={"x": {**qwen2, "pretrain_curve": {"steps": 8}}})
    out = validate(schema, models={"x": {**qwen2, "attention_init": "mimetic", "pretrain_curve": {"k": 4}}})
    assert out["models"]["x"]["pretrain_curve"] == {"every": 100, "k": 4, "examples": 50}


def test_more_demonstrations_than_the_twins_hold_is_named(schema):
    with pytest.raises(
        ConfigError, match=r"k: 32 demonstrations a seed, but the synthetic twins \(sst2\) have synthetic.n_train = 8"
    ):
        validate(schema, tasks={"sst2": {"source": "synthetic"}}, synthetic={"n_train": 8})
    validate(schema, tasks={"sst2": {"source": "synthetic"}}, synthetic={"n_train": 8}, k=8)


def test_a_precision_that_departs_from_float32_is_named_with_what_it_shifts_and_where_to_read(schema):
    assert validation.precision_warnings(validation.validate({}, schema)) == []  # the default: float32
    for key, value, words in [
        ("dtype", "float16", "SimAM_delta"),
        ("dtype", "bfloat16", "half precision"),
        ("cache_dtype", "float16", "SimAM_delta"),
    ]:
        messages = validation.precision_warnings(validation.validate({key: value}, schema))
        assert len(messages) == 1 and messages[0].startswith(f"{key}: {value}"), messages
        assert words in messages[0] and "docs/precision.md" in messages[0]
    both = validation.validate({"dtype": "float16", "cache_dtype": "float16"}, schema)
    assert len(validation.precision_warnings(both)) == 2
