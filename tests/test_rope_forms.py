"""The forms of rotary positions (`fraction`, `layout`) are the rotations the field uses: GPT-NeoX's
partial rotation of the first dimensions and GPT-J's adjacent pairs, each the reference's own
function applied to the same tensors; and in every form, scores depend on the offset alone."""

import pytest
import torch
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_rotation
from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_rotation
from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions

import zoo
from zoo.variants.positions import Rotary

D_HEAD = 16


def rotary(**settings) -> Rotary:
    model = zoo.build("decoder.pre.rope.fused.relu", vocab_size=19, d_model=2 * D_HEAD, n_heads=2, d_ff=8,
                      n_decoder_layers=1, max_len=64, position={"name": "rope", **settings})
    (part,) = [module for module in model.modules() if isinstance(module, Rotary)]
    return part


def heads(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(batch 2, heads 3, length 9, D_HEAD) and each row's positions, which need not start at 0."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, 9, D_HEAD, generator=gen), torch.stack([torch.arange(9), torch.arange(9) + 20])


@pytest.mark.parametrize("fraction", [1.0, 0.5, 0.25])
def test_halves_rotate_as_gpt_neox_rotates_the_first_fraction(fraction):
    x, positions = heads()
    width, base = int(D_HEAD * fraction), 500.0
    frequency = 1.0 / base ** (torch.arange(0, width, 2, dtype=torch.float64) / width)
    angles = torch.cat([positions[..., None] * frequency] * 2, dim=-1)
    expected, _ = neox_rotation(x.double(), x.double(), angles.cos(), angles.sin())
    got = rotary(base=base, fraction=fraction).rotate(x, positions)
    torch.testing.assert_close(got, expected.float(), atol=2e-6, rtol=0)
    assert torch.equal(got[..., width:], x[..., width:]), "the dimensions past the fraction pass unrotated"


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_interleaved_rotates_adjacent_pairs_as_gpt_j(fraction):
    x, positions = heads(1)
    width = int(D_HEAD * fraction)
    sin, cos = create_sinusoidal_positions(64, width).double()[positions].chunk(2, dim=-1)
    expected = gptj_rotation(x[..., :width].transpose(1, 2).double(), sin, cos).transpose(1, 2)
    got = rotary(layout="interleaved", fraction=fraction).rotate(x, positions)
    torch.testing.assert_close(got[..., :width], expected.float(), atol=2e-6, rtol=0)
    assert torch.equal(got[..., width:], x[..., width:])


@pytest.mark.parametrize("settings", [{}, *Rotary.Settings.TRIED, {"fraction": 0.25, "layout": "interleaved"}])
def test_scores_depend_on_the_offset_alone(settings):
    part, (q, k) = rotary(**settings), torch.randn(2, 1, 1, 1, D_HEAD, generator=torch.Generator().manual_seed(2))
    def score(i: int, j: int) -> torch.Tensor:
        at = lambda x, p: part.rotate(x, torch.tensor([[p]]))
        return (at(q, i) * at(k, j)).sum()
    torch.testing.assert_close(score(5, 2), score(40, 37), atol=1e-5, rtol=0)
    assert not torch.allclose(score(5, 2), score(5, 4), atol=1e-3), "and the offset changes them"


def test_interleaved_is_halves_with_the_dimensions_permuted():
    """The two layouts are one function class: interleaved rotation of x is halves rotation of x
    with dimension 2i moved to i and 2i + 1 to i + width/2, moved back."""
    x, positions = heads(3)
    order = torch.cat([torch.arange(0, D_HEAD, 2), torch.arange(1, D_HEAD, 2)])
    halves = rotary().rotate(x[..., order], positions)
    torch.testing.assert_close(rotary(layout="interleaved").rotate(x, positions), halves[..., order.argsort()],
                               atol=0, rtol=0)


def test_a_fraction_that_rotates_no_pair_is_refused_naming_the_width():
    with pytest.raises(zoo.ConfigError, match=r"int\(0\.05 x d_head 16\) = 0 dimensions must be even and at least 2"):
        rotary(fraction=0.05)
    with pytest.raises(zoo.ConfigError, match="layout"):
        rotary(layout="pairs")
