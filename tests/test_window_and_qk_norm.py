"""Sliding-window attention and query-key normalization do what their descriptions say (the grid
of tests/test_spec_fields.py checks every invariant with them, in every attention layout)."""

import pytest
import torch
import torch.nn.functional as F
from conftest import TINY, padded_batch
from invariants import away_from_init

import zoo
from zoo.kernels.attend import stale_columns
from zoo.model.canonical import canonical_state


def decoder(**fields):
    torch.manual_seed(0)
    return away_from_init(zoo.build("decoder.pre.rope.fused.relu", **{**TINY, **fields})).eval()


def test_the_cache_keeps_only_the_window():
    model = decoder(window=3)
    prompts = torch.cat([torch.full((2, 1), 1), padded_batch([6, 6], 19, seed=3)], dim=1)
    tokens, state = model.start_decoding(prompts)
    for _ in range(5):
        model.decode_step(tokens, state)
        tokens = torch.cat([tokens, torch.full((2, 1), 5)], dim=1)
    for layer in state.cache.layers:
        keys, _ = layer.self_attn._store[0]
        assert keys.size(-2) == 3, "the newest query sees itself and the 2 before it; nothing older is kept"


def test_ragged_prompts_keep_what_their_shortest_row_still_needs():
    positions = torch.tensor([[3], [9]])  # the next queries of two rows
    keys = torch.arange(10)[None].expand(2, -1)
    assert stale_columns(positions, keys, None, window=3) == 1, "row 0 still needs positions 1 and 2"
    padding = torch.ones(2, 1, 1, 10, dtype=torch.bool)
    padding[0, ..., :4] = False
    assert stale_columns(positions, keys, padding, window=3) == 4, "padding is stale for its row"


def test_a_window_as_long_as_the_sequence_changes_nothing():
    src, tgt = padded_batch([7, 4], 19, seed=1), padded_batch([5, 6], 19, seed=2)
    full = zoo.build("pre.sinusoidal.fused.relu", seed=2, **TINY).eval()
    windowed = zoo.build("pre.sinusoidal.fused.relu", seed=2, **TINY, window=TINY["max_len"]).eval()
    torch.testing.assert_close(windowed(src, tgt), full(src, tgt), rtol=0, atol=1e-6)


@pytest.mark.parametrize("norm_type", zoo.registry("norm_type").names())
def test_qk_norm_normalizes_each_head_over_d_head(norm_type):
    attention = decoder(qk_norm=norm_type).decoder.layers[0].self_attn
    assert isinstance(attention.q_norm, zoo.registry("norm_type").get(norm_type))
    q = torch.randn(2, 4, 5, 4) * 3 + 1
    torch.testing.assert_close(attention.norm_queries(q), attention.q_norm(q))
    assert sum(p.numel() for p in attention.q_norm.parameters()) in (1, 4, 8), "a norm of width d_head"
    names = {name.split("self_attn.")[-1] for name in canonical_state(decoder(qk_norm=norm_type))}
    assert {name for name in names if name.startswith(("q_norm", "k_norm"))}, "the canonical state holds it"


def test_l2_qk_norm_gives_scores_a_learned_scale_times_the_cosine():
    attention = decoder(qk_norm="l2").decoder.layers[0].self_attn
    assert torch.equal(zoo.build("decoder.pre.rope.fused.relu", **TINY, qk_norm="l2").decoder.layers[0]
                       .self_attn.qk_scale, torch.full((4,), 4.0)), "g starts at d_head"
    q, k = torch.randn(1, 4, 3, 4), torch.randn(1, 4, 3, 4)
    scores = attention.norm_queries(q) @ attention.norm_keys(k).transpose(-1, -2)
    cosines = F.cosine_similarity(q[..., :, None, :], k[..., None, :, :], dim=-1)
    torch.testing.assert_close(scores, attention.qk_scale[:, None, None] * cosines)


def test_bad_qk_norm_names_the_field_and_the_choices():
    with pytest.raises(zoo.ConfigError, match="unknown qk_norm 'rms'; choices: null, l2, layernorm, rmsnorm"):
        zoo.spec("pre.sinusoidal.fused.relu", vocab_size=9, qk_norm="rms")


def test_qk_norm_over_the_projection_normalizes_all_heads_at_once():
    """OLMo 2: one RMSNorm over n_heads * d_head queries, one over kv_heads * d_head keys, with the
    spec's norm eps; a per-head norm of the same input differs wherever the heads' scales differ."""
    spec = dict(qk_norm="rmsnorm", norm_type={"name": "rmsnorm", "eps": 1e-3})
    whole = decoder(**spec, qk_norm_scope="projection").decoder.layers[0].self_attn
    assert whole.q_norm.weight.shape == (16,) and whole.k_norm.weight.shape == (8,), "4 query, 2 key heads of 4"
    assert whole.q_norm.eps == 1e-3, "the qk norm takes the spec's norm_type settings"
    q = torch.randn(2, 4, 5, 4) * torch.tensor([0.1, 1.0, 3.0, 10.0])[:, None, None]
    flat = q.permute(0, 2, 1, 3).reshape(2, 5, 16)
    expected = flat * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + 1e-3) * whole.q_norm.weight
    torch.testing.assert_close(whole.norm_queries(q), expected.reshape(2, 5, 4, 4).permute(0, 2, 1, 3))
    per_head = decoder(**spec).decoder.layers[0].self_attn
    assert not torch.allclose(per_head.norm_queries(q), whole.norm_queries(q), atol=1e-2)


@pytest.mark.parametrize("scope", ["projection", "each_head"])
@pytest.mark.parametrize("qk_norm", [None, "l2"])
def test_a_qk_norm_scope_other_than_head_needs_a_norm(qk_norm, scope):
    with pytest.raises(zoo.ConfigError, match=f"qk_norm_scope {scope} normalizes by qk_norm's norm, and "
                                              f"qk_norm is {qk_norm or 'null'}; choose qk_norm among layernorm"):
        zoo.spec("pre.sinusoidal.fused.relu", vocab_size=9, qk_norm=qk_norm, qk_norm_scope=scope)


def test_qk_norm_of_each_head_gives_each_head_a_norm_of_its_own():
    """StableLM and Cohere: each head normalized over its d_head like the shared scope, with gains
    and biases of its own (4 query heads, 2 key heads); with every head's gains equal it is the
    shared scope's function."""
    own = decoder(qk_norm="layernorm", qk_norm_scope="each_head").decoder.layers[0].self_attn
    assert len(own.q_norm) == 4 and len(own.k_norm) == 2 and own.q_norm[0].weight.shape == (4,)
    q = torch.randn(2, 4, 5, 4)
    expected = torch.stack([F.layer_norm(q[:, h], (4,), own.q_norm[h].weight, own.q_norm[h].bias, 1e-5)
                            for h in range(4)], dim=1)
    torch.testing.assert_close(own.norm_queries(q), expected)
    shared = decoder(qk_norm="layernorm").decoder.layers[0].self_attn
    with torch.no_grad():
        for norm in own.q_norm:
            norm.load_state_dict(shared.q_norm.state_dict())
    torch.testing.assert_close(own.norm_queries(q), shared.norm_queries(q))
