"""Display names: one dictionary per kind, and the forms derived from them."""

from icl_gd.common import names


def test_variant_names_in_headings_and_in_text():
    assert [names.variant_label(v) for v in ("trained", "untrained", "layernorm_only")] == [
        "Trained",
        "No Training",
        "LayerNorm Only",
    ]
    # figure titles: "tiny (no training): ..."; a name with inner capitals keeps them
    assert [names.variant_label(v, in_text=True) for v in ("trained_embeddings", "untrained", "layernorm_only")] == [
        "trained embeddings",
        "no training",
        "LayerNorm only",
    ]
    assert names.variant_label("some_variant") == "Some Variant"
    assert names.variant_label("some_variant", in_text=True) == "some variant"


def test_task_and_method_names():
    assert names.task_label("agnews") == "AGNews" and names.task_label("rte") == "rte"
    assert names.method_label("lcgd") == "LCGD" and names.method_label("gd_x2") == "GD_X2"
    assert names.order_tasks(["rte", "cb", "sst2", "boolq"]) == ["sst2", "cb", "boolq", "rte"]
