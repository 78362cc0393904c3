"""Behaviour every registered combination of variants must have.

The grid is the product of every axis's parts, so it grows multiplicatively: each combination is
built once at a tiny size and checked for all core invariants in one test, while learning (which
needs optimizer steps) is checked once per part.
"""

import pytest
import torch
import torch.nn.functional as F
from conftest import TINY, padded_batch, reference_greedy, tiny

import zoo

ROUNDING = 3e-5
"""float32 rounding of two computations that differ in shape (batch or length) only; a real leak
of padding or of later tokens moves logits by orders of magnitude more."""

AXIS_VALUES = [(axis, value) for axis in zoo.AXES for value in zoo.registry(axis).names()]


def with_bos(tgt: torch.Tensor, bos: int = 1) -> torch.Tensor:
    return torch.cat([torch.full((tgt.size(0), 1), bos), tgt[:, :-1]], dim=1)


def check_padding_invariance(model):
    src, tgt = padded_batch([9, 4, 6], 19, seed=4), padded_batch([7, 3, 5], 19, seed=5)
    batched = model(src, tgt)
    for row, (s_len, t_len) in enumerate([(9, 7), (4, 3), (6, 5)]):
        alone = model(src[row : row + 1, :s_len], tgt[row : row + 1, :t_len])
        assert (batched[row, :t_len] - alone[0]).abs().max() <= ROUNDING, f"row {row} depends on padding"


def check_causality(model):
    """Changing target token j changes no logit before j and changes the logit at j: all changes in
    one batch, row j of which has token j replaced."""
    src, tgt = padded_batch([6], 19, seed=6), padded_batch([8], 19, seed=7)
    length = tgt.size(1)
    changed = tgt.repeat(length, 1)
    steps = torch.arange(length)
    changed[steps, steps] = 3 + (changed[steps, steps] - 2) % 16  # another ordinary token
    before, after = model(src, tgt), model(src.repeat(length, 1), changed)
    moved = (after - before).abs().amax(dim=-1)  # (changed token j, position)
    earlier = torch.ones(length, length, dtype=torch.bool).tril(-1)  # row j, positions before j
    assert moved[earlier].max() <= ROUNDING, "a position sees a later token"
    assert (moved.diagonal() > ROUNDING).all(), "a position does not see its own token"


def check_all_padding_rows(model):
    src, tgt = padded_batch([5, 5], 19, seed=8), padded_batch([4, 4], 19, seed=9)
    src[1], tgt[1] = 0, 0
    model.train()
    logits = model(src, tgt)
    assert torch.isfinite(logits).all()
    logits.sum().backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
    model.eval()
    assert torch.isfinite(model.generate(src, max_new_tokens=3)).all()


def check_cached_decoding_equals_recompute(model):
    """Greedy and beam search. On a vocabulary of 3 ordinary tokens, so that rows stop at eos early
    and feed padding on, and beams finish at different steps."""
    src = padded_batch([6, 3, 5, 4, 6, 2], 6, seed=10)
    with torch.no_grad():
        expected = reference_greedy(model, src, steps=7)
    generated = model.generate(src, max_new_tokens=7)
    assert torch.equal(generated, expected)
    assert (generated[:, 0] == 1).all() and not (generated[:, 1:] == 1).any()
    for row in generated:
        eos = (row == 2).nonzero()
        if len(eos):
            assert (row[eos[0, 0] + 1 :] == 0).all()
    some = src[:3]
    beams = model.generate(some, max_new_tokens=5, num_beams=2, length_penalty=0.6)
    assert torch.equal(beams, model.generate(some, max_new_tokens=5, num_beams=2, length_penalty=0.6, use_cache=False))


def test_core_invariants(variant):
    """Builds as named; padding invariance, causality, finite all-padding rows (forward, backward
    and generate), and cached greedy and beam decoding equal to a full recompute."""
    torch.manual_seed(0)
    model = zoo.build(variant, **TINY)
    assert model.spec.name == variant and model.spec == tiny(variant)
    model.eval()
    with torch.no_grad():
        check_padding_invariance(model)
        check_causality(model)
    check_all_padding_rows(model)
    torch.manual_seed(1)
    check_cached_decoding_equals_recompute(zoo.build(variant, **{**TINY, "vocab_size": 6}).eval())


@pytest.mark.parametrize("axis, value", AXIS_VALUES, ids=[f"{a}={v}" for a, v in AXIS_VALUES])
def test_every_part_learns_with_dropout(axis, value):
    """A few optimizer steps fit one batch, with dropout on and finite gradients throughout."""
    torch.manual_seed(0)
    model = zoo.build("post.sinusoidal.fused.relu", **{**TINY, "dropout": 0.1, axis: value})
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
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        optimizer.step()
    assert loss().item() < 0.8 * first
