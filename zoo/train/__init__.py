"""The shared trainer: `zoo.train(experiment)` and `zoo.load(checkpoint)`."""

from zoo.train.checkpoint import load
from zoo.train.loop import Diverged, TrainResult, Trainer, train

__all__ = ["Diverged", "TrainResult", "Trainer", "load", "train"]
