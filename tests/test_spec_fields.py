"""The spec's settings beyond the axes (head width, score scaling, shared embeddings, the output's
scale and bias, the decoder's start token, position layouts): every invariant of the grid holds with
each of them, in every attention layout, and each does what its description says."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import TINY, padded_batch
from invariants import (
    away_from_init,
    check_all_padding_rows,
    check_cached_decoding_equals_recompute,
    check_causality,
    check_padding_invariance,
    logits_of,
)

import zoo
from zoo.kernels.masks import target_mask
from zoo.model.canonical import canonical_state
from zoo.model.size_checks import exact_parameters

FIELD_CASES = {
    "head_width": {"head_width": 6},
    "unscaled_scores": {"scale_scores": False},
    "scores_scaled_by_a_width": {"scale_width": 9.0},
    "shared_embeddings": {"share_embeddings": True},
    "shared_and_tied": {"share_embeddings": True, "tie_embeddings": True},
    "scaled_output": {"scale_output": True, "tie_embeddings": True},
    "fixed_logits_bias": {"output_bias": "fixed"},
    "no_logits_bias": {"output_bias": "none"},
    "start_is_pad": {"bos_id": 0},
    "start_is_eos": {"bos_id": 2},
    "sinusoid_halves": {"position": {"name": "sinusoidal", "layout": "halves"}},
    "learned_offset": {"position": {"name": "learned", "offset": 2}},
    "attention_softcap": {"attn_softcap": 0.5},
    "logit_softcap": {"logit_softcap": 0.5},
    "qk_rmsnorm": {"qk_norm": "rmsnorm"},
    "qk_layernorm": {"qk_norm": "layernorm"},
    "qk_l2": {"qk_norm": "l2"},
    "qk_rmsnorm_projection": {"qk_norm": "rmsnorm", "qk_norm_scope": "projection", "norm_type": "rmsnorm"},
    "qk_layernorm_each_head": {"qk_norm": "layernorm", "qk_norm_scope": "each_head"},
    "logit_scale": {"logit_scale": 0.0625},
    "dropout_by_site": {"dropout": 0.2, "attention_dropout": 0.0, "activation_dropout": 0.1, "embedding_dropout": 0.3},
    "window": {"window": 3},
    "qkv_bias_only": {"bias": False, "qkv_bias": True},
    "no_attention_biases": {"qkv_bias": False, "out_bias": False},
    "window_rope_decoder": {"window": 3, "kind": "decoder", "position": "rope"},
    "window_t5_encoder": {"window": 2, "kind": "encoder", "position": "t5"},
    "shared_layers": {"share_layers": True},
    "factorized_embeddings": {"embedding_dim": 8},
    "factorized_shared_and_tied": {"embedding_dim": 8, "share_embeddings": True, "tie_embeddings": True},
    "narrow_embedding": {"embedding_dim": 8, "embedding_dim_scope": "embedding", "embedding_norm": True},
    "narrow_embedding_shared_tied_transform": {"embedding_dim": 8, "embedding_dim_scope": "embedding",
                                               "share_embeddings": True, "tie_embeddings": True, "output_transform": True,
                                               "bias": True},
}
ATTENTION = zoo.registry("attention").names()
CASES = [(case, attention) for case in FIELD_CASES for attention in ATTENTION]


def built(case: str, attention: str = "fused", **overrides) -> zoo.EncoderDecoder:
    torch.manual_seed(0)
    return zoo.build("pre.sinusoidal.fused.relu", **{**TINY, **FIELD_CASES[case], "attention": attention, **overrides})


@pytest.mark.parametrize("case, attention", CASES, ids=[f"{c}-{a}" for c, a in CASES])
def test_every_invariant_holds_with_each_setting(case, attention):
    model = away_from_init(built(case, attention)).eval()
    with torch.no_grad():
        check_padding_invariance(model)
        check_causality(model)
    check_all_padding_rows(model)
    check_cached_decoding_equals_recompute(away_from_init(built(case, attention, vocab_size=6)).eval())
    assert exact_parameters(model.spec, buffers=False) == model.num_parameters()
    assert exact_parameters(model.spec) == sum(t.numel() for t in (*model.parameters(), *model.buffers()))


@pytest.mark.parametrize("case", FIELD_CASES)
def test_each_setting_converts_exactly_between_attention_layouts(case):
    """From weights away from their initial values, so a parameter a layout forgot would show."""
    model = away_from_init(built(case)).eval()
    src, tgt = padded_batch([7, 4], 19, seed=1), padded_batch([5, 6], 19, seed=2)
    for attention in ATTENTION:
        other = zoo.convert(model, attention=attention).eval()
        torch.testing.assert_close(logits_of(other, src, tgt), logits_of(model, src, tgt), rtol=0, atol=2e-6)


def test_head_width_sets_the_attention_width_apart_from_d_model():
    state = canonical_state(built("head_width"))
    assert state["encoder.layers.0.self_attn.q.weight"].shape == (4 * 6, 16)
    assert state["encoder.layers.0.self_attn.k.weight"].shape == (2 * 6, 16)
    assert state["decoder.layers.0.cross_attn.out.weight"].shape == (16, 4 * 6)
    assert zoo.spec("pre.sinusoidal.fused.relu", vocab_size=9, d_model=10, n_heads=4, head_width=3).d_head == 3


def test_unscaled_scores_start_from_the_function_of_scaled_ones():
    """T5 leaves out 1/sqrt(d_head) and folds it into the initial query weights, as the zoo does."""
    src, tgt = padded_batch([7, 4], 19, seed=1), padded_batch([5, 6], 19, seed=2)
    scaled = zoo.build("pre.sinusoidal.fused.relu", seed=3, **TINY).eval()
    unscaled = zoo.build("pre.sinusoidal.fused.relu", seed=3, **TINY, scale_scores=False).eval()
    torch.testing.assert_close(unscaled(src, tgt), scaled(src, tgt), rtol=0, atol=1e-5)
    q = "decoder.layers.0.self_attn.q.weight"
    ratio = canonical_state(unscaled)[q] / canonical_state(scaled)[q]
    torch.testing.assert_close(ratio, torch.full_like(ratio, 4**-0.5))


def test_shared_embeddings_are_one_table_counted_once():
    shared, apart = built("shared_embeddings"), built("shared_embeddings", share_embeddings=False)
    assert shared.encoder.embed.tokens.weight is shared.decoder.embed.tokens.weight
    assert apart.num_parameters() - shared.num_parameters() == 19 * 16
    tied = built("shared_and_tied")
    assert tied.generator.weight is tied.encoder.embed.tokens.weight


def test_the_scaled_output_multiplies_the_decoder_output_by_the_root_of_d_model():
    model = built("scaled_output").eval()
    hidden = torch.randn(2, 3, 16)
    torch.testing.assert_close(model.generator(hidden), hidden * 16**-0.5 @ model.generator.weight.T + model.generator.bias)


def test_a_fixed_logits_bias_is_kept_but_never_trained():
    model = built("fixed_logits_bias")
    with torch.no_grad():
        model.generator.bias.copy_(torch.linspace(-1, 1, 19))
    before = model.generator.bias.clone()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    src, tgt = padded_batch([7, 4], 19, seed=1), padded_batch([5, 6], 19, seed=2)
    model(src, tgt).sum().backward()
    optimizer.step()
    assert torch.equal(model.generator.bias, before) and "generator.bias" in model.state_dict()
    assert model.num_parameters() == built("no_logits_bias").num_parameters()
    assert not built("no_logits_bias").generator.bias


def test_a_start_token_that_is_the_pad_id_is_not_padding():
    spec = built("start_is_pad").spec
    tgt = torch.tensor([[0, 5, 6, 0], [0, 7, 0, 0]])
    assert target_mask(tgt, spec)[:, 0, 0].tolist() == [[True, True, True, False], [True, True, False, False]]
    assert built("start_is_pad").generate(padded_batch([5], 19), max_new_tokens=4)[0, 0] == 0


def test_sinusoid_halves_hold_the_interleaved_sinusoids_sines_first():
    halves = built("sinusoid_halves").encoder.embed.position.table
    interleaved = zoo.build("pre.sinusoidal.fused.relu", **TINY).encoder.embed.position.table
    assert torch.equal(halves[:, :8], interleaved[:, 0::2]) and torch.equal(halves[:, 8:], interleaved[:, 1::2])


def test_learned_positions_with_an_offset_read_their_rows_past_it():
    position = built("learned_offset").encoder.embed.position
    assert position.table.num_embeddings == TINY["max_len"] + 2
    x = torch.zeros(1, 3, 16)
    torch.testing.assert_close(position(x, torch.tensor([[1, 2, 3]])), position.table.weight[3:6][None])
    with pytest.raises(ValueError, match="longer than max_len 40"):
        position.prepare(41)


def test_soft_caps_bound_scores_and_logits_by_tanh():
    """cap tanh(x / cap): no logit reaches the cap; the attention kernel caps the scaled scores
    before the mask (a score of 1000 becomes 0.5)."""
    model = built("logit_softcap").eval()
    src, tgt = padded_batch([7, 4], 19, seed=1), padded_batch([5, 6], 19, seed=2)
    with torch.no_grad():
        logits = model(src, tgt)
        plain = zoo.convert(model, logit_softcap=None)(src, tgt)
    assert logits.abs().max() < 0.5 and torch.allclose(logits, 0.5 * torch.tanh(plain / 0.5), atol=1e-6)
    from zoo.kernels.attend import attend

    q, k, v = torch.ones(1, 1, 1, 4), torch.tensor([[[[1000.0] * 4, [0.0] * 4]]]), torch.eye(2)[None, None, :, :2]
    _, weights = attend(q, k, v.expand(1, 1, 2, 2), None, need_weights=True, scale=1.0, softcap=0.5)
    torch.testing.assert_close(weights[0, 0, 0], torch.softmax(torch.tensor([0.5 * math.tanh(4000 / 0.5), 0.0]), 0))


def test_a_logit_scale_multiplies_the_logits_before_their_softcap():
    """Cohere's logit_scale: the same weights give the unscaled logits times the scale; under a
    softcap the scaled logits are capped."""
    model = built("logit_scale").eval()
    src, tgt = padded_batch([7, 4], 19, seed=1), padded_batch([5, 6], 19, seed=2)
    with torch.no_grad():
        plain = zoo.convert(model, logit_scale=None)(src, tgt)
        torch.testing.assert_close(model(src, tgt), 0.0625 * plain)
        capped = zoo.convert(model, logit_softcap=0.01)(src, tgt)
    torch.testing.assert_close(capped, 0.01 * torch.tanh(0.0625 * plain / 0.01))


def test_a_narrow_embedding_adds_positions_and_normalizes_at_its_width_then_projects_with_a_bias():
    """dim_scope embedding (ALBERT, ELECTRA): the embedding is computed at dim and projected to
    d_model after its norm; the head's transform maps d_model to dim, and the tied table projects
    from there. The token-only scope projects before positions, at d_model."""
    fields = dict(embedding_dim=8, embedding_norm=True, tie_embeddings=True, output_transform=True, bias=True,
                  scale_embeddings=False, position={"name": "learned", "token_types": 2})
    model = away_from_init(zoo.build("encoder.post.learned.fused.gelu", **{**TINY, **fields},
                                     embedding_dim_scope="embedding")).eval()
    embed, head = model.encoder.embed, model.generator
    assert embed.position.table.weight.shape == (40, 8) and embed.norm.weight.shape == (8,)
    assert embed.project.bias.shape == (16,) and head.transform.dense.weight.shape == (8, 16)
    assert not hasattr(head, "project"), "the transform reads d_model and writes the table's width"
    ids = padded_batch([6, 4], 19, seed=1)
    positions = torch.arange(ids.size(1))[None]
    with torch.no_grad():
        narrow = embed.tokens(ids) + embed.position.table(positions) + embed.position.types(torch.zeros_like(ids))
        torch.testing.assert_close(embed(ids, positions), embed.project(embed.norm(narrow)))
        hidden = torch.randn(2, 3, 16)
        transform = head.transform
        expected = F.linear(transform.norm(F.gelu(transform.dense(hidden))), embed.tokens.weight, head.bias)
        torch.testing.assert_close(head(hidden), expected)
    tokens_only = zoo.build("encoder.post.learned.fused.gelu", **{**TINY, **fields})
    assert tokens_only.encoder.embed.position.table.weight.shape == (40, 16)
    assert tokens_only.encoder.embed.project.bias is None and tokens_only.generator.project.weight.shape == (8, 16)
    with pytest.raises(zoo.ConfigError, match="dim_scope embedding places the embedding at the width dim, and dim is "
                                              "null; give embedding_dim"):
        zoo.spec("encoder.post.learned.fused.gelu", vocab_size=9, embedding_dim_scope="embedding")
