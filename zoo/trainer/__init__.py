"""The shared trainer: `zoo.train(experiment)` and `zoo.load(checkpoint)`."""

from zoo.errors import Diverged
from zoo.trainer.checkpoint import load
from zoo.trainer.loop import Trainer, TrainResult, train

__all__ = ["Diverged", "TrainResult", "Trainer", "load", "train"]
