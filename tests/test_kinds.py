"""The model's kind: names, building, what each kind ignores, shared initial weights, decoding."""

import itertools

import pytest
import torch
from conftest import AXIS_VALUES, GRID, PAIRWISE, SEED_AXES, TINY, padded_batch

import zoo
from zoo.model.canonical import canonical_state
from zoo.model.size_checks import exact_parameters
from zoo.specs.registries import kinds

CLASSES = {"encoder_decoder": zoo.EncoderDecoder, "decoder": zoo.DecoderOnly, "encoder": zoo.EncoderOnly}


@pytest.mark.parametrize("kind", kinds())
def test_the_kind_is_in_the_name_unless_it_is_the_default_and_builds_its_class(kind):
    spec = zoo.spec("pre.rope.sdpa.swiglu", kind=kind, **TINY)
    assert spec.axes_name == ("pre.rope.sdpa.swiglu" if kind == "encoder_decoder" else f"{kind}.pre.rope.sdpa.swiglu")
    assert zoo.spec(spec.name, **TINY) == spec
    model = zoo.build(spec, seed=0)
    assert type(model) is CLASSES[kind] and model.kind == kind
    assert model.num_parameters() == exact_parameters(spec, buffers=False)


@pytest.mark.parametrize("kind, unused", [("decoder", "n_encoder_layers"), ("encoder", "n_decoder_layers")])
def test_a_kind_ignores_the_layer_count_of_the_stack_it_lacks(kind, unused):
    small, large = (zoo.build(f"{kind}.pre.sinusoidal.fused.relu", seed=0, **{**TINY, unused: n}) for n in (1, 5))
    assert small.num_parameters() == large.num_parameters()
    assert all(torch.equal(a, b) for a, b in zip(small.state_dict().values(), large.state_dict().values(), strict=True))


def test_kinds_that_share_a_parameter_share_its_initial_value():
    """Stacks keep their names across kinds, so one seed draws one initial value for each."""
    pair = canonical_state(zoo.build("pre.sinusoidal.fused.relu", seed=3, **TINY))
    language = canonical_state(zoo.build("decoder.pre.sinusoidal.fused.relu", seed=3, **TINY))
    masked = canonical_state(zoo.build("encoder.pre.sinusoidal.fused.relu", seed=3, **TINY))
    shared = [name for name in language if name in pair] + [name for name in masked if name in pair]
    assert len(shared) > 20
    for name, tensor in [*language.items(), *masked.items()]:
        if name in pair:
            assert torch.equal(tensor, pair[name]), name
    assert not any("cross_attn" in name for name in language)


def test_mistakes_in_the_kind_name_the_field_and_the_choices():
    with pytest.raises(zoo.ConfigError, match=r"kind: unknown kind 'decoder_only'; did you mean 'decoder'\? "
                                              r"choices: decoder, encoder, encoder_decoder"):
        zoo.spec("pre.sinusoidal.fused.relu", kind="decoder_only", **TINY)
    with pytest.raises(ValueError, match=r"a model of kind decoder has one vocabulary: src_vocab_size 19 and "
                                              r"tgt_vocab_size 30 differ; give vocab_size"):
        zoo.ModelSpec(kind="decoder", src_vocab_size=19, tgt_vocab_size=30)
    with pytest.raises(zoo.ConfigError, match="share_embeddings shares the encoder's and the decoder's tables"):
        zoo.spec("encoder.pre.sinusoidal.fused.relu", share_embeddings=True, **TINY)
    with pytest.raises(ValueError, match="ffn name 'decoder' is reserved"):
        zoo.registry("ffn").register("decoder")


def test_an_encoder_does_not_decode_and_a_decoder_returns_prompt_then_continuation():
    encoder = zoo.build("encoder.pre.sinusoidal.fused.relu", seed=0, **TINY)
    prompt = padded_batch([5, 2], 19, seed=1)
    with pytest.raises(zoo.ConfigError, match="a model of kind encoder does not decode"):
        encoder.generate(prompt, max_new_tokens=3)
    decoder = zoo.build("decoder.pre.sinusoidal.fused.relu", seed=0, **TINY).eval()
    out = decoder.generate(prompt, max_new_tokens=3)
    assert torch.equal(out[0, :5], prompt[0]) and torch.equal(out[1, :2], prompt[1, :2])
    assert out.size(1) <= 5 + 3 and (out[1, 2:5] != 0).any(), "the short prompt's continuation follows it at once"
    assert decoder.generate(prompt[:0], max_new_tokens=3).shape == (0, 5)


def test_the_grid_covers_every_pair_of_values_and_the_seed_axes_in_full():
    axes = list(AXIS_VALUES)
    for a, b in itertools.combinations(axes, 2):
        met = {(row[a], row[b]) for row in PAIRWISE}
        assert met == set(itertools.product(AXIS_VALUES[a], AXIS_VALUES[b])), (a, b)
    for kind, combo in itertools.product(kinds(), itertools.product(*SEED_AXES.values())):
        name = ".".join(combo) if kind == "encoder_decoder" else ".".join((kind, *combo))
        assert name in GRID
    assert len(GRID) < 2 * (len(PAIRWISE) + 3 * 16), "the grid grows with pairs, not with the product"


def test_a_decoder_only_prompt_shares_max_len_with_its_continuation():
    """Learned positions hold max_len positions: the prompt's and the new tokens' together."""
    model = zoo.build("decoder.pre.learned.fused.relu", seed=0, **{**TINY, "max_len": 12}).eval()
    prompt = padded_batch([8, 3], 19, seed=2)
    assert model.generate(prompt).size(1) <= 12, "by default, as many new tokens as fit"
    assert model.generate(prompt, max_new_tokens=4).size(1) <= 12
    with pytest.raises(ValueError, match="a sequence of 13 positions is longer than max_len 12"):
        model.generate(prompt, max_new_tokens=5)
