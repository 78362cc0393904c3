"""What differs between a recorded run and the same cell trained again: the experiment, the
environment that decides the rounding, the final metrics and the early losses."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from zoo.metric_names import MetricName
from zoo.provenance import ROUNDING
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.identity import changes_between, flatten

LOSSES = ("train/loss", "eval/loss")


def timing(key: str) -> bool:
    """Whether a logged value is a timing (`train/wall_s`, `train/tokens_per_s`: seconds and rates),
    which differs between runs of the same computation."""
    return key.endswith("_s")


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def relative_difference(old: float, new: float) -> float:
    if same(old, new):
        return 0.0
    if not (math.isfinite(old) and math.isfinite(new)):
        return math.inf
    return abs(new - old) / max(abs(old), 1e-12)


def logged_losses(history: list[dict[str, float]], until: float = math.inf) -> dict[tuple[int, str], float]:
    return {(int(row["train/step"]), key): row[key] for row in history for key in LOSSES
            if key in row and "train/step" in row and row["train/step"] <= until}


WHERE_AND_HOW = ("train.out_dir", "train.device", "task.data_dir", "task.tokenizer_dir", "task.path",
                 "train.downstream.include_path")
"""Fields of a recorded experiment that say where and on what it ran, not what it trained (W&B's
too), and where its corpus (a folder, a token store) and its downstream tasks' files lay:
reproduction sets them itself (a replay reads no corpus), and other data shows in the losses."""


def experiment_changes(recorded: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """Every field of the experiment that differs from the one the record ran (none for a record
    made before records held their experiment)."""
    if recorded is None:
        return []
    old, new = ({key: value for key, value in flatten(each).items() if key not in WHERE_AND_HOW
                 and not key.startswith("wandb.")} for each in (upgraded(recorded), now))
    return changes_between(old, new, "recorded")


def upgraded(recorded: dict[str, Any]) -> dict[str, Any]:
    """A recorded experiment as today's spec reads it: a field added since (at its default, which
    keeps what every earlier run did) is filled in, as it is in the experiment trained now."""
    try:
        return ExperimentSpec.model_validate(recorded).model_dump(mode="json")
    except ValidationError:
        return recorded


def early_differences(recorded: list[dict[str, float]], now: list[dict[str, float]], until: int) -> list[str]:
    """Every loss of the early window that is not the same float, or that only one side logged."""
    def named(history: list[dict[str, float]]) -> dict[str, float]:
        return {f"{key} at step {step}": value for (step, key), value in logged_losses(history, until).items()}

    return metric_differences(named(recorded), named(now))


def first_loss_difference(recorded: float | None, now: float | None) -> list[str]:
    """The first loss (the initial loss LR sensitivity measures from), where it is not the same float."""
    if recorded is None or (now is not None and same(recorded, now)):
        return []
    return [f"first_loss: {recorded!r} recorded, {now!r} now"]


def history_differences(recorded: list[dict[str, float]], now: list[dict[str, float]]) -> list[str]:
    """Every logged value of the whole history (each key at each step, timings aside) that is not the
    same float, or that only one side logged: a learning curve is a result too (plots, eval_auc).
    A key the record logged at no step at all is one the zoo began to log after it was made
    (train/flops, train/tokens): not compared, as a final metric gained since is not."""
    def named(history: list[dict[str, float]], keys: set[str] | None = None) -> dict[str, float]:
        return {f"{key} at step {int(row['train/step'])}": value for row in history if "train/step" in row
                for key, value in row.items() if key != "train/step" and not timing(key)
                and isinstance(value, int | float) and (keys is None or key in keys)}

    logged = {key for row in recorded for key in row}
    return metric_differences(named(recorded), named(now, logged))


def added_since(recorded: dict[str, float], scorers: dict[str, str] | None, now: dict[str, float]) -> list[str]:
    """The final metrics reported now by a metric the record's run did not have (its `scorers` do
    not list it; a record made before records listed them knew none of those it lacks): the zoo
    gained them since (chrF and TER came after the first text ledgers), so there is nothing to compare."""
    known = scorers or {}
    return [key for key in now if key not in recorded and MetricName.parse(key).metric not in known]


def scorer_differences(recorded: dict[str, str] | None, now: dict[str, str] | None) -> list[str]:
    """Each metric scored another way than the record's (another sacrebleu, other defaults)."""
    old, new = recorded or {}, now or {}
    return [f"{name} scored by {old[name]!r} recorded, {new[name]!r} now" for name in old
            if name in new and old[name] != new[name]]


def metric_differences(recorded: dict[str, float], now: dict[str, float], added: Sequence[str] = ()) -> list[str]:
    """Every final metric whose value differs, and every metric only one side reported: a run that
    stopped reporting a metric, or started reporting one, does not reproduce its record (`added`:
    metrics the zoo gained since the record, shown apart)."""
    now = {key: value for key, value in now.items() if key not in added}
    changed = [f"{key}: {old!r} recorded, {now[key]!r} now" for key, old in recorded.items()
               if key in now and not same(old, now[key])]
    lost = [f"{key}: {old!r} recorded, not reported now" for key, old in recorded.items() if key not in now]
    new = [f"{key}: not in the record, {value!r} now" for key, value in now.items() if key not in recorded]
    return changed + lost + new


def vouched(record) -> dict[str, float]:
    """The final metrics the record's own learning curve holds too, with the value it holds: an
    evaluation logged at the run's last step (eval/loss), or a curve metric its logged evaluations
    give (eval_auc/loss, zoo.metrics.curve_means). A run writes both from one number; across the
    published ledgers every one agrees to the bit."""
    from zoo.metrics import curve_means

    last: dict[str, float] = {}
    for row in record.history:
        if row.get("train/step") == record.steps:
            last.update(row)
    curves = curve_means(record.history)
    return {key: last[key] if key in last else curves[key] for key in record.metrics if key in last or key in curves}


def contradictions(record) -> list[str]:
    """Each final metric that its own learning curve gives otherwise: an edit (no run writes that),
    found in any environment, however another machine rounds."""
    return [f"{key}: {record.metrics[key]!r} as a final metric, {value!r} in its own learning curve"
            for key, value in vouched(record).items() if not same(record.metrics[key], value)]


def environment_changes(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """Each field that decides the rounding and differs; a record made before a field was recorded
    says so (bit for bit is owed only where every field is known to be equal)."""
    return [f"{key}: {recorded[key] + ' recorded' if key in recorded else 'not recorded'}, {now.get(key)} now"
            for key in ROUNDING if recorded.get(key) != now.get(key)]
