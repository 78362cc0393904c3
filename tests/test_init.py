"""Initialization: reproducible, and identical across variants wherever they share a parameter."""

import itertools

import pytest
import torch
from conftest import TINY, padded_batch

import zoo
from zoo.model.assembly import stack_sites
from zoo.model.canonical import canonical_entries, canonical_state
from zoo.model.init import placements
from zoo.model.zoo_model import init_gain

PAIRS = [
    (axis, a, b)
    for axis in zoo.AXES
    for a, b in itertools.combinations(zoo.registry(axis).names(), 2)
]

OWN = {"norm": "_residual.", "position": ".position.", "attention": "_attn.", "ffn": ".ffn.", "norm_type": "norm."}
"""Where each axis's own parameters sit, which two of its parts need not share (an MoE's experts)."""


def draw_gains(model) -> dict[str, float]:
    """The gain each canonical weight was drawn with: its role's, in its stack (zoo.roles)."""
    entries = list(canonical_entries(model))
    placed = placements(model, entries, stack_sites(model.spec))
    return {name: init_gain(model.spec, p.role, p.site) for name, p in placed.items()}


@pytest.mark.parametrize("axis, a, b", PAIRS, ids=[f"{axis}:{a}-{b}" for axis, a, b in PAIRS])
def test_variants_share_initial_values_of_shared_parameters(axis, a, b):
    """Equal wherever both have a parameter, up to the gain a norm placement gives a draw (DeepNorm's
    beta; Fixup's 0 and L^-1/2); every matrix of the one with fewer is drawn by the other too."""
    base = zoo.spec("vaswani2017", **TINY)
    left_spec, right_spec = (zoo.resolve(base, **{axis: value}) for value in (a, b))
    left_model, right_model = (zoo.build(spec, seed=7) for spec in (left_spec, right_spec))
    left, right = canonical_state(left_model), canonical_state(right_model)
    gains_of = [draw_gains(model) for model in (left_model, right_model)]
    shared = left.keys() & right.keys()
    fewer, own = min(left, right, key=len), OWN[axis]
    assert {name for name, tensor in fewer.items() if tensor.dim() >= 2 and own not in name} <= shared
    for name in (name for name in shared if left[name].shape == right[name].shape):  # else each part's own
        gains = [gains_of[0][name], gains_of[1][name]]
        if 0.0 in gains:  # drawn as zeros
            assert not (left, right)[gains.index(0.0)][name].any(), name
            continue
        torch.testing.assert_close(left[name] / gains[0], right[name] / gains[1], atol=0, rtol=1e-6, msg=name)


@pytest.mark.parametrize("attention", zoo.registry("attention").names())
def test_attention_variants_start_as_the_same_function(attention):
    src, tgt = padded_batch([6, 4], 19, seed=1), padded_batch([5, 3], 19, seed=2)
    reference = zoo.build("post.sinusoidal.fused.relu", seed=3, **TINY).eval()
    model = zoo.build(f"post.sinusoidal.{attention}.relu", seed=3, **TINY).eval()
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), reference(src, tgt), atol=1e-5, rtol=0)


def test_manual_seed_reproduces_and_costs_one_draw_for_any_variant():
    """Every part once (a draw is the model's, not a combination's)."""
    states = []
    for axis, part in ((a, p) for a in zoo.AXES for p in zoo.registry(a).names()):
        name = zoo.spec("post.sinusoidal.fused.relu", **TINY, **{axis: part}).name
        torch.manual_seed(11)
        first = canonical_state(zoo.build(name, **TINY))
        states.append(torch.get_rng_state())
        torch.manual_seed(11)
        second = canonical_state(zoo.build(name, **TINY))
        assert all(torch.equal(first[k], second[k]) for k in first), name
    assert all(torch.equal(state, states[0]) for state in states)
    torch.manual_seed(11)
    torch.randint(0, 2**62, (), dtype=torch.int64)
    assert torch.equal(torch.get_rng_state(), states[0])


def test_seeds_differ_and_embeddings_tie():
    one, two = zoo.build("vaswani2017", seed=1, **TINY), zoo.build("vaswani2017", seed=2, **TINY)
    assert not torch.equal(one.encoder.embed.tokens.weight, two.encoder.embed.tokens.weight)
    tied = zoo.build("vaswani2017", seed=1, **{**TINY, "tie_embeddings": True})
    assert tied.generator.weight is tied.decoder.embed.tokens.weight
    assert tied.num_parameters() == one.num_parameters() - TINY["vocab_size"] * TINY["d_model"]


def test_initial_scales():
    model = zoo.build("vaswani2017", vocab_size=4000, d_model=256, n_heads=4, n_encoder_layers=1, n_decoder_layers=1, seed=0)
    std = model.encoder.embed.tokens.weight.std().item()
    assert abs(std - 256**-0.5) < 0.05 * 256**-0.5  # scaled by sqrt(d) at use: unit variance
    unscaled = zoo.build(model.spec, scale_embeddings=False, seed=0)
    assert abs(unscaled.encoder.embed.tokens.weight.std().item() - 1.0) < 0.05
    for scaled in (True, False):  # GPT-2's 0.02, whether or not the table is scaled at use
        drawn = zoo.build(model.spec, scale_embeddings=scaled, embedding_init_std=0.02, seed=0)
        assert abs(drawn.encoder.embed.tokens.weight.std().item() - 0.02) < 0.05 * 0.02
    q = canonical_state(model)["encoder.layers.0.self_attn.q.weight"]
    bound = (6 / (256 + 256)) ** 0.5  # xavier uniform on the full d_model x d_model projection
    assert q.abs().max() <= bound and q.abs().max() > 0.95 * bound
    assert model.spec.d_ff == 1024 and torch.equal(model.encoder.layers[0].ffn.linear1.bias, torch.zeros(1024))
    assert torch.equal(model.encoder.layers[0].ffn_residual.norm.weight, torch.ones(256))
