"""convert: the same weights under a weight-compatible spec change."""

import pytest
import torch
from conftest import padded_batch, tiny

import zoo
from zoo.model.canonical import canonical_state
from zoo.specs.registries import kinds


def trained_like(name: str, scale: float = 0.05, **overrides) -> zoo.EncoderDecoder:
    """A model whose weights are far from any initialization, so equal outputs prove a real copy
    (convert's target is also built from another seed than the source)."""
    model = zoo.build(tiny(name, **overrides), seed=5)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(scale * torch.randn(param.shape, generator=gen))
    return model.eval()


ATTENTIONS = zoo.registry("attention").names()
LAYOUTS = [(source, target, position, kv) for source in ATTENTIONS for target in ATTENTIONS if source != target
           for position in zoo.registry("position").names() for kv in (None, 2, 1)]


@pytest.mark.parametrize("source, target, position, n_kv_heads", LAYOUTS)
def test_attention_layouts_convert_exactly(source, target, position, n_kv_heads):
    """Every pair of attention layouts, under every position scheme (which rotate or bias inside
    attention) and with full, grouped and multi-query key/value heads."""
    name = f"pre.{position}.{source}.relu"
    model = trained_like(name, scale=0.0, n_kv_heads=n_kv_heads)
    converted = zoo.convert(model, attention=target)
    assert converted.spec == model.spec.model_copy(update={"attention": converted.spec.attention})
    assert converted.spec.attention == target
    src, tgt = padded_batch([7, 3, 5], 19, seed=1), padded_batch([6, 4, 2], 19, seed=2)
    with torch.no_grad():
        torch.testing.assert_close(converted(src, tgt), model(src, tgt), atol=1e-5, rtol=1e-5)
    # In float64 and far from initialization the two layouts agree to rounding: the same function.
    model64 = trained_like(name, scale=0.3, n_kv_heads=n_kv_heads).double()
    with torch.no_grad():
        torch.testing.assert_close(zoo.convert(model64, attention=target)(src, tgt), model64(src, tgt), atol=1e-10, rtol=0)
    back = canonical_state(zoo.convert(converted, attention=source))
    for key, tensor in canonical_state(model).items():
        assert torch.equal(back[key], tensor), key


def test_weight_compatible_function_changes_keep_every_weight():
    model = trained_like("post.sinusoidal.fused.relu")
    converted = zoo.convert(model, norm="res_post", ffn="gelu", position="none", dropout=0.3)
    assert converted.spec.name == "res_post.none.fused.gelu.n_kv_heads=2" and converted.spec.dropout == 0.3
    after = canonical_state(converted)
    assert after.keys() == canonical_state(model).keys()
    assert all(torch.equal(after[k], v) for k, v in canonical_state(model).items())


def test_pre_norm_needs_its_final_norm():
    model = trained_like("post.sinusoidal.fused.relu")
    with pytest.raises(zoo.ConfigError, match=r"encoder\.norm\.bias has no weight in the original model"):
        zoo.convert(model, norm="pre")


@pytest.mark.parametrize(
    "changes, text",
    [
        ({"d_model": 32}, "d_model 16 -> 32"),
        ({"position": "learned"}, "has no weight in the original model"),
        ({"vocab_size": 25}, "changes shape"),
        ({"n_decoder_layers": 1}, "is missing from the new model"),
        ({"tie_embeddings": True}, "tying or untying embeddings (tie_embeddings)"),
        ({"share_embeddings": True}, "tying or untying embeddings (share_embeddings)"),
        ({"n_kv_heads": 1}, "changes shape"),
        ({"embedding_norm": True}, "has no weight in the original model"),
    ],
)
def test_incompatible_changes_say_why(changes, text):
    model = trained_like("post.sinusoidal.fused.relu")
    with pytest.raises(zoo.ConfigError, match="cannot convert") as err:
        zoo.convert(model, **changes)
    assert text in str(err.value)


def test_learned_positions_cannot_be_dropped():
    with pytest.raises(zoo.ConfigError, match=r"position 'learned' -> 'sinusoidal'.*missing from the new model"):
        zoo.convert(trained_like("post.learned.fused.relu"), position="sinusoidal")


def test_convert_keeps_dtype_and_mode():
    model = trained_like("pre.learned.per_head.gelu").double().train()
    converted = zoo.convert(model, attention="fused")
    assert converted.training and next(converted.parameters()).dtype == torch.float64
    with pytest.raises(zoo.ConfigError, match="unknown attention 'fussed'; did you mean 'fused'"):
        zoo.convert(model, attention="fussed")


OTHER_PARTS = [(axis, name) for axis in zoo.AXES if axis not in ("attention", "position")
               for name in zoo.registry(axis).names()]


@pytest.mark.parametrize("axis, part", OTHER_PARTS, ids=[f"{a}={p}" for a, p in OTHER_PARTS])
def test_every_part_converts_exactly_between_attention_layouts(axis, part):
    """Placements, feed-forwards (the experts of an MoE) and norm types keep their weights through
    a change of layout, in every kind, from weights away from their initial values."""
    for kind in ("encoder_decoder", "decoder"):
        model = trained_like("pre.sinusoidal.fused.relu", scale=0.1, kind=kind, **{axis: part})
        src, tgt = padded_batch([7, 3], 19, seed=1), padded_batch([6, 4], 19, seed=2)
        inputs = (src, tgt) if kind == "encoder_decoder" else (tgt,)
        for target in ("per_head", "sdpa"):
            with torch.no_grad():
                torch.testing.assert_close(zoo.convert(model, attention=target)(*inputs), model(*inputs),
                                           atol=1e-5, rtol=1e-5, msg=f"{kind} {target}")


@pytest.mark.parametrize("kind", list(kinds()))
def test_a_conversion_that_changes_the_function_says_so_and_one_that_keeps_it_is_silent(kind, recwarn):
    """ALiBi -> RoPE or relu -> gelu keep every weight and change what the model computes; a new
    user exported such a model with to_hf unaware. per_head -> fused keeps the function: no word."""
    model = trained_like("post.sinusoidal.per_head.relu", kind=kind)
    zoo.convert(model, attention="fused")
    assert not [w for w in recwarn if "changes the model's function" in str(w.message)]
    with pytest.warns(UserWarning, match=r"convert \(ffn 'relu' -> 'gelu'\) keeps every weight but changes the model's "
                                         r"function: its logits move by up to \S+ on a probe batch"):
        zoo.convert(model, ffn="gelu")


def test_a_part_that_adds_only_biases_names_the_setting_that_converts():
    """Llama's norms have no bias; LayerNorm by name has one: the refusal says how to convert."""
    model = trained_like("pre.rope.fused.swiglu", kind="decoder", bias=False, norm_type="rmsnorm")
    with pytest.raises(zoo.ConfigError, match=r"the added weights are biases the model lacks: "
                                               r"norm_type=\{'name': 'layernorm', 'bias': False\} converts without them"):
        zoo.convert(model, norm_type="layernorm")
    with pytest.warns(UserWarning, match="changes the model's function"):
        converted = zoo.convert(model, norm_type={"name": "layernorm", "bias": False})
    assert converted.spec.norm_type.name == "layernorm"
