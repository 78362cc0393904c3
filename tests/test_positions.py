"""The numbers that define the position schemes (the variant grid tests their invariants)."""

import pytest
import torch
from conftest import TINY, padded_batch

import zoo
from zoo.variants.positions import alibi_slopes, t5_bucket

SCHEMES = zoo.registry("position").names()


def scheme(name: str, stack: str = "encoder", **overrides):
    model = zoo.build(f"pre.{name}.fused.relu", seed=0, **{**TINY, **overrides})
    return getattr(model, stack).embed.position


def test_alibi_slopes_for_powers_of_two_and_not():
    assert alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]
    # 6 heads: the 4-head slopes, then every other slope of the 8-head sequence (Press et al.)
    assert alibi_slopes(6).tolist() == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]


def at(*positions: int) -> torch.Tensor:
    return torch.tensor([positions])


def test_alibi_bias_grows_linearly_with_distance_and_follows_the_positions():
    alibi = scheme("alibi", n_heads=2)
    full = alibi.score_bias(at(0, 1, 2, 3, 4), at(0, 1, 2, 3, 4))
    assert full.shape == (1, 2, 5, 5)
    torch.testing.assert_close(full[0, 0, 4], -0.0625 * torch.tensor([4.0, 3, 2, 1, 0]))  # 2 heads: slopes 1/16, 1/256
    torch.testing.assert_close(alibi.score_bias(at(4), at(0, 1, 2, 3, 4)), full[:, :, 4:5])
    rows = alibi.score_bias(torch.tensor([[4], [2]]), torch.tensor([[0, 1, 2, 3, 4], [0, 1, 2, 0, 0]]))
    assert rows.shape == (2, 2, 1, 5) and torch.equal(rows[1, :, 0, :3], full[0, :, 2, :3]), "each row its own positions"


def test_rope_keeps_norms_and_scores_depend_only_on_the_offset():
    rope = scheme("rope", d_model=32, n_heads=2)
    q, k = torch.randn(1, 1, 1, 16, dtype=torch.float64), torch.randn(1, 1, 1, 16, dtype=torch.float64)
    rope = rope.double()
    rope.prepare(400)  # positions up to 302 below

    def score(i: int, j: int) -> float:
        return (rope.rotate(q, at(i)) * rope.rotate(k, at(j))).sum().item()

    x = torch.randn(2, 2, 7, 16, dtype=torch.float64)
    columns = at(*range(7))
    torch.testing.assert_close(rope.rotate(x, columns).norm(dim=-1), x.norm(dim=-1))
    assert score(3, 1) == pytest.approx(score(12, 10), abs=1e-5) == pytest.approx(score(302, 300), abs=1e-5)
    assert score(3, 1) != pytest.approx(score(3, 2), abs=1e-3)
    torch.testing.assert_close(rope.rotate(x[:, :, 4:], at(4, 5, 6)), rope.rotate(x, columns)[:, :, 4:])
    per_row = rope.rotate(x[:, :, :1], torch.tensor([[3], [302]]))
    torch.testing.assert_close(per_row[1], rope.rotate(x[1:, :, :1], at(302))[0])


@pytest.mark.parametrize("relative, bidirectional, bucket", [
    (0, True, 0), (-1, True, 1), (-7, True, 7), (-8, True, 8), (-16, True, 10), (-127, True, 15), (-1000, True, 15),
    (1, True, 17), (8, True, 24), (1000, True, 31),
    (0, False, 0), (-15, False, 15), (-16, False, 16), (-20, False, 17), (-1000, False, 31), (5, False, 0),
])
def test_t5_buckets_of_known_offsets(relative, bidirectional, bucket):
    """key - query offsets with 32 buckets and max_distance 128, as T5 buckets them."""
    assert t5_bucket(torch.tensor([relative]), bidirectional, 32, 128).item() == bucket


def test_t5_tables_are_one_per_stack_and_shared_by_its_layers():
    model = zoo.build("pre.t5.fused.relu", seed=0, **TINY)
    tables = [m for m in model.modules() if isinstance(m, torch.nn.Embedding) and m.weight.shape[0] == 32]
    assert len(tables) == 2
    assert not model.encoder.embed.position.causal and model.decoder.embed.position.causal
    bias = model.decoder.embed.position.score_bias(at(0, 1, 2, 3), at(0, 1, 2, 3))[0]
    assert (bias[:, 0, 1:] == bias[:, 0, 1:2]).all(), "the decoder puts every later key in one bucket"
    encoder = model.encoder.embed.position.score_bias(at(0, 1, 2, 3), at(0, 1, 2, 3))[0]
    assert not torch.equal(encoder[:, 0, 1], encoder[:, 0, 2]), "the encoder tells later keys apart"


@pytest.mark.parametrize("name", SCHEMES)
def test_longer_than_max_len(name):
    model = zoo.build(f"pre.{name}.fused.relu", seed=0, **{**TINY, "max_len": 8}).eval()
    src = padded_batch([12, 12], 19)
    if name == "learned":
        with pytest.raises(ValueError, match="longer than max_len 8"):
            model(src, src)
        return
    with torch.no_grad():
        assert torch.isfinite(model(src, src)).all()
        generated = model.generate(src, max_new_tokens=14)
    assert generated.size(1) <= 15 and torch.isfinite(generated).all()


@pytest.mark.parametrize("name", SCHEMES)
def test_cross_attention_gets_no_positions(name):
    """Cross-attention sees the encoder memory as a set: permuting its rows changes nothing."""
    model = zoo.build(f"pre.{name}.fused.relu", seed=0, **TINY).eval()
    src, tgt = padded_batch([6], 19, seed=1), padded_batch([5], 19, seed=2)
    with torch.no_grad():
        memory = model.encode(src)
        order = torch.randperm(6, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(model.decode(tgt, memory[:, order], src[:, order]), model.decode(tgt, memory, src),
                                   atol=1e-5, rtol=0)


def test_rope_needs_an_even_head_width():
    with pytest.raises(ValueError, match="rope rotates pairs of dimensions: d_head 9"):
        zoo.spec("pre.rope.fused.relu", vocab_size=9, d_model=18, n_heads=2)
