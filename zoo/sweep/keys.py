"""What a sweep's grid, rows and tuned settings may name: dotted experiment fields the sweep does
not set itself, one setting per key; and which metrics a tuned sweep chooses and compares on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from zoo.errors import ConfigError
from zoo.metric_names import CURVE, KEPT, VALIDATION, MetricName
from zoo.metrics import by_comparison
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.switches import one_setting

SWEEP_OWNED = ("train.out_dir", "wandb.name", "wandb.group", "wandb.job_type", "wandb.dir", "wandb.config")
"""Experiment fields that cell_experiment sets for every cell: a grid over one would be overridden."""


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


def kept_metrics(final: list[str], train: Any) -> list[str]:
    """A run's final metrics that train.metrics leaves scored, then those of each model its training
    keeps (train.keep_best, train.average_last), scored on every split: what a sweep may compare on."""
    final = [name for name in final if train.metrics.get(MetricName.parse(name).metric) is not False]
    kept = [prefix for prefix, on in zip(KEPT, (train.keep_best, train.average_last), strict=True) if on]
    return [*final, *(f"{prefix}/{name}" for prefix in kept for name in final if not name.startswith(CURVE))]


def rate_keys(tune: Mapping[str, Any]) -> list[str]:
    """The tuned keys that are learning rates (`train.optimizer.lr`, or any key ending in `.lr`)."""
    return [key for key in tune if key.rsplit(".", 1)[-1] == "lr"]


def check_comparisons_metric(metric: str, tune: Mapping[str, Any], confirm_seeds: Sequence[Any]) -> None:
    """A metric zoo compare computes from a tuned rate's runs (lr_sensitivity) needs one tuned
    rate and nothing else tuned, and every seed's runs at every rate: a confirmation trains the
    chosen rate alone."""
    if not by_comparison(metric):
        return
    if len(tune) != 1 or len(rate_keys(tune)) != 1:
        raise ConfigError(f"metric {metric}: computed from each variant's runs at every tuned learning rate, so tune: "
                          f"names one learning rate and nothing else; it names {', '.join(tune) or 'none'}")
    if confirm_seeds:
        raise ConfigError(f"confirm_seeds: metric {metric} is computed over every tuned rate, which a confirmation "
                          "does not train (it trains the chosen rate alone); train those seeds as seeds")


def check_tuned_metrics(metric: MetricName, choose_on: MetricName) -> None:
    """A tuned sweep chooses on the validation split and compares on a split the choice never saw."""
    if not metric.held_out and not by_comparison(metric):  # a comparison's metric reads every rate: nothing chose
        raise ConfigError(f"metric {str(metric)!r}: a tuned sweep compares its variants on a held-out split that the "
                          "choice never saw (test/..., long/...), not one that training evaluates; give the task a "
                          "test split (task.test_size, or test_split for a corpus) and set metric: test/NAME")
    if not choose_on.validation:
        raise ConfigError(f"choose_on {str(choose_on)!r}: a tuned value is chosen on the validation split "
                          f"({' or '.join(p + '/...' for p in VALIDATION)}), never on the split it is compared on")
