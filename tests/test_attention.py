"""Attention layouts and grouped-query attention: the numbers that define them."""

import pytest
import torch
from conftest import TINY, padded_batch

import zoo
from zoo.kernels.masks import padding_mask
from zoo.model.canonical import canonical_state, load_canonical_state

POSITIONS = zoo.registry("position").names()


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("n_kv_heads", [None, 2, 1])
def test_sdpa_equals_fused_with_padding_biases_and_all_padding_rows(position, n_kv_heads):
    fused = zoo.build(f"pre.{position}.fused.relu", seed=0, **{**TINY, "n_kv_heads": n_kv_heads})
    sdpa = zoo.convert(fused, attention="sdpa")
    src, tgt = padded_batch([7, 3, 5], 19, seed=1), padded_batch([6, 4, 2], 19, seed=2)
    src[2], tgt[2] = 0, 0  # a row that is all padding
    for model in (fused, sdpa):  # gradients of a loss on real target tokens, as training takes them
        model.zero_grad()
        model(src, tgt)[tgt != 0].pow(2).mean().backward()
    with torch.no_grad():
        expected, got = fused(src, tgt), sdpa(src, tgt)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    grads = {n: p.grad for n, p in fused.named_parameters()}
    for name, param in sdpa.named_parameters():
        torch.testing.assert_close(param.grad, grads[name], atol=1e-5, rtol=1e-4, msg=name)
    fused.eval(), sdpa.eval()
    assert torch.equal(sdpa.generate(src, max_new_tokens=6), fused.generate(src, max_new_tokens=6))


def test_sdpa_applies_dropout_to_attention_in_training_only():
    model = zoo.build("pre.sinusoidal.sdpa.relu", seed=0, **{**TINY, "dropout": 0.5})
    src, tgt = padded_batch([6, 4], 19, seed=1), padded_batch([5, 3], 19, seed=2)
    torch.manual_seed(1)
    first = model(src, tgt)
    assert not torch.equal(first, model(src, tgt))
    model.eval()
    assert torch.equal(model(src, tgt), model(src, tgt))


@pytest.mark.parametrize("attention", zoo.registry("attention").names())
def test_as_many_key_value_heads_as_heads_is_full_attention(attention):
    full = zoo.build(f"pre.alibi.{attention}.relu", seed=3, **{**TINY, "n_kv_heads": None})
    grouped = zoo.build(f"pre.alibi.{attention}.relu", seed=3, **{**TINY, "n_kv_heads": TINY["n_heads"]})
    assert full.state_dict().keys() == grouped.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(full.state_dict().values(), grouped.state_dict().values()))
    src, tgt = padded_batch([7, 3], 19, seed=1), padded_batch([6, 4], 19, seed=2)
    with torch.no_grad():
        assert torch.equal(full(src, tgt), grouped(src, tgt))


@pytest.mark.parametrize("attention", zoo.registry("attention").names())
def test_grouped_heads_share_keys_and_values(attention):
    """With 4 heads in 2 groups, heads 0 and 1 see the keys and values of group 0, heads 2 and 3
    those of group 1: changing group 1's value projection changes only the outputs of heads 2, 3."""
    model = zoo.build(f"post.none.{attention}.relu", seed=0, **TINY).eval()
    layer = model.encoder.layers[0].self_attn
    state = canonical_state(layer)
    assert state["k.weight"].shape == state["v.weight"].shape == (2 * 4, 16)
    x = torch.randn(1, 5, 16)
    mask = torch.ones(1, 1, 1, 5, dtype=torch.bool)
    before = layer(x, mask=mask, need_weights=True)[1]
    state["k.weight"][4:] *= 3.0
    load_canonical_state(layer, state)
    after = layer(x, mask=mask, need_weights=True)[1]
    assert torch.equal(after[:, :2], before[:, :2]) and not torch.allclose(after[:, 2:], before[:, 2:])


@pytest.mark.parametrize("attention", zoo.registry("attention").names())
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_the_cache_holds_key_value_heads_only(attention, n_kv_heads):
    model = zoo.build(f"pre.rope.{attention}.relu", seed=0, **{**TINY, "n_kv_heads": n_kv_heads}).eval()
    src = padded_batch([5, 4], 19, seed=1)
    cache = model.decoder.new_cache()
    memory = model.encode(src)
    tokens = torch.full((2, 1), 1)
    for _ in range(3):
        model.decoder(tokens[:, -1:], padding_mask(tokens, 0), memory, padding_mask(src, 0), cache)
        tokens = torch.cat([tokens, torch.full((2, 1), 5)], dim=1)
    stored = [t for layer in cache.layers for part in (layer.self_attn, layer.cross_attn)
              for pair in part._store.values() for t in pair]
    floats = sum(t.numel() for t in stored)
    d_head, layers = 16 // 4, TINY["n_decoder_layers"]
    assert floats == layers * 2 * 2 * n_kv_heads * d_head * (3 + 5)  # k and v; 3 decoded steps, 5 source tokens


def test_key_value_heads_must_divide_heads():
    with pytest.raises(ValueError, match=r"n_heads 4 is not divisible by n_kv_heads 3; choose n_kv_heads among 1, 2, 4"):
        zoo.spec("pre.sinusoidal.fused.relu", **{**TINY, "n_kv_heads": 3})


def test_a_padding_mask_is_none_where_no_key_is_padding():
    assert padding_mask(torch.tensor([[3, 4, 2], [5, 6, 2]]), 0) is None
    assert padding_mask(torch.tensor([[3, 4, 2], [5, 2, 0]]), 0).tolist() == [[[[True, True, True]]], [[[True, True, False]]]]


@pytest.mark.parametrize("padded", [False, True])
def test_sdpa_runs_without_a_mask_where_nothing_is_hidden_but_the_future(padded, monkeypatch):
    """Without padding: no mask tensor, and the decoder's self-attention as is_causal (the path to
    the flash kernel); with padding: one additive float mask. Both equal the reference."""
    calls, real = [], torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, is_causal=False, **options):
        calls.append((None if attn_mask is None else attn_mask.dtype, is_causal))
        return real(q, k, v, attn_mask=attn_mask, is_causal=is_causal, **options)

    fused = zoo.build("pre.rope.fused.relu", seed=0, **TINY).eval()
    sdpa = zoo.convert(fused, attention="sdpa")
    src, tgt = padded_batch([6, 6 - 2 * padded], 19, seed=1), padded_batch([5, 5 - 2 * padded], 19, seed=2)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    with torch.no_grad():
        torch.testing.assert_close(sdpa(src, tgt), fused(src, tgt), atol=1e-5, rtol=1e-5)
    encoder, decoder = TINY["n_encoder_layers"], TINY["n_decoder_layers"]
    assert len(calls) == encoder + 2 * decoder
    if padded:
        assert all(mask == torch.float32 and not causal for mask, causal in calls)
    else:
        assert calls == [(None, False)] * encoder + [(None, True), (None, False)] * decoder
