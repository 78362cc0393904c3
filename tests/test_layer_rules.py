"""Per-layer patterns (zoo.specs.layer_rules): a rule changes exactly the layers it selects, in the
spec, the built model, its parameter count and its name; the grid's `alternate` pattern
(tests/conftest.py) meets every other axis in the invariants of test_variants.py."""

import random
import re

import pytest
import torch
from conftest import TINY, padded_batch
from invariants import away_from_init

import zoo
from zoo.errors import ConfigError
from zoo.model.size_checks import exact_parameters
from zoo.specs.experiment import with_sets
from zoo.specs.layer_rules import LayerRule, distinct_layers, layer_fields

LM = "decoder.pre.rope.fused.swiglu"
GLOBAL_EVERY_2 = {"global": {"every": 2, "set": {"window": None}}}


def lm(**fields):
    return zoo.spec(LM, **{**TINY, "n_decoder_layers": 4, **fields})


def stack_of(model):
    return model.decoder if model.spec.kind == "decoder" else model.encoder


def test_a_rule_selects_by_period_offset_or_index():
    rule = LayerRule(every=3, set={"window": 2})
    assert [i for i in range(9) if rule.selects("decoder", i)] == [2, 5, 8], "the last layer of each period"
    assert [i for i in range(9) if LayerRule(every=3, at=0, set={"window": 2}).selects("encoder", i)] == [0, 3, 6]
    assert [i for i in range(9) if LayerRule(only=[0, 4], set={"window": 2}).selects("decoder", i)] == [0, 4]
    assert not LayerRule(stack="encoder", set={"window": 2}).selects("decoder", 0)


def test_each_layer_is_built_from_its_own_spec():
    spec = lm(window=3, layers={"global": {"every": 2, "set": {"window": None, "position": {"base": 1e6}}}})
    layers = stack_of(zoo.build(spec)).layers
    assert [layer.self_attn.window for layer in layers] == [3, None, 3, None]
    assert [hasattr(layer, "position") for layer in layers] == [False, True, False, True]
    assert layers[1].position.base == 1e6 and spec.at_layer("decoder", 0) is spec


def test_a_later_rule_wins_where_two_select_one_layer():
    spec = lm(layers={"wide": {"every": 2, "set": {"d_ff": 48}}, "narrow": {"only": [3], "set": {"d_ff": 8}}})
    assert [spec.at_layer("decoder", i).ffn_width for i in range(4)] == [32, 48, 32, 8]


def test_a_rule_that_changes_nothing_keeps_the_function():
    """A rule whose settings equal the spec's, or that selects no layer, builds the same model."""
    plain = away_from_init(zoo.build(lm(window=3), seed=1)).eval()
    tokens = torch.cat([torch.ones(2, 1, dtype=torch.long), padded_batch([11, 8], 19, seed=2)], dim=1)
    for layers in ({"same": {"every": 2, "set": {"window": 3, "position": {"base": 10000.0}}}},
                   {"none": {"every": 9, "set": {"window": None}}}):
        ruled = zoo.build(lm(window=3, layers=layers), seed=1).eval()
        ruled.load_state_dict(plain.state_dict(), strict=False)
        torch.testing.assert_close(ruled(tokens), plain(tokens), rtol=0, atol=0)


@pytest.mark.parametrize("only, said", [([7], "[7]: past the last layer, 3"), ([], "[]: no layer")])
def test_a_rule_whose_indices_select_no_layer_is_refused(only, said):
    """`only: [7]` on 4 layers is a typo, not a design: it would change the name, never the model."""
    with pytest.raises(zoo.ConfigError, match=re.escape(f"layers.r.only: {said}; the rule would change the model's name")):
        lm(layers={"r": {"only": only, "set": {"window": 2}}})


