"""Bad input fails at the boundary with a message that names the input, not deep inside torch."""

import pytest
import torch
from conftest import TINY, padded_batch

import zoo


@pytest.fixture(scope="module")
def model():
    return zoo.build("pre.learned.fused.relu", **TINY).eval()


GOOD = padded_batch([4, 3], 19)


@pytest.mark.parametrize(
    "src, tgt, error, text",
    [
        (torch.tensor([[3, 19]]), GOOD[:1], ValueError, "src holds id 19, outside the vocabulary of size 19 (valid ids 0..18)"),
        (GOOD[:1], torch.tensor([[1, -1]]), ValueError, "tgt holds id -1, outside the vocabulary of size 19"),
        (GOOD.int(), GOOD, TypeError,
         "src must hold int64 token ids of shape (batch, length); got dtype torch.int32 with shape (2, 4)"),
        (GOOD, GOOD.float(), TypeError, "tgt must hold int64 token ids"),
        (GOOD[0], GOOD, ValueError, "src must have shape (batch, length) with length >= 1; got shape (4,)"),
        (GOOD, GOOD[:, :0], ValueError, "tgt must have shape (batch, length) with length >= 1; got shape (2, 0)"),
        ([[3, 4]], GOOD, TypeError, "src must be a torch.Tensor of int64 token ids, got list"),
        (GOOD, GOOD[:1], ValueError, "src and tgt must have the same batch size; got src (2, 4) and tgt (1, 4)"),
    ],
)
def test_bad_ids_are_named(model, src, tgt, error, text):
    with pytest.raises(error) as err:
        model(src, tgt)
    assert text in str(err.value)


def test_learned_positions_refuse_sequences_past_max_len(model):
    too_long = torch.full((1, TINY["max_len"] + 1), 5)
    with pytest.raises(ValueError, match=f"longer than max_len {TINY['max_len']}"):
        model(too_long, GOOD[:1])
    with pytest.raises(ValueError, match=f"41 positions is longer than max_len {TINY['max_len']}"):
        model.generate(GOOD, max_new_tokens=TINY["max_len"])
    assert model.generate(GOOD, max_new_tokens=TINY["max_len"] - 1).size(1) <= TINY["max_len"]


def test_sinusoidal_positions_work_past_max_len():
    model = zoo.build("pre.sinusoidal.fused.relu", **TINY).eval()
    long = torch.randint(3, 19, (1, 3 * TINY["max_len"]))
    logits = model(long, long)
    assert logits.shape == (1, 3 * TINY["max_len"], 19) and torch.isfinite(logits).all()


def test_decode_checks_the_memory(model):
    memory = model.encode(GOOD)
    assert memory.shape == (2, 4, TINY["d_model"])
    torch.testing.assert_close(model.decode(GOOD, memory, GOOD), model(GOOD, GOOD))
    with pytest.raises(ValueError, match=r"memory must have shape \(2, 3, 16\) to match src \(2, 3\); got \(2, 4, 16\)"):
        model.decode(GOOD, memory, GOOD[:, :3])
