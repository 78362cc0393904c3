"""A canonical name identifies a model up to its sizes: every switch away from its default shows.
The switches are grouped (attn, embeddings, output) and each keeps its flat key."""

import json

import pytest
import torch

import zoo
from zoo.specs.experiment import load_experiment
from zoo.specs.switches import FLAT, GROUPS, flat_fields

SIZES = {"vocab_size": 40, "d_model": 32, "n_heads": 4}
AWAY = {  # a value away from the default (and from what the default stands for) of every switch
    "n_kv_heads": 2, "head_width": 16, "final_norm": True, "scale_embeddings": False, "embedding_norm": True,
    "tie_embeddings": True, "share_embeddings": True, "scale_scores": False, "scale_output": True,
    "output_bias": "fixed", "attn_softcap": 50.0, "logit_softcap": 30.0, "qk_norm": "rmsnorm", "window": 8,
    "share_layers": True, "embedding_dim": 16, "output_transform": True, "bias": False, "qk_norm_scope": "projection",
    "qkv_bias": False, "out_bias": False, "scale_width": 12.0, "logit_scale": 0.0625,
    "embedding_dim_scope": "embedding", "documents": "separate", "parametrization": "mup", "mup_base_width": 16,
    "mup_base_head_width": 4, "embedding_init_std": 0.02,
}
NEEDS = {"qk_norm_scope": {"qk_norm": "rmsnorm"}, "embedding_dim_scope": {"embedding_dim": 16},
         "mup_base_head_width": {"parametrization": "mup", "mup_base_width": 16}}
TOGETHER = ("parametrization", "mup_base_width")
"""Switches that need each other (muP and its base width): each alone is refused, so they show together."""
"""What a switch's value needs beside it (a scope of a qk-norm that is there)."""
PLAIN = {"documents": "decoder.post.sinusoidal.fused.relu"}
"""The plain model a switch is turned on in, where the encoder-decoder cannot take it."""
SWITCHES = list(FLAT)
NOT_SWITCHES = {"kind", "src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "n_encoder_layers",
                "n_decoder_layers", "dropout", "max_len", "pad_id", "bos_id", "eos_id", "attention_dropout",
                "activation_dropout", "residual_dropout", "embedding_dropout"}
"""The kind and the fields that size a model, regularize its training or number its special tokens."""


def test_every_switch_has_a_value_here():
    assert sorted(AWAY) == sorted(SWITCHES), "a new switch needs a value in AWAY"


def test_every_field_beyond_the_axes_and_sizes_is_a_switch_with_a_flat_key():
    top = set(zoo.ModelSpec.model_fields) - NOT_SWITCHES - set(zoo.AXES) - set(GROUPS) - {"layers"}  # rules: their own
    grouped = {(group, field) for group, settings in GROUPS.items() for field in settings.model_fields}
    assert {path for path in FLAT.values() if path[0] is not None} == grouped, "give a new group field a flat key"
    assert {field for group, field in FLAT.values() if group is None} == top, "a new field of the spec: a switch?"


@pytest.mark.parametrize("switch", [key for key, (group, _) in FLAT.items() if group is not None])
def test_a_switch_reads_the_same_by_its_flat_key_and_in_its_group(switch):
    group, field = FLAT[switch]
    needs = NEEDS.get(switch, {})
    flat = zoo.spec("pre-ln", **SIZES, **needs, **{switch: AWAY[switch]})
    assert flat == zoo.spec("pre-ln", **SIZES, **needs, **{group: {field: AWAY[switch]}})
    assert getattr(getattr(flat, group), field) == AWAY[switch]
    sets = [f"model.{key}={value}" for key, value in needs.items()]
    assert load_experiment(None, [*sets, f"model.{switch}={AWAY[switch]}"]).model == \
        load_experiment(None, [*sets, f"model.{group}.{field}={AWAY[switch]}"]).model
    assert flat.replace(**{switch: getattr(getattr(zoo.spec("pre-ln", **SIZES), group), field)}) == \
        zoo.spec("pre-ln", **SIZES, **needs), "replace by the flat key changes that switch alone"


def test_a_switch_given_both_ways_must_agree_and_a_group_change_keeps_the_rest():
    assert zoo.spec("pre-ln", **SIZES, window=8, attn={"window": 8}).attn.window == 8
    with pytest.raises(zoo.ConfigError, match=r"window 8 and attn.window 16 are one switch given twice"):
        zoo.spec("pre-ln", **SIZES, window=8, attn={"window": 16})
    spec = zoo.spec("pre-ln", **SIZES, window=8, qk_norm="rmsnorm")
    assert spec.replace(attn={"window": 4}).attn.qk_norm == "rmsnorm"
    assert zoo.spec("pre-ln", **SIZES, attn={"window": 4, "qk_norm": "rmsnorm"}).replace(window=2).attn.qk_norm == "rmsnorm"
    assert load_experiment(None, ["model.attn.window=4", "model.window=2"]).model.attn.window == 2, "the last one set"
    with pytest.raises(zoo.ConfigError, match=r"unknown field 'windw' \(did you mean 'window'\?\)"):
        zoo.spec("pre-ln", **SIZES, attn={"windw": 4})


