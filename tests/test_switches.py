"""A canonical name identifies a model up to its sizes: every switch away from its default shows."""

import pytest

import zoo
from zoo.specs.naming import NOT_SWITCHES

SIZES = {"vocab_size": 40, "d_model": 32, "n_heads": 4}
AWAY = {  # a value away from the default (and from what the default stands for) of every switch
    "n_kv_heads": 2, "head_width": 16, "final_norm": True, "scale_embeddings": False, "embedding_norm": True,
    "tie_embeddings": True, "share_embeddings": True, "scale_scores": False, "scale_output": True,
    "output_bias": "fixed", "attn_softcap": 50.0, "logit_softcap": 30.0, "qk_norm": "rmsnorm", "window": 8,
    "share_layers": True, "embedding_dim": 16, "output_transform": True, "bias": False,
}
SWITCHES = [field for field in zoo.ModelSpec.model_fields if field not in NOT_SWITCHES and field not in zoo.AXES]


def test_every_switch_has_a_value_here():
    assert sorted(AWAY) == sorted(SWITCHES), "a new field beside the axes is a switch: give it a value in AWAY"


@pytest.mark.parametrize("switch", SWITCHES)
def test_a_switch_away_from_its_default_shows_in_the_name_and_comes_back(switch):
    plain = zoo.spec("post.sinusoidal.fused.relu", **SIZES)
    spec = plain.replace(**{switch: AWAY[switch]})
    assert spec.switches() == {switch: AWAY[switch]}
    assert spec.name == f"{plain.name}.{switch}={zoo.specs.choices.value_text(AWAY[switch])}" != plain.name
    assert spec.axes_name == plain.name, "a run folder's stem stays the axes' name"
    assert zoo.spec(spec.name, **SIZES) == spec, "the name gives back the same model"


@pytest.mark.parametrize("same", [{"norm": "pre", "final_norm": True}, {"n_kv_heads": 4}, {"head_width": 8},
                                  {"embedding_dim": 32}, {"bias": False, "output_bias": "none"}])
def test_a_value_the_default_stands_for_does_not_show(same):
    spec = zoo.spec("post.sinusoidal.fused.relu", **SIZES, **same)
    shown = {"bias": False} if "bias" in same else {}
    assert spec.switches() == shown and spec.name == spec.axes_name + (".bias=false" if shown else "")


def test_several_switches_show_in_the_specs_order_and_parse_with_numbers_inside():
    name = "pre.rope.sdpa.swiglu.rmsnorm.attn_softcap=50.0+qk_norm=rmsnorm+window=128"
    spec = zoo.spec(name, **SIZES)
    assert (spec.attn_softcap, spec.qk_norm, spec.window, spec.name) == (50.0, "rmsnorm", 128, name)
    assert zoo.spec("pre.rope.sdpa.swiglu.rmsnorm.window=128+qk_norm=rmsnorm+attn_softcap=50.0", **SIZES).name == name
    with pytest.raises(zoo.ConfigError, match="gives the switch window twice"):
        zoo.spec("pre.rope.sdpa.swiglu.window=8+window=16", **SIZES)
    with pytest.raises(zoo.ConfigError, match=r"unknown field 'windw' \(did you mean 'window'\?\)"):
        zoo.spec("pre.rope.sdpa.swiglu.windw=8", **SIZES)


def test_two_presets_that_differ_beyond_their_axes_have_different_names():
    names = {preset: zoo.spec(preset, vocab_size=100).name for preset in zoo.list_variants()}
    assert names["pre-ln"] == "pre.sinusoidal.fused.relu", "pre's own final norm is no switch"
    assert names["torch-transformer"] == "post.sinusoidal.fused.relu.final_norm=true" != names["vaswani2017"]
    assert len(set(names.values())) == len(names), "no two presets share a name"
    axes = [zoo.spec(preset, vocab_size=100).axes_name for preset in ("torch-transformer", "vaswani2017")]
    assert axes[0] == axes[1], "as they did when names held the axes alone"
