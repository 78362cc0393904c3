"""The training step reads nothing back from the device, for every part of every axis, and a
divergence is still caught by the next log, before any checkpoint of it.

On CPU a read-back costs nothing, so it is detected by what it is: a dispatch of an operator that
needs a tensor's values on the host (`.item()`, `bool()`, `nonzero`, boolean indexing). On CUDA
each of these waits for the GPU (tests/test_gpu.py checks the same with CUDA's sync debug mode).
"""

import pytest
import torch
from conftest import PART_IDS, PARTS
from torch.utils._python_dispatch import TorchDispatchMode

from trainkit import diverged_run, tiny_experiment
from zoo.specs.experiment import validate_experiment
from zoo.trainer.loop import Trainer

aten = torch.ops.aten
READ_BACKS = {aten._local_scalar_dense, aten.nonzero, aten.masked_select, aten.is_nonzero, aten.equal,
              aten._unique2, aten.unique_consecutive, aten.unique_dim}


class ReadBacks(TorchDispatchMode):
    """Records every operator that brings a tensor's values to the host, except on `host_tensors`
    (the optimizer's step counters, which torch keeps on the host for this reason)."""

    def __init__(self, host_tensors=()):
        super().__init__()
        self.host = {id(t) for t in host_tensors}
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in READ_BACKS and not any(id(a) in self.host for a in args):
            self.seen.append(str(func))
        if func.overloadpacket in (aten.index, aten.index_put) and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1] if i is not None):
            self.seen.append(f"{func} by a boolean mask")  # its size is the mask's count: a read-back
        return func(*args, **(kwargs or {}))


def test_the_detector_sees_a_read_back():
    with ReadBacks() as mode:
        x = torch.ones(3)
        float(x.sum())
        bool(x.max() > 0)
        x[x > 0]
    assert mode.seen == ["aten._local_scalar_dense.default", "aten._local_scalar_dense.default",
                         "aten.index.Tensor by a boolean mask"]


@pytest.mark.parametrize("axis, value", PARTS, ids=PART_IDS)
def test_a_training_step_reads_nothing_back(tmp_path, axis, value):
    model = {"d_model": 16, "n_heads": 4, "n_kv_heads": 2, "d_ff": 32, "n_decoder_layers": 2, "dropout": 0.1,
             axis: value}
    experiment = tiny_experiment(tmp_path, model=model, train={"grad_clip": 1.0, "label_smoothing": 0.1})
    trainer = Trainer(validate_experiment(experiment))
    try:
        trainer._train_step(1)  # the optimizer's state is made at its first step
        for step in (2, 3, 4):
            batch = trainer.feed.take(step)
            steps = [state["step"] for state in trainer.train_step.optimizer.state.values()]
            with ReadBacks(steps) as mode:
                trainer.train_step(step, batch)
            assert mode.seen == [], f"step {step} read values back: {mode.seen}"
        trainer.train_step.window.settle()
    finally:
        trainer.tracker.finish(failed=False)
        trainer.folder.release()


def test_divergence_is_caught_by_the_next_log_and_no_checkpoint_holds_it(tmp_path):
    """Steps are checked at logs (every 20) and before checkpoints (every 5), not at every step:
    the error names the first step that was not finite, and the run stopped by the next check."""
    message = r"training diverged at step (\d+): the loss or the gradient is not finite"
    _, failed, run_dir, result = diverged_run(tmp_path, message, log_every=20, checkpoint_every=5)
    assert result["status"] == "diverged" and result["diverged_at"] == failed
    assert failed <= result["steps"] < failed + 5  # stopped at the first check after it
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True) if (run_dir / "checkpoint.pt").exists() else None
    if saved is not None:
        assert saved["progress"]["step"] < failed
        assert all(torch.isfinite(t).all() for t in saved["model"].values())
