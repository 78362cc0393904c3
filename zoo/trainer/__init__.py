"""The shared trainer: `zoo.train(experiment)` and `zoo.load(checkpoint)`."""

from zoo.trainer.checkpoint import load
from zoo.errors import Diverged
from zoo.trainer.loop import TrainResult, Trainer, train

__all__ = ["Diverged", "TrainResult", "Trainer", "load", "train"]
