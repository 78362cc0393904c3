"""The numbers that define the norm placements and norm types (the grid tests their invariants)."""

import re

import pytest
import torch
from conftest import TINY

import zoo
from zoo.parts import Site
from zoo.variants.norms import deepnorm_constants

BETA_SCALED = re.compile(r"^(encoder|decoder)\.layers\.\d+\.(ffn\.[\w.]+|(self|cross)_attn\.(v|out))\.weight$")
"""The weights DeepNet draws with gain beta, by the built-in parts' names: the feed-forward, value
and output projections (the test's own statement of the paper, against which the roles are held)."""


@pytest.mark.parametrize("layers, encoder, decoder", [
    ((6, 6), (1.417938, 0.496989), (2.059767, 0.343295)),
    ((12, 12), (1.760878, 0.400198), (2.449490, 0.288675)),  # decoder: sqrt(6) and 1 / sqrt(12)
])
def test_deepnorm_alpha_and_beta(layers, encoder, decoder):
    assert deepnorm_constants(Site(False, *layers)) == pytest.approx(encoder, abs=1e-6)
    assert deepnorm_constants(Site(True, *layers)) == pytest.approx(decoder, abs=1e-6)


@pytest.mark.parametrize("kind, site", [("decoder", Site(True, 0, 8)), ("encoder", Site(False, 8, 0))])
def test_deepnorm_of_one_stack_takes_the_papers_single_stack_formula(kind, site):
    """DeepNet's encoder-only and decoder-only constants: (2L)^(1/4) and (8L)^(-1/4); L = 8 gives
    alpha 2 and beta 2^(-3/2), and the model builds them from its kind and depth."""
    assert deepnorm_constants(site) == pytest.approx((2.0, 2**-1.5), abs=1e-12)
    model = zoo.build(f"{kind}.deepnorm.sinusoidal.fused.relu", seed=0, **{**TINY, "n_encoder_layers": 8,
                                                                          "n_decoder_layers": 8})
    assert getattr(model, kind).layers[5].ffn_residual.alpha == pytest.approx(2.0, abs=1e-12)
    post = zoo.model.canonical.canonical_state(zoo.build(f"{kind}.post.sinusoidal.fused.relu", seed=0,
                                                   **{**TINY, "n_encoder_layers": 8, "n_decoder_layers": 8}))
    scaled = [name for name in post if BETA_SCALED.match(name)]
    assert len(scaled) == 8 * 4
    for name, tensor in zoo.model.canonical.canonical_state(model).items():
        torch.testing.assert_close(tensor, (2**-1.5 if name in scaled else 1.0) * post[name], rtol=1e-6, atol=0, msg=name)


def test_deepnorm_scales_its_residual_and_the_initialization_of_the_right_weights():
    sizes = {**TINY, "d_model": 64, "d_ff": 128, "n_encoder_layers": 6, "n_decoder_layers": 6}
    deep = zoo.build("deepnorm.sinusoidal.fused.relu", seed=1, **sizes)
    post = zoo.build("post.sinusoidal.fused.relu", seed=1, **sizes)
    (alpha_e, beta_e), (alpha_d, beta_d) = deepnorm_constants(Site(False, 6, 6)), deepnorm_constants(Site(True, 6, 6))
    assert deep.encoder.layers[3].ffn_residual.alpha == alpha_e and deep.decoder.layers[0].cross_attn_residual.alpha == alpha_d
    scaled = {"encoder": beta_e, "decoder": beta_d}
    post_state = zoo.model.canonical.canonical_state(post)
    for name, tensor in zoo.model.canonical.canonical_state(deep).items():
        stack = name.split(".")[0]
        expected = scaled[stack] if BETA_SCALED.match(name) else 1.0
        torch.testing.assert_close(tensor, expected * post_state[name], rtol=1e-6, atol=0, msg=name)
    matched = [n for n in post_state if BETA_SCALED.match(n)]
    assert len(matched) == 6 * 4 + 6 * 6, "per layer: ffn linear1, linear2, v, out; the decoder's cross v and out too"

    x = torch.randn(2, 3, 64)
    residual = deep.encoder.layers[0].ffn_residual
    torch.testing.assert_close(residual(x, lambda h: 2 * h), residual.norm(alpha_e * x + 2 * x))


