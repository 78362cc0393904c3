"""train.loss_chunk: the generator and the loss a chunk of positions at a time, recomputed in the
backward pass. The same loss and gradients as the whole logits at once, for every kind and every
generator feature, while the tensors kept for the backward pass shrink by the logits' size."""

import pytest
import torch
from conftest import padded_batch, tiny

import zoo
from trainkit import run_dir_of, tiny_experiment
from zoo.model.kinds import model_class
from zoo.specs.registries import kinds
from zoo.trainer.objective import chunked_loss_sum, training_loss_sum

GENERATORS = {
    "plain": {},
    "tied and softcapped": {"tie_embeddings": True, "logit_softcap": 5.0},
    "transformed, scaled, fixed bias": {"output_transform": True, "scale_output": True, "output_bias": "fixed"},
    "factorized and tied": {"embedding_dim": 8, "tie_embeddings": True},
}


def batch_of(model):
    spec = model.spec
    src, tgt = padded_batch([6, 3, 5], 19, seed=0, spec=spec), padded_batch([4, 6, 2], 19, seed=1, spec=spec)
    if spec.kind == "encoder":  # masked-token prediction: a label at some positions of the source
        tgt = torch.where(torch.arange(src.size(1)) % 2 == 0, src, spec.pad_id)
    inputs, labels = model_class(spec).frame(spec, src, tgt)
    return inputs, model_class(spec).input_masks(spec, inputs), labels


def loss_and_grads(model, chunk, **loss):
    model.zero_grad(set_to_none=True)
    inputs, masks, labels = batch_of(model)
    if chunk is None:
        value = training_loss_sum(model(*inputs, masks), labels, model.spec.pad_id, **loss)
    else:
        value = chunked_loss_sum(model(*inputs, masks, head=False), model.generator, labels, model.spec.pad_id, chunk,
                                 **loss)
    value.backward()
    return value.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("kind", kinds())
@pytest.mark.parametrize("generator", list(GENERATORS))
def test_chunks_give_the_loss_and_gradients_of_the_whole_logits(kind, generator):
    model = zoo.build(tiny("pre.rope.fused.gelu", kind=kind, **GENERATORS[generator]), seed=0).train()
    loss = {"label_smoothing": 0.1, "z_loss": 1e-3}
    whole, expected = loss_and_grads(model, None, **loss)
    for chunk in (1, 5, 1000):
        value, grads = loss_and_grads(model, chunk, **loss)
        torch.testing.assert_close(value, whole, rtol=1e-6, atol=1e-6)
        assert grads.keys() == expected.keys()
        for name, grad in grads.items():  # float rounding of sums taken in another order: relative to the scale
            assert (grad - expected[name]).abs().max() <= 1e-5 * expected[name].abs().max(), name


def saved_bytes(compute) -> int:
    """Bytes of the tensors autograd keeps for the backward pass while `compute` runs."""
    kept = []

    def pack(tensor):
        kept.append(tensor.numel() * tensor.element_size())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        compute()
    return sum(kept)


def test_the_full_logits_are_never_kept_for_the_backward_pass():
    model = zoo.build(tiny("pre.sinusoidal.fused.relu", vocab_size=4000), seed=0).train()
    inputs, masks, labels = batch_of(model)
    hidden = model(*inputs, masks, head=False).detach().requires_grad_()
    logits_bytes = labels.numel() * 4000 * 4
    whole = saved_bytes(lambda: training_loss_sum(model.generator(hidden), labels, 0))
    chunked = saved_bytes(lambda: chunked_loss_sum(hidden, model.generator, labels, 0, chunk=4))
    assert whole >= logits_bytes > 20 * chunked


def test_a_chunked_run_trains_as_the_whole_loss_trains_in_a_folder_of_its_own(tmp_path):
    train = {"steps": 30, "eval_every": 30, "log_every": 10, "device": "cpu"}
    whole = zoo.train(tiny_experiment(tmp_path / "whole", train=train))
    experiment = tiny_experiment(tmp_path / "chunked", train={**train, "loss_chunk": 16})
    chunked = zoo.train(experiment)
    assert [row["train/loss"] for row in chunked.history if "train/loss" in row] == pytest.approx(
        [row["train/loss"] for row in whole.history if "train/loss" in row], rel=1e-5)
    assert chunked.metrics["eval/loss"] == pytest.approx(whole.metrics["eval/loss"], rel=1e-5)
    default = run_dir_of(tiny_experiment(tmp_path / "chunked", train=train)).name
    assert run_dir_of(tiny_experiment(tmp_path, train={**train, "loss_chunk": None})).name == default
    assert run_dir_of(experiment).name != default
