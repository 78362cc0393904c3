"""A training step's model FLOPs by formula (zoo.model.flops) against torch's FLOP counter, for
every variant of the grid and every preset at a small size: within 5%."""

from contextlib import nullcontext

import pytest
import torch
from conftest import GRID, padded_batch, tiny
from torch.utils import flop_counter

import zoo
from zoo.model.flops import stack_shapes, training_flops, uncounted
from zoo.model.kinds import model_class
from zoo.specs.catalog import _presets
from zoo.specs.experiment import TrainSpec
from zoo.trainer.feed import Batch
from zoo.trainer.objective import batch_loss_sum

ATEN = torch.ops.aten


def _as_many_heads_as(query, *shapes):
    """Key and value shapes with the query's head count: grouped heads cost what repeated ones do,
    and torch before 2.13 refuses fewer key/value heads in its formula."""
    return [torch.Size((shape[0], query[1], *shape[2:])) for shape in shapes]


CPU_SDPA = {
    ATEN._scaled_dot_product_flash_attention_for_cpu:
        lambda q, k, v, *args, out_shape=None, **kwargs: flop_counter.sdpa_flop_count(q, *_as_many_heads_as(q, k, v)),
    ATEN._scaled_dot_product_flash_attention_for_cpu_backward:
        lambda grad, q, k, v, *args, out_shape=None, **kwargs: flop_counter.sdpa_backward_flop_count(
            grad, q, *_as_many_heads_as(q, k, v)),
}
"""torch's own formulas for its attention kernels, given to the CPU's, which its counter leaves at 0."""


def counted_and_formula(spec: zoo.ModelSpec) -> tuple[int, int]:
    """torch's count of a training step (forward, loss and backward, as the trainer runs them) on
    rows of different lengths, and the formula's for the same inputs."""
    model, kind = zoo.build(spec, seed=0).train(), model_class(spec)
    src = padded_batch([9, 12, 7], spec.src_vocab_size, spec=spec)
    tgt = padded_batch([9, 12, 7] if kind.trains_on == "positions" else [5, 8, 8], spec.tgt_vocab_size, seed=1,
                       spec=spec)
    inputs, labels = kind.frame(spec, src, tgt)
    batch = Batch(inputs, kind.input_masks(spec, inputs), labels, int((labels != spec.pad_id).sum()))
    with flop_counter.FlopCounterMode(display=False, custom_mapping=CPU_SDPA) as counter:
        batch_loss_sum(model, model.generator, batch, spec.pad_id, TrainSpec(), nullcontext()).backward()
    return counter.get_total_flops(), training_flops(spec, stack_shapes(list(kind.reads), inputs))


def test_a_training_step_counts_three_forwards_of_the_stated_products():
    """One post-norm encoder-decoder layer each side by hand: d 16, 4 heads of 4, d_ff 32, rows of
    12 source and 7 target positions, a vocabulary of 19."""
    spec = tiny("post.sinusoidal.fused.relu", n_kv_heads=4, n_decoder_layers=1)
    rows, s, t, d, ff, v = 3, 12, 7, 16, 32, 19
    encoder = 2 * rows * s * d * 4 * d + 2 * 2 * rows * 4 * s * s * 4 + 2 * rows * s * 2 * d * ff
    decoder = (2 * rows * t * d * 4 * d + 2 * 2 * rows * 4 * t * t * 4
               + 2 * rows * d * (2 * d * t + 2 * d * s) + 2 * 2 * rows * 4 * t * s * 4 + 2 * rows * t * 2 * d * ff)
    assert training_flops(spec, {"encoder": (rows, s), "decoder": (rows, t)}) == 3 * (encoder + decoder + 2 * rows * t * d * v)


@pytest.mark.parametrize("name", GRID)
def test_the_formula_is_torchs_count_within_5_percent_for_every_variant(name):
    counted, formula = counted_and_formula(tiny(name))
    assert formula == pytest.approx(counted, rel=0.05)


@pytest.mark.parametrize("preset", sorted(_presets()))
def test_the_formula_is_torchs_count_within_5_percent_for_every_preset(preset):
    """Presets bring what the grid does not: output transforms (BERT), narrow embeddings (ELECTRA),
    tied and factorized tables, grouped key/value heads, soft caps."""
    fields = dict(vocab_size=40, d_model=32, n_heads=4, n_kv_heads=2, d_ff=64, n_encoder_layers=2, n_decoder_layers=2,
                  dropout=0.0, max_len=64)
    counted, formula = counted_and_formula(zoo.spec(preset, **fields))
    assert formula == pytest.approx(counted, rel=0.05)


def test_a_part_that_does_not_declare_its_flops_leaves_a_run_uncounted(monkeypatch):
    from zoo.specs import hooks

    spec = tiny("pre.sinusoidal.fused.swiglu")
    monkeypatch.setattr(hooks, "implements", lambda part, protocol: protocol is not hooks.CountsFlops)
    monkeypatch.setattr("zoo.model.flops.implements", hooks.implements)
    assert uncounted(spec) == ["swiglu"]
    assert training_flops(spec, {"encoder": (2, 5), "decoder": (2, 5)}) is None