def test_sandwich_normalizes_both_sides_of_the_sublayer():
    model = zoo.build("sandwich.sinusoidal.fused.relu", seed=0, **TINY)
    residual = model.encoder.layers[0].ffn_residual
    with torch.no_grad():
        residual.out_norm.weight.mul_(3.0)  # tell the two norms apart
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(residual(x, torch.tanh), x + residual.out_norm(torch.tanh(residual.norm(x))))
    assert model.spec.uses_final_norm


def test_rmsnorm_and_scalenorm_formulas():
    x = torch.randn(4, 3, 16) * 5 + 1
    rms = zoo.build("pre.sinusoidal.fused.relu.rmsnorm", **TINY).encoder.norm
    torch.testing.assert_close(rms(x), x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt())
    scale = zoo.build("pre.sinusoidal.fused.relu.scalenorm", **TINY).encoder.norm
    assert scale.gain.item() == pytest.approx(16**0.5)
    torch.testing.assert_close(scale(x), 4.0 * x / x.norm(dim=-1, keepdim=True))
    assert torch.isfinite(scale(torch.zeros(1, 16))).all(), "the zero vector stays finite"


@pytest.mark.parametrize("norm_type", zoo.registry("norm_type").names())
def test_every_norm_of_the_model_has_the_chosen_type(norm_type):
    model = zoo.build("pre.sinusoidal.fused.relu", **{**TINY, "embedding_norm": True, "norm_type": norm_type})
    kind = zoo.registry("norm_type").get(norm_type)
    every_kind = (torch.nn.LayerNorm, torch.nn.RMSNorm, *(zoo.registry("norm_type").get(n) for n in zoo.registry("norm_type")))
    norms = [m for m in model.modules() if isinstance(m, every_kind)]
    # every placement (2 per encoder layer, 3 per decoder layer), two final norms, two embedding norms
    assert len(norms) == 2 * TINY["n_encoder_layers"] + 3 * TINY["n_decoder_layers"] + 2 + 2
    assert all(type(m) is kind for m in norms)


def test_a_norm_type_shows_in_the_name_only_when_not_the_default():
    assert zoo.spec("pre.learned.per_head.gelu", vocab_size=9, norm_type="layernorm").name == "pre.learned.per_head.gelu"
    rms = zoo.spec("pre.learned.per_head.gelu.rmsnorm", vocab_size=9)
    assert rms.norm_type == "rmsnorm" and rms.name == "pre.learned.per_head.gelu.rmsnorm"
    eps = zoo.spec("pre.learned.per_head.gelu", vocab_size=9, norm_type={"name": "layernorm", "eps": 1e-6})
    assert eps.name == "pre.learned.per_head.gelu.layernorm+eps=1e-06" and zoo.spec(eps.name, vocab_size=9) == eps
    with pytest.raises(zoo.ConfigError, match="'rmsnrm' in a canonical name names no later axis; choices: norm_type"):
        zoo.spec("pre.learned.per_head.gelu.rmsnrm", vocab_size=9)


def sublayer_pair(model):
    """The encoder's first block's two sublayer parts, and two functions to wrap."""
    block = model.encoder.layers[0]
    return block.self_attn_residual, block.ffn_residual, torch.tanh, torch.sin


