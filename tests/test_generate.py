"""Greedy generation: per-row stopping, the incremental cache, and attention maps."""

import pytest
import torch
import torch.nn.functional as F
from conftest import padded_batch, reference_greedy

import zoo


@pytest.fixture(scope="module")
def copier() -> zoo.EncoderDecoder:
    """A tiny model trained to copy its input, so rows of different lengths end at different steps."""
    torch.manual_seed(0)
    model = zoo.build("pre.sinusoidal.fused.relu", vocab_size=12, d_model=32, n_heads=2, d_ff=64,
                      n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(250):
        lengths = torch.randint(2, 9, (32,), generator=torch.Generator().manual_seed(step)).tolist()
        batch = padded_batch(lengths, 12, seed=step)
        tgt_in = torch.cat([torch.ones(32, 1, dtype=torch.long), batch[:, :-1]], dim=1)
        loss = F.cross_entropy(model(batch, tgt_in).flatten(0, 1), batch.flatten(), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@pytest.mark.slow
def test_rows_stop_at_their_own_eos(copier):
    src = padded_batch([8, 3, 6, 2, 5], 12, seed=1000)
    out = copier.generate(src, max_new_tokens=15)
    with torch.no_grad():
        assert torch.equal(out, reference_greedy(copier, src, 15))
    ends = [(row == 2).nonzero()[0, 0].item() for row in out]
    assert len(set(ends)) >= 3  # rows really finish at different steps
    for row, end in zip(out, ends):
        assert (row[end + 1 :] == 0).all() and not (row[1:end] == 0).any()
    assert out.size(1) == max(ends) + 1  # stops as soon as every row is done
    copied = (out[:, 1:][src != 0] == src[src != 0]).float().mean()
    assert copied > 0.9


def test_each_cached_step_feeds_one_token(copier):
    lengths = []
    handle = copier.decoder.embed.register_forward_hook(lambda module, args, out: lengths.append(args[0].size(1)))
    try:
        cached = copier.generate(padded_batch([8, 6], 12, seed=3), max_new_tokens=10)
        assert set(lengths) == {1} and len(lengths) == cached.size(1) - 1
        lengths.clear()
        full = copier.generate(padded_batch([8, 6], 12, seed=3), max_new_tokens=10, use_cache=False)
        assert lengths == list(range(1, full.size(1)))
    finally:
        handle.remove()
    assert torch.equal(cached, full)


def test_generate_is_deterministic_and_keeps_the_mode():
    model = zoo.build("post.learned.per_head.gelu", vocab_size=12, d_model=16, n_heads=2, d_ff=32,
                      n_encoder_layers=1, n_decoder_layers=1, dropout=0.5).train()
    src = padded_batch([5, 4], 12, seed=4)
    first = model.generate(src, max_new_tokens=6)
    assert model.training
    assert torch.equal(first, model.eval().generate(src, max_new_tokens=6))
    assert torch.equal(model.generate(src, max_new_tokens=0), torch.ones(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0"):
        model.generate(src, max_new_tokens=-1)


def test_attention_maps_are_distributions_over_visible_keys(copier):
    src, tgt = padded_batch([7, 4], 12, seed=5), padded_batch([6, 3], 12, seed=6)
    maps = copier.attention_maps(src, tgt)
    spec = copier.spec
    assert len(maps.encoder) == spec.n_encoder_layers and len(maps.decoder_cross) == spec.n_decoder_layers
    assert maps.encoder[0].shape == (2, spec.n_heads, 7, 7)
    assert maps.decoder_self[0].shape == (2, spec.n_heads, 6, 6)
    assert maps.decoder_cross[0].shape == (2, spec.n_heads, 6, 7)
    for weights in [*maps.encoder, *maps.decoder_self, *maps.decoder_cross]:
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert (maps.decoder_cross[0][1, :, :, 4:] == 0).all()  # padding of row 1's source gets no weight
    assert (maps.decoder_self[0][0].triu(1) == 0).all()  # no weight on future target positions
    fused = copier.attention_maps(src, tgt)
    per_head = zoo.convert(copier, attention="per_head").attention_maps(src, tgt)
    torch.testing.assert_close(per_head.decoder_cross[0], fused.decoder_cross[0], atol=1e-6, rtol=0)
