"""Behaviour every variant must have, of every kind.

The grid (conftest.GRID) covers every pair of values of any two axes, the model's kind among
them, and the four seed axes in full, so it grows with the square of the number of parts, not
their product: each variant is built once at a tiny size and checked for all core invariants in
one test, while learning (which needs optimizer steps) is checked once per part.
"""

import pytest
import torch
import torch.nn.functional as F
from conftest import PART_IDS, PARTS, TINY, padded_batch, tiny
from invariants import (
    away_from_init,
    check_all_padding_rows,
    check_cached_decoding_equals_recompute,
    check_causality,
    check_padding_invariance,
    with_bos,
)

import zoo


def test_core_invariants(variant):
    """Builds as named; padding invariance, causality where causal (an encoder sees later tokens),
    finite all-padding rows (forward, backward and generate), and cached greedy and beam decoding
    equal to a full recompute for the kinds that decode."""
    torch.manual_seed(0)
    model = away_from_init(zoo.build(variant, **TINY))
    assert variant.startswith(model.spec.axes_name) and model.spec == tiny(variant)  # a pattern follows the axes
    assert zoo.spec(model.spec.name, **TINY) == model.spec
    model.eval()
    with torch.no_grad():
        check_padding_invariance(model)
        check_causality(model)
    check_all_padding_rows(model)
    torch.manual_seed(1)
    check_cached_decoding_equals_recompute(away_from_init(zoo.build(variant, **{**TINY, "vocab_size": 6})).eval())


@pytest.mark.parametrize("axis, value", PARTS, ids=PART_IDS)
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
