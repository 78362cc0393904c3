"""Ladders that train each size on tokens in proportion to its parameters, as Chinchilla's and
Kaplan et al.'s ladders do, rather than one step count for every size: at a fixed step count the
small models see many tokens per parameter and the large ones few, so a law fitted across them
mixes model size with training length. A cell's train.steps follows from its model:

    steps = ceil(ratio x N / labels per step)

N is the model's parameters without its token and position tables and output projection (Kaplan
et al.'s non-embedding count: it does not wait on the vocabulary, which a learned tokenizer sets
only once it has read the corpus). A step's labels must be known before the run, so the task packs
its rows (`pack: L`, each row L tokens of which L - 1 are scored)."""

from __future__ import annotations

import math
from typing import Any

from zoo.errors import ConfigError
from zoo.specs.experiment import ExperimentSpec

STAND_IN_VOCABULARY = 1000
"""The vocabulary the count is made with: the non-embedding count does not depend on it."""


def labels_per_step(experiment: ExperimentSpec) -> int:
    """The labels one optimizer step scores: rows x (pack - 1), per micro-batch times accumulate."""
    pack, t = experiment.task.get("pack"), experiment.train
    if not isinstance(pack, int):  # a packing task has no token batches (ExperimentSpec refuses them)
        raise ConfigError(f"tokens_per_parameter: the steps follow from the labels a step scores, known before the "
                          f"run only for rows packed to one length (task.pack); task {experiment.task['name']!r} "
                          "gives no task.pack")
    return t.batch_size * t.accumulate * (pack - 1)


def ratio_steps(experiment: ExperimentSpec, ratio: float) -> int:
    """The steps that train `ratio` labels per non-embedding parameter of the experiment's model."""
    from zoo.model.size_checks import non_embedding_parameters

    parameters = non_embedding_parameters(experiment.model.sized(STAND_IN_VOCABULARY, STAND_IN_VOCABULARY))
    return max(1, math.ceil(ratio * parameters / labels_per_step(experiment)))


def check_steps_unset(written: dict[str, Any], where: str) -> None:
    """The ratio sets each cell's train.steps: a step count written in the base or a cell's values
    would be overruled in silence, so it is refused by name."""
    if "steps" in (written.get("train") or {}):
        raise ConfigError(f"tokens_per_parameter sets each cell's train.steps from its model; {where} sets "
                          "train.steps too: remove it (or remove tokens_per_parameter to train a fixed step count)")