@pytest.mark.parametrize("every, reaches", [(1, True), (2, True), (5, False)])
def test_only_a_global_layer_lets_the_first_token_reach_the_last(every, reaches):
    """Four layers with a window of 2 see 4 positions back; a global layer sees the whole row. The
    gradient of the last position's logits with respect to the first token's embedding says which."""
    model = zoo.build(lm(window=2, dropout=0.0, layers={"global": {"every": every, "set": {"window": None}}}), seed=0)
    embeddings = model.decoder.embed.tokens
    tokens = torch.arange(3, 15)[None]
    embedded = embeddings(tokens).detach().requires_grad_()
    embeddings.register_forward_hook(lambda _module, _inputs, _output: embedded)
    model(tokens)[0, -1].sum().backward()
    assert (embedded.grad[0, 0].abs().sum() > 0) == reaches


def test_per_layer_rope_bases_rotate_as_their_layers_say():
    spec = lm(layers={"global": {"every": 2, "set": {"position": {"base": 1e6}}}})
    model = zoo.build(spec, seed=0).eval()
    tokens = padded_batch([9], 19, seed=3)
    by_hand = zoo.build(lm(position={"name": "rope", "base": 1e6}), seed=0).eval()
    by_hand.load_state_dict(model.state_dict(), strict=False)
    assert not torch.allclose(model(tokens), by_hand(tokens)), "the local layers keep the spec's base"
    for layer in by_hand.decoder.layers[::2]:
        layer.position = zoo.build(lm(), seed=0).decoder.embed.position
    by_hand.decoder.schemes.extend(layer.position for layer in by_hand.decoder.layers[::2])
    torch.testing.assert_close(model(tokens), by_hand(tokens), rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ["decoder", "encoder", "encoder_decoder"])
def test_the_parameter_count_follows_each_layer(kind):
    spec = zoo.spec(f"{kind}.pre.t5.fused.gelu" if kind != "encoder_decoder" else "pre.t5.fused.gelu",
                    **{**TINY, "n_encoder_layers": 3, "n_decoder_layers": 5},
                    layers={"wide": {"every": 2, "set": {"d_ff": 64}},
                            "own_buckets": {"only": [0], "stack": "decoder", "set": {"position": {"num_buckets": 8}}}})
    model = zoo.build(spec)
    assert exact_parameters(spec) == sum(t.numel() for t in (*model.parameters(), *model.buffers()))


def test_layer_groups_count_every_layer_once():
    rng = random.Random(0)
    for _ in range(200):
        rules = {f"r{i}": LayerRule(**({"only": rng.sample(range(12), rng.randint(1, 3))} if rng.random() < 0.3 else
                                        {"every": (every := rng.randint(1, 5)), "at": rng.randint(0, every - 1)}),
                                    set={"window": 2})
                 for i in range(rng.randint(0, 3))}
        depth = rng.randint(1, 30)
        groups = distinct_layers(rules, "decoder", depth)
        selection = {i: tuple(n for n, r in rules.items() if r.selects("decoder", i)) for i in range(depth)}
        assert sum(groups.values()) == depth
        assert sorted(groups.values()) == sorted(
            sum(1 for i in range(depth) if selection[i] == key) for key in set(selection.values()))
        assert len({selection[i] for i in groups}) == len(groups), "one representative per group"


