"""What a sweep's grid, rows and tuned settings may name: dotted experiment fields the sweep does
not set itself, one setting per key; and which metrics a tuned sweep chooses and compares on."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from zoo.errors import ConfigError
from zoo.metrics import CURVE
from zoo.records import KEPT
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.switches import one_setting

SWEEP_OWNED = ("train.out_dir", "wandb.name", "wandb.group", "wandb.job_type", "wandb.dir", "wandb.config")
"""Experiment fields that cell_experiment sets for every cell: a grid over one would be overridden."""
VALIDATION = ("eval", CURVE)
"""Metric prefixes scored on the validation split, evaluated during training: what may choose."""
NOT_HELD_OUT = (*VALIDATION, "train")
"""Metric prefixes a tuned sweep may not compare on: the choice saw them (or they are not held out)."""


def check_field(key: str, where: str) -> None:
    """A key a grid or a row may set: a dotted experiment field that the sweep does not own."""
    if key.split(".")[0] not in ExperimentSpec.model_fields or "." not in key:
        raise ConfigError(f"{where} is not a dotted experiment field (model.*, task.*, train.*, wandb.*)")
    if key == "train.seed":
        raise ConfigError(f"{where}: list seeds under `seeds`, not in the grid")
    owned = next((field for field in SWEEP_OWNED if key == field or key.startswith(field + ".")), None)
    if owned is not None:
        raise ConfigError(f"{where}: the sweep sets {owned} of every cell itself (its folder, W&B group and names); "
                          "choose them with the sweep's name and out_dir")


def distinct(values: list[Any]) -> bool:
    """Whether no two values are equal (1 and 1.0 are one learning rate, trained twice otherwise; a
    truth value is never a number, though True == 1)."""
    return all(a != b or isinstance(a, bool) != isinstance(b, bool) for i, a in enumerate(values) for b in values[i + 1:])


def twice_set(keys: list[str]) -> tuple[str, str] | None:
    """The first two of `keys` that set one setting, or None."""
    return next(((a, b) for i, a in enumerate(keys) for b in keys[i + 1:] if one_setting(a, b)), None)


def grid_clash(key: str, grid_keys: Iterable[str]) -> str | None:
    """How a key sets what a grid key sets ("also a grid key", or "the grid key 'x''s setting"), or None."""
    clash = next((g for g in grid_keys if g == key or one_setting(key, g)), None)
    if clash is None:
        return None
    return "also a grid key" if clash == key else f"the grid key {clash!r}'s setting"


def check_tune(tune: dict[str, list[Any]], grid: dict[str, list[Any]], named: dict[str, dict[str, Any]]) -> None:
    """A tuned key is a field that no grid key, row, size or other tuned key sets (`named`: "row 'x'"
    -> its changes), with two or more distinct values to choose from."""
    twice = twice_set(list(tune))
    if twice is not None:
        raise ConfigError(f"tune keys {twice[0]!r} and {twice[1]!r} set one setting (a switch's flat key and its "
                          "group's, or a group and a field of it): its cells would train what their names do not say; "
                          "give one of them")
    for key, values in tune.items():
        check_field(key, f"tune key {key!r}")
        also = grid_clash(key, grid)
        if also is not None:
            raise ConfigError(f"tune key {key!r} is {also}: a field is compared (grid) or tuned for each variant "
                              "(tune), not both")
        for where, changes in named.items():
            if any(k == key or one_setting(key, k) for k in changes):
                raise ConfigError(f"tune key {key!r} is set by {where}: it fixes what tuning would choose")
        if not isinstance(values, list) or len(values) < 2 or not distinct(values):
            raise ConfigError(f"tune key {key!r} needs two or more distinct values to choose from, got {values!r}; "
                              "a single value belongs in the base experiment")


def of_model(metric: str) -> tuple[str, str]:
    """(the kept model's prefix with its slash, or "" for the last model; the split's metric):
    `best_checkpoint/test/bleu` is ("best_checkpoint/", "test/bleu")."""
    group, _, rest = metric.partition("/")
    return (f"{group}/", rest) if group in KEPT else ("", metric)


def held_out(metric: str) -> bool:
    """Whether a metric is scored on a split the training never evaluated (test/*, long/*)."""
    split_metric = of_model(metric)[1]
    return split_metric.split("/")[0] not in NOT_HELD_OUT and "/" in split_metric


def validation_counterpart(metric: str) -> str:
    """The validation metric that chooses for a held-out one, of the same model: eval/X for test/X,
    best_checkpoint/eval/X for best_checkpoint/test/X."""
    return f"{of_model(metric)[0]}eval/{metric.rsplit('/', 1)[-1]}"


def kept_metrics(final: list[str], train: Any) -> list[str]:
    """A run's final metrics, then those of each model its training keeps (train.keep_best,
    train.average_last), scored on every split: what a sweep may compare on."""
    kept = [prefix for prefix, on in zip(KEPT, (train.keep_best, train.average_last), strict=True) if on]
    return [*final, *(f"{prefix}/{name}" for prefix in kept for name in final if not name.startswith(CURVE))]


def check_tuned_metrics(metric: str, choose_on: str) -> None:
    """A tuned sweep chooses on the validation split and compares on a split the choice never saw."""
    if not held_out(metric):
        raise ConfigError(f"metric {metric!r}: a tuned sweep compares its variants on a held-out split that the "
                          "choice never saw (test/..., long/...), not one that training evaluates; give the task a "
                          "test split (task.test_size, or test_split for a corpus) and set metric: test/NAME")
    if of_model(choose_on)[1].split("/")[0] not in VALIDATION:
        raise ConfigError(f"choose_on {choose_on!r}: a tuned value is chosen on the validation split "
                          f"({' or '.join(p + '/...' for p in VALIDATION)}), never on the split it is compared on")
