"""Behaviour every registered combination of variants must have."""

import pytest
import torch
import torch.nn.functional as F
from conftest import TINY, padded_batch, reference_greedy, tiny

import zoo


def with_bos(tgt: torch.Tensor, bos: int = 1) -> torch.Tensor:
    return torch.cat([torch.full((tgt.size(0), 1), bos), tgt[:, :-1]], dim=1)


def test_builds_with_its_spec(variant):
    model = zoo.build(variant, **TINY)
    assert isinstance(model, zoo.EncoderDecoder)
    assert model.spec.name == variant
    assert model.spec == tiny(variant)


def test_forward_and_backward_are_finite(variant):
    model = zoo.build(variant, **{**TINY, "dropout": 0.1})
    src, tgt = padded_batch([7, 4, 6], 19, seed=1), padded_batch([5, 6, 2], 19, seed=2)
    logits = model(src, tgt)
    assert logits.shape == (3, 6, 19)
    assert torch.isfinite(logits).all()
    logits.logsumexp(-1).mean().backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert torch.isfinite(param.grad).all(), name


def test_a_few_steps_lower_the_loss(variant):
    torch.manual_seed(0)
    model = zoo.build(variant, **TINY)
    src = padded_batch([8, 6, 7, 5], 19, seed=3)
    tgt = src.flip(1)  # any fixed mapping; the model only has to fit this one batch a little
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def loss() -> torch.Tensor:
        logits = model(src, with_bos(tgt))
        return F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=0)

    first = loss().item()
    for _ in range(15):
        optimizer.zero_grad()
        loss().backward()
        optimizer.step()
    assert loss().item() < 0.8 * first


def test_padding_does_not_change_real_positions(variant):
    model = zoo.build(variant, **TINY).eval()
    src, tgt = padded_batch([9, 4, 6], 19, seed=4), padded_batch([7, 3, 5], 19, seed=5)
    with torch.no_grad():
        batched = model(src, tgt)
        for row, (s_len, t_len) in enumerate([(9, 7), (4, 3), (6, 5)]):
            alone = model(src[row : row + 1, :s_len], tgt[row : row + 1, :t_len])
            torch.testing.assert_close(batched[row, :t_len], alone[0], atol=1e-5, rtol=0)


def test_decoder_is_causal(variant):
    model = zoo.build(variant, **TINY).eval()
    src, tgt = padded_batch([6, 6], 19, seed=6), padded_batch([8, 8], 19, seed=7)
    with torch.no_grad():
        before = model(src, tgt)
        for j in range(tgt.size(1)):
            changed = tgt.clone()
            changed[:, j] = 3 + (changed[:, j] - 2) % 16  # another ordinary token
            after = model(src, changed)
            torch.testing.assert_close(after[:, :j], before[:, :j], atol=0, rtol=0)
            assert not torch.allclose(after[:, j], before[:, j])


def test_all_padding_rows_stay_finite(variant):
    model = zoo.build(variant, **TINY)
    src, tgt = padded_batch([5, 5], 19, seed=8), padded_batch([4, 4], 19, seed=9)
    src[1], tgt[1] = 0, 0
    logits = model(src, tgt)
    assert torch.isfinite(logits).all()
    logits.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    assert torch.isfinite(model.generate(src, max_new_tokens=4)).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_generate_equals_full_recompute(variant, seed):
    torch.manual_seed(seed)
    model = zoo.build(variant, **{**TINY, "vocab_size": 6}).eval()
    src = padded_batch([6, 3, 5, 4, 6, 2, 5, 6], 6, seed=seed)
    with torch.no_grad():
        expected = reference_greedy(model, src, steps=12)
    generated = model.generate(src, max_new_tokens=12)
    assert torch.equal(generated, expected)
    assert (generated[:, 0] == 1).all() and not (generated[:, 1:] == 1).any()
    for row in generated:
        eos = (row == 2).nonzero()
        if len(eos):
            assert (row[eos[0, 0] + 1 :] == 0).all()
        else:
            assert not (row == 0).any()