@pytest.mark.parametrize("norm_type", ["layernorm", "rmsnorm"])
def test_rezero_starts_at_zero_and_scales_the_branch(norm_type):
    plain = zoo.build("rezero.sinusoidal.fused.relu", seed=0, **TINY)
    first, _, f, _ = sublayer_pair(plain)
    assert first.scale.item() == 0.0 and not plain.spec.uses_final_norm
    assert not any(isinstance(m, (torch.nn.LayerNorm, torch.nn.RMSNorm)) for m in plain.modules())
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(first(x, f), x, rtol=0, atol=0)
    with torch.no_grad():
        first.scale.fill_(0.3)
    torch.testing.assert_close(first(x, f), x + 0.3 * f(x))
    normed = zoo.build("rezero+norm=true.sinusoidal.fused.relu", seed=0, **{**TINY, "norm_type": norm_type})
    first, _, f, _ = sublayer_pair(normed)
    assert isinstance(first.norm, zoo.registry("norm_type").get(norm_type)) and normed.spec.uses_final_norm
    with torch.no_grad():
        first.scale.fill_(0.3)
    torch.testing.assert_close(first(x, f), x + 0.3 * f(first.norm(x)))


def test_layerscale_scales_each_channel_from_its_setting():
    model = zoo.build("layerscale+init=0.01.sinusoidal.fused.relu", seed=0, **TINY)
    first, _, f, _ = sublayer_pair(model)
    assert torch.equal(first.scale, torch.full((16,), 0.01)) and model.spec.uses_final_norm
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(first(x, f), x + first.scale * f(first.norm(x)))


def test_parallel_sums_its_sublayers_over_one_normalized_input():
    model = zoo.build("parallel.sinusoidal.fused.relu", seed=0, **TINY)
    first, second, f, g = sublayer_pair(model)
    with torch.no_grad():
        first.norm.weight.mul_(2.0)
    assert isinstance(second.norm, torch.nn.Identity), "one norm per block: the first sublayer's"
    x = torch.randn(2, 5, 16)
    h = first.norm(x)
    torch.testing.assert_close(type(first).compose(x, [(first, f), (second, g)]), x + f(h) + g(h))
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == TINY["n_encoder_layers"] + TINY["n_decoder_layers"] + 2, "one per block, two final"
    block = model.decoder.layers[0]  # the cross-attention reads LN(x), not the self-attention's output
    memory = torch.randn(2, 4, 16)
    y, _ = block(x, None, model.decoder.embed.position, torch.arange(5)[None], torch.arange(5)[None], memory)
    h = block.self_attn_residual.norm(x)
    self_out = block.self_attn(h, mask=None, causal=True, position=model.decoder.embed.position,
                               positions=torch.arange(5)[None])[0]
    cross_out = block.cross_attn(h, memory, mask=None)[0]
    torch.testing.assert_close(y, x + self_out + cross_out + block.ffn(h))


def test_fixup_zeroes_each_branchs_last_weight_and_scales_the_rest():
    sizes = {**TINY, "n_encoder_layers": 2, "n_decoder_layers": 3}
    fixup = zoo.model.canonical.canonical_state(zoo.build("fixup.sinusoidal.fused.relu", seed=4, **sizes))
    post = zoo.model.canonical.canonical_state(zoo.build("post.sinusoidal.fused.relu", seed=4, **sizes))
    branches = 2 * 2 + 3 * 3
    zeroed = scaled = 0
    for name, tensor in post.items():
        if name.endswith(("attn.out.weight", "ffn.linear2.weight")):
            assert not fixup[name].any(), name
            zeroed += 1
        elif name.endswith(("attn.v.weight", "ffn.linear1.weight")):
            torch.testing.assert_close(fixup[name], branches**-0.5 * tensor, rtol=1e-6, atol=0, msg=name)
            scaled += 1
        elif name in fixup:
            torch.testing.assert_close(fixup[name], tensor, rtol=0, atol=0, msg=name)
    assert zeroed == scaled == 2 * 2 + 3 * 3, "per encoder layer 2 branches, per decoder layer 3"
    model = zoo.build("fixup.sinusoidal.fused.relu", seed=4, **TINY)
    first, _, f, _ = sublayer_pair(model)
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in model.modules())
    with torch.no_grad():
        first.in_bias.fill_(0.5), first.multiplier.fill_(2.0), first.out_bias.fill_(-1.0)
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(first(x, f), x + 2.0 * f(x + 0.5) - 1.0)
