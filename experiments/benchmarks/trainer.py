"""The trainer's step against a bare loop, on the same model and batch, interleaved in one process.

    python experiments/benchmarks/trainer.py [--rounds 10] [--steps 10] [--smoke]     # prints JSON

The trainer runs its real loop (zoo.trainer.loop.Trainer._loop: the batch built on the host one
step ahead, the id check, masks, loss, backward, gradient clipping, optimizer, schedule, the
statistics kept on the device), with logging, evaluation and checkpoints out of the way. The
bare loop is forward, loss, backward and optimizer step on a copy of the same model with the same
optimizer settings, on one fixed batch of the same task. The experiment is the main job's
(`zoo train` with no file). Target: the trainer at most 1.05x the bare loop's time per step.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import tempfile

import torch
import torch.nn.functional as F
from common import emit, interleaved, machine, say

from zoo.specs.experiment import ExperimentSpec, validate_experiment
from zoo.trainer.guards import StopSignals
from zoo.trainer.loop import Trainer
from zoo.trainer.progress import ProgressBar

NEVER = 10**9


def make_trainer(out_dir: str, smoke: bool) -> Trainer:
    data = ExperimentSpec().model_dump(mode="json")
    data["train"].update(steps=NEVER, log_every=NEVER, eval_every=NEVER, checkpoint_every=NEVER, out_dir=out_dir,
                         eval_size=8)
    data["wandb"].update(mode="disabled", dir=out_dir)
    if smoke:
        data["model"].update(d_model=32, d_ff=64)
        data["train"].update(batch_size=16)
    return Trainer(validate_experiment(data))


def bare_loop(trainer: Trainer):
    """Forward, loss, backward, optimizer step: a copy of the trainer's model and optimizer
    settings on the task's first batch, on the trainer's device and under its autocast, nothing else."""
    model = copy.deepcopy(trainer.model).train()
    o = trainer.experiment.train.optimizer
    optimizer = torch.optim.Adam(model.parameters(), lr=o.lr, betas=o.betas, eps=o.eps)
    src, tgt = (rows.to(trainer.device) for rows in trainer.task.train_batch(1, trainer.experiment.train.batch_size))
    pad = trainer.spec.pad_id
    tokens = int((tgt[:, 1:] != pad).sum())
    dtype = trainer.amp_dtype

    def step() -> None:
        with torch.autocast(trainer.device.type, dtype) if dtype else contextlib.nullcontext():
            logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=pad, reduction="sum") / tokens
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10, help="steps per round of each contender")
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one round: checks the script")
    args = parser.parse_args(argv)
    rounds, steps = (1, 2) if args.smoke else (args.rounds, args.steps)
    with tempfile.TemporaryDirectory() as out_dir:
        trainer = make_trainer(out_dir, args.smoke)
        bar, stop = ProgressBar(NEVER, 0, enabled=False), StopSignals()
        bare = bare_loop(trainer)

        def trainer_steps() -> None:
            trainer._loop(bar, stop, last=trainer.step + steps)

        def bare_steps() -> None:
            for _ in range(steps):
                bare()

        try:
            seconds = interleaved({"trainer": trainer_steps, "bare loop": bare_steps}, rounds)
        finally:
            trainer.tracker.finish(failed=False)
            trainer.folder.release()
    ratio = seconds["trainer"] / seconds["bare loop"]
    say(f"trainer / bare loop time per step: {ratio:.3f}x")
    result = {"benchmark": "trainer", "smoke": args.smoke, "machine": machine(),
              "device": str(trainer.device),
              "model": trainer.spec.name, "d_model": trainer.spec.d_model, "batch_size": trainer.experiment.train.batch_size,
              "ms_per_step": {k: round(v / steps * 1e3, 2) for k, v in seconds.items()},
              "ratio_trainer_to_bare": round(ratio, 3), "target": 1.05, "met": ratio <= 1.05}
    emit(result)
    return result


if __name__ == "__main__":
    main()
