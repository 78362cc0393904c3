"""Gradient accumulation (train.accumulate): k micro-batches give the gradient of their
concatenation, with padding, with token batches and for every model kind; a run with k micro-
batches of b rows trains as a run with one batch of k x b rows does."""

from contextlib import nullcontext

import pytest
import torch

from trainkit import text_task, tiny_experiment, write_corpus
from zoo.specs.experiment import validate_experiment
from zoo.trainer.loop import Trainer
from zoo.trainer.objective import batch_loss_sum

VARYING = {"name": "reverse", "min_len": 2, "max_len": 30}
"""Strings of very different lengths: every micro-batch is padded to another width."""
CASES = {
    "encoder_decoder, padded rows": ({}, VARYING, {"batch_size": 6}),
    "decoder, padded rows": ({"kind": "decoder"}, VARYING, {"batch_size": 6}),
    "encoder_decoder, token batches": ({}, VARYING, {"batch_tokens": 120}),
    "encoder, masked tokens": ({"kind": "encoder"}, "mlm", {"batch_size": 6}),
}


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
PRECISIONS = {"cpu fp32": ("cpu", "fp32", 1e-4), "cuda fp32": ("cuda", "fp32", 1e-4),
              "cuda bf16": ("cuda", "bf16", 3e-2)}
"""Where the step runs, its precision, and the relative gradient error allowed: bf16 autocast
rounds each micro-batch's products otherwise than the whole batch's."""


def trainer_for(tmp_path, model: dict, task, train: dict) -> Trainer:
    if task == "mlm":
        task = text_task("mlm", write_corpus(tmp_path / "corpus"))
    experiment = tiny_experiment(tmp_path, model=model, task=task, train={"accumulate": 4, "grad_clip": None, **train})
    return Trainer(validate_experiment(experiment))


@pytest.mark.parametrize("where", [pytest.param(key, marks=CUDA if key.startswith("cuda") else ())
                                   for key in PRECISIONS])
@pytest.mark.parametrize("case", list(CASES))
def test_micro_batches_give_the_gradient_of_their_concatenation(tmp_path, case, where):
    model, task, train = CASES[case]
    device, precision, tolerance = PRECISIONS[where]
    trainer = trainer_for(tmp_path, model, task, {**train, "device": device, "precision": precision})
    try:
        whole = [p.detach().clone() for p in trainer.model.parameters()]
        micro = trainer.feed.take(1)
        assert len(micro) == 4
        if "padded" in case:  # token batches hold sentences of one length where the task has enough of them
            assert len({b.inputs[-1].size(1) for b in micro}) > 1, "micro-batches of one width test little"
        trainer.train_step(1, micro)
        accumulated = [p.grad.clone() for p in trainer.model.parameters()]

        with torch.no_grad():
            for p, start in zip(trainer.model.parameters(), whole, strict=True):
                p.copy_(start)
        src, tgt = trainer.feed.global_batch(1)
        inputs, labels = trainer.feed.kind.frame(trainer.spec, src, tgt)
        masks = trainer.feed.kind.input_masks(trainer.spec, inputs)
        moved = [tuple(None if t is None else t.to(trainer.device) for t in group) for group in (inputs, masks)]
        one = type(micro[0])(*moved, labels.to(trainer.device), micro[0].tokens)
        assert one.tokens == int((labels != trainer.spec.pad_id).sum())
        trainer.model.zero_grad(set_to_none=True)
        autocast = torch.autocast(device, torch.bfloat16) if precision == "bf16" else nullcontext()
        loss = batch_loss_sum(trainer.model, trainer.model.generator, one, trainer.spec.pad_id, trainer.experiment.train,
                              autocast)
        (loss / one.tokens).backward()
        for (name, p), grad in zip(trainer.model.named_parameters(), accumulated, strict=True):
            if p.grad is not None:
                if precision == "fp32":
                    assert torch.allclose(grad, p.grad, rtol=tolerance, atol=1e-7), name
                else:  # rounding differs element by element: the whole gradient's relative error
                    assert (grad - p.grad).norm() <= tolerance * p.grad.norm() + 1e-6, name
        assert trainer.train_step.window.mean_loss() == pytest.approx(loss.item() / one.tokens, rel=max(1e-5, tolerance))
    finally:
        trainer.tracker.finish(failed=False)
        trainer.folder.release()


@pytest.mark.slow
def test_a_run_of_micro_batches_trains_as_a_run_of_their_whole_batch(tmp_path):
    import zoo

    def losses(name: str, **train) -> list[float]:
        run = zoo.train(tiny_experiment(tmp_path / name, task=VARYING, train={"steps": 20, "log_every": 2,
                                                                              "eval_every": 20, **train}))
        return [row["train/loss"] for row in run.history if "train/loss" in row]

    whole, accumulated = losses("whole", batch_size=32), losses("micro", batch_size=8, accumulate=4)
    assert len(whole) == 10 and accumulated == pytest.approx(whole, rel=1e-4)
    assert losses("other", batch_size=8) != pytest.approx(whole, rel=1e-2), "a quarter of the batch trains otherwise"


def test_the_usual_names_of_accumulation_point_to_it():
    import zoo

    for name in ("gradient_accumulation_steps", "update_freq", "accumulate_grad_batches"):
        with pytest.raises(zoo.ConfigError, match=rf"train: unknown field '{name}' \(did you mean 'accumulate'\?\)"):
            validate_experiment({"train": {name: 4}})