def test_a_deep_pattern_counts_as_fast_as_one_period():
    spec = zoo.spec(LM, vocab_size=100, d_model=8, n_heads=2, d_ff=16, n_decoder_layers=10**6, max_len=8,
                    window=2, layers={"global": {"every": 6, "set": {"window": None, "d_ff": 24}}})
    wider = 3 * 8 * 8 + 2 * 8  # each global layer's three matrices and two biases, 8 wider
    assert exact_parameters(spec, buffers=False) - exact_parameters(spec.replace(layers={}), buffers=False) == (
        10**6 // 6 * wider)


def test_the_name_and_the_files_hold_the_rules():
    spec = lm(window=3, layers=GLOBAL_EVERY_2)
    assert spec.name.endswith('window=3+layers={"global":{"every":2,"set":{"window":null}}}')
    assert zoo.spec(spec.name, **{**TINY, "n_decoder_layers": 4}) == spec
    assert zoo.ModelSpec.model_validate_json(spec.model_dump_json()) == spec
    assert "layers" not in lm().name, "no rules, no part in the name"


def test_a_switch_by_flat_key_or_in_attn_is_one_rule_held_grouped_and_written_flat():
    from zoo.specs.identity import fingerprint

    grouped = {"global": {"every": 2, "set": {"attn": {"window": None}}}}
    assert lm(window=3, layers=GLOBAL_EVERY_2) == lm(window=3, layers=grouped)
    rule = lm(window=3, layers=grouped).layers["global"]
    assert rule.set == {"attn": {"window": None}}, "upgraded once, where the rule entered"
    assert rule.model_dump()["set"] == {"window": None}, "written as the first rules were: their names stay"
    runs = [zoo.ExperimentSpec(model={"preset": "vaswani2017", "window": 3, "layers": layers}) for layers in
            (GLOBAL_EVERY_2, grouped)]
    assert fingerprint(runs[0]) == fingerprint(runs[1])
    with pytest.raises(ConfigError, match=r"window 8 and attn\.window 16 are one switch given twice"):
        LayerRule(set={"window": 8, "attn": {"window": 16}})


def test_a_sweep_reaches_a_rule_by_dotted_key():
    data = with_sets({"model": {"layers": GLOBAL_EVERY_2}}, ["model.layers.global.every=6"])
    assert data["model"]["layers"]["global"] == {"every": 6, "set": {"window": None}}


def test_a_layer_spec_is_validated_once_per_kind_of_layer_and_kept(monkeypatch):
    """26 layers of two kinds: two layer specs, each validated once however often it is asked for,
    and each the spec that the rules give (a fresh validation of the same fields)."""
    spec = zoo.spec("decoder.pre.rope.fused.swiglu", vocab_size=100, d_model=32, n_heads=2, n_decoder_layers=26,
                    window=8, layers={"full": {"every": 2, "set": {"window": None}}})
    validations = []
    real = type(spec).model_validate.__func__
    monkeypatch.setattr(type(spec), "model_validate", classmethod(lambda cls, data, **kw: validations.append(1)
                                                                  or real(cls, data, **kw)))
    layers = [spec.at_layer("decoder", i) for _ in range(3) for i in range(26)]
    assert len({id(layer) for layer in layers}) == 2 and len(validations) == 1, "the windowed layers are the spec itself"
    assert [layer.attn.window for layer in layers[:4]] == [8, None, 8, None]
    monkeypatch.undo()
    fresh = type(spec).model_validate(layer_fields(spec.model_dump(), spec.layers, "decoder", 1))
    assert spec.at_layer("decoder", 1) == fresh and spec.at_layer("encoder", 1) is spec.at_layer("encoder", 3)


def test_a_typo_in_a_rule_s_dotted_name_gets_the_rule_it_meant():
    """`model.layers.globl.every` made a new rule without settings, refused as pydantic's "Field
    required"; it names the model's rule the key meant, and what a new rule needs."""
    data = with_sets({"model": {"layers": GLOBAL_EVERY_2, "window": 4}, "task": {"name": "reverse"}},
                     ["model.layers.globl.every=6"])
    with pytest.raises(ConfigError, match=re.escape("model: layers: globl: a rule without `set` (the settings it gives "
                                                    "its layers); did you mean the rule 'global'? a new rule needs set: "
                                                    "{KEY: VALUE}, KEY one of norm, position")):
        zoo.specs.experiment.validate_experiment(data)
    with pytest.raises(ConfigError, match=re.escape("layers: first: a rule without `set` (the settings it gives its "
                                                    "layers); the model's rules are global; a new rule needs set")):
        lm(layers={**GLOBAL_EVERY_2, "first": {"only": [0]}})


def test_modern_bert_s_first_layer_reads_the_stream_without_its_attention_norm():
    spec = zoo.spec("encoder.pre.rope.fused.gelu", **{**TINY, "n_encoder_layers": 3},
                    layers={"first": {"only": [0], "set": {"norm": {"attention_norm": False}}}})
    layers = zoo.build(spec).encoder.layers
    assert [type(layer.self_attn_residual.norm).__name__ for layer in layers] == ["Identity", "LayerNorm", "LayerNorm"]
    assert all(type(layer.ffn_residual.norm).__name__ == "LayerNorm" for layer in layers)


@pytest.mark.parametrize("layers, message", [
    ({"g": {"every": 2, "set": {"d_model": 8}}}, "layers.g: set: 'd_model' is not a setting a layer may change; "
                                                 "choices: norm, position"),
    ({"g": {"every": 2, "at": 2, "set": {"window": 2}}}, "layers.g: at 2 is outside a period of every 2 (0..1)"),
    ({"g": {"only": [1], "every": 2, "set": {"window": 2}}}, "by `only` or by `every`/`at`, not both"),
    ({"g": {"every": 2, "set": {"ffn": "swiglo"}}}, "layers.g.set: ffn: unknown ffn 'swiglo'; did you mean 'swiglu'?"),
    ({"g": {"every": 2, "set": {}}}, "layers.g: set: a rule sets at least one of norm"),
    ({"a b": {"set": {"window": 2}}}, "a rule's name is a word of letters, digits and _"),
    ({"g": {"every": 2, "set": {"d_ff": 0}}}, "layers.g.set: d_ff: Input should be greater than 0 or 'auto'"),
])
def test_a_bad_rule_names_the_rule_the_field_and_the_choices(layers, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        lm(layers=layers)


def test_rules_beside_shared_layers_or_on_embedded_positions_are_refused():
    with pytest.raises(ConfigError, match="share_layers applies one layer's weights at every depth"):
        lm(share_layers=True, layers=GLOBAL_EVERY_2)
    spec = zoo.spec("decoder.pre.learned.fused.relu", **TINY, layers={"g": {"every": 2, "set": {"position": "rope"}}})
    with pytest.raises(ConfigError, match="learned -> rope at layer 1: a layer may change only a scheme that acts "
                                          "inside attention"):
        zoo.build(spec)


def test_every_key_a_rule_may_set_changes_a_layer():
    """Each of LAYER_KEYS, set by a rule, makes the selected layer differ from the others."""
    changes = {"norm": "post", "position": {"base": 500.0}, "attention": "per_head", "ffn": "gelu",
               "norm_type": "rmsnorm", "d_ff": 8, "n_kv_heads": 1, "head_width": 2, "scale_scores": False,
               "attn_softcap": 5.0, "qk_norm": "rmsnorm", "window": 2, "attn": {"window": 3},
               "qk_norm_scope": "projection", "qkv_bias": False, "out_bias": False, "scale_width": 9.0}
    from zoo.specs.layer_rules import LAYER_KEYS

    assert set(changes) == set(LAYER_KEYS)
    tokens = padded_batch([9], 19, seed=1)
    plain = zoo.build(lm(), seed=0).eval()
    for key, value in changes.items():
        needs = {"qk_norm": "rmsnorm"} if key == "qk_norm_scope" else {}  # a scope of a qk-norm that is there
        spec = lm(layers={"one": {"only": [1], "set": {**needs, key: value}}})
        model = away_from_init(zoo.build(spec, seed=0)).eval()
        assert spec.at_layer("decoder", 0) is spec and spec.at_layer("decoder", 1) != lm(), key
        state, shapes = model.state_dict(), {name: t.shape for name, t in plain.state_dict().items()}
        if {name: t.shape for name, t in state.items()} != shapes:
            continue  # the layer's weights differ in shape: a change no function can hide
        plain.load_state_dict(state)
        assert not torch.allclose(model(tokens), plain(tokens)), key
