"""The training recipe's registered choices: optimizers and learning-rate schedules, each a class
with typed settings, registered by name as the model's parts are (zoo list, zoo show)."""

from zoo.optim import optimizers, schedules  # noqa: F401 (importing them registers them)