def test_switches_that_need_each_other_show_together_and_come_back():
    plain = zoo.spec("post.sinusoidal.fused.relu", **SIZES)
    spec = plain.replace(**{switch: AWAY[switch] for switch in TOGETHER})
    assert spec.switches() == {switch: AWAY[switch] for switch in TOGETHER}
    assert spec.name == f"{plain.name}.parametrization=mup+mup_base_width=16"
    assert spec.axes_name == plain.axes_name and zoo.spec(spec.name, **SIZES) == spec
    for switch in TOGETHER:
        with pytest.raises(zoo.ConfigError, match="mup"):
            plain.replace(**{switch: AWAY[switch]})


@pytest.mark.parametrize("switch", [switch for switch in SWITCHES if switch not in TOGETHER])
def test_a_switch_away_from_its_default_shows_in_the_name_and_comes_back(switch):
    plain = zoo.spec(PLAIN.get(switch, "post.sinusoidal.fused.relu"), **SIZES, **NEEDS.get(switch, {}))
    spec = plain.replace(**{switch: AWAY[switch]})
    assert spec.switches() == {**NEEDS.get(switch, {}), switch: AWAY[switch]}
    shown = f"{switch}={zoo.specs.choices.value_text(AWAY[switch])}"
    assert spec.name == (f"{plain.name}+{shown}" if NEEDS.get(switch) else f"{plain.name}.{shown}") != plain.name
    assert spec.axes_name == plain.axes_name, "a run folder's stem stays the axes' name"
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
    assert (spec.attn.softcap, spec.attn.qk_norm, spec.attn.window, spec.name) == (50.0, "rmsnorm", 128, name)
    assert zoo.spec("pre.rope.sdpa.swiglu.rmsnorm.window=128+qk_norm=rmsnorm+attn_softcap=50.0", **SIZES).name == name
    with pytest.raises(zoo.ConfigError, match="gives the switch window twice"):
        zoo.spec("pre.rope.sdpa.swiglu.window=8+window=16", **SIZES)
    with pytest.raises(zoo.ConfigError, match=r"unknown field 'windw' \(did you mean 'window'\?\)"):
        zoo.spec("pre.rope.sdpa.swiglu.windw=8", **SIZES)


def test_two_presets_that_differ_beyond_their_axes_have_different_names():
    names = {preset: zoo.spec(preset, vocab_size=100).name for preset in zoo.list_variants()}
    assert names["pre-ln"] == "pre.sinusoidal.fused.relu", "pre's own final norm is no switch"
    assert names["torch-transformer"] == "post.sinusoidal.fused.relu.final_norm=true" != names["vaswani2017"]
    aliases = {preset for preset in names if not zoo.specs.catalog._presets()[preset]["fields"]}
    assert aliases == {"mt5"} and names["mt5"] == names["t5-v1_1"], "mT5 is T5 1.1's architecture under its name"
    assert len({names[p] for p in names if p not in aliases}) == len(names) - len(aliases), "no others share a name"
    axes = [zoo.spec(preset, vocab_size=100).axes_name for preset in ("torch-transformer", "vaswani2017")]
    assert axes[0] == axes[1], "as they did when names held the axes alone"


@pytest.mark.parametrize("preset", zoo.list_variants())
def test_a_spec_stored_flat_before_the_groups_reads_as_the_same_spec(preset):
    """Checkpoints, save_pretrained folders and W&B configs written before the groups hold flat keys."""
    spec = zoo.spec(preset, vocab_size=100)
    stored = flat_fields(spec.model_dump(mode="json"))
    assert not GROUPS.keys() & stored.keys() and zoo.ModelSpec.model_validate(stored) == spec


def test_an_old_flat_folder_of_a_model_with_switches_loads(tmp_path):
    model = zoo.build(zoo.spec("pre-ln", **SIZES, n_decoder_layers=1, n_encoder_layers=1, window=3, qk_norm="l2",
                               tie_embeddings=True, logit_softcap=20.0), seed=0)
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["spec"] = flat_fields(config["spec"])  # as save_pretrained wrote it before the groups
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = zoo.from_pretrained(tmp_path)
    assert loaded.spec == model.spec and "logit_softcap" in config["spec"]
    ids = torch.tensor([[3, 4, 5, 6]])
    torch.testing.assert_close(loaded.eval()(ids, ids), model.eval()(ids, ids), rtol=0, atol=0)


def test_flat_keys_are_upgraded_where_fields_enter_the_catalog(monkeypatch):
    """A preset, a mapping, overrides and a spec resolved again each take old flat keys once, where
    they enter; the catalog merges grouped fields only."""
    from zoo.specs import catalog

    monkeypatch.setattr(catalog, "_PRESETS", dict(catalog._presets()))
    catalog.register_preset("flat-windowed", {"window": 8, "tie_embeddings": True}, base="pre-ln")
    grouped = zoo.spec("pre-ln", **SIZES, attn={"window": 8}, embeddings={"tie": True})
    assert zoo.spec("flat-windowed", **SIZES) == grouped
    assert zoo.resolve({"preset": "pre-ln", "window": 8, **SIZES}, tie_embeddings=True) == grouped
    assert zoo.resolve(zoo.spec("pre-ln", **SIZES), window=8, embeddings={"tie": True}) == grouped
    assert catalog.merge_fields({"attn": {"window": 8}}, {"attn": {"qk_norm": "rmsnorm"}}) == {
        "attn": {"window": 8, "qk_norm": "rmsnorm"}}
    with pytest.raises(zoo.ConfigError, match=r"preset 'twice': window 8 and attn.window 16 are one switch given twice"):
        catalog.register_preset("twice", {"window": 8, "attn": {"window": 16}})
