"""The run's checkpoint as the trainer writes it: everything a resume needs to continue bitwise."""

from __future__ import annotations

from typing import Any

from zoo.errors import Diverged
from zoo.records import CheckpointProgress
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.model_spec import ModelSpec
from zoo.tasks.base import Task
from zoo.trainer.checkpoint import save_checkpoint
from zoo.trainer.distributed import Distributed
from zoo.trainer.guards import finite_weights
from zoo.trainer.run_folder import RunFolder
from zoo.trainer.step import TrainStep


class Checkpointer:
    def __init__(self, folder: RunFolder, experiment: ExperimentSpec, spec: ModelSpec, task: Task,
                 dist: Distributed):
        self.path, self.folder, self.experiment, self.spec, self.task, self.dist = \
            folder.checkpoint, folder, experiment, spec, task, dist

    def save(self, train_step: TrainStep, progress: CheckpointProgress, wandb_id: str | None) -> None:
        """Only finite weights are written (checked on every rank, whose weights are the same), by
        rank 0, whole or not at all."""
        if not finite_weights(train_step.model):
            raise Diverged(f"step {progress.step}: the weights are no longer finite")
        if not self.dist.is_main:
            return
        state: dict[str, Any] = {
            "experiment": self.experiment.model_dump(mode="json"), "spec": self.spec.model_dump(),
            **train_step.state(), "progress": progress.model_dump(), "task": self.task.state(),
            "wandb_id": wandb_id, "data": self.folder.data,
        }
        save_checkpoint(self.path, state)
