"""Which model a run keeps, and when it stops: early stopping on a validation metric, the best
checkpoint by one, and the average of the last checkpoints (fairseq's average_checkpoints); and how
its metrics are scored (train.metrics). The metrics they name are held to those the experiment's
task reports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, NonNegativeFloat, PositiveInt, field_validator, model_validator
from pydantic_core import PydanticCustomError

from zoo.metric_names import ALWAYS_SCORED, MetricName
from zoo.specs.choices import validate_choice
from zoo.specs.strict import Strict


def validation_metric(name: str) -> str:
    """`bleu` and `eval/bleu` both name the validation split's BLEU; a metric of another split
    (`train/loss`, `test/bleu`) is refused, not read as the validation split's `eval/train/loss`."""
    parsed = MetricName.parse(name)
    if parsed.model or parsed.split not in ("eval", ""):
        raise PydanticCustomError("validation_metric", "{name}: only the validation split's metrics may be named here, "
                                  "as eval/NAME or NAME (the split evaluated during training); {split} is not it",
                                  {"name": name, "split": name.split("/")[0] + "/"})
    return str(parsed.on("eval"))


class EarlyStopSpec(Strict):
    """Stop once the validation metric has gone `patience` evaluations without improving on its
    best by more than `min_delta`; the run ends there as a finished run, its last checkpoint that step."""

    metric: str = Field("eval/loss", description="a validation metric the task reports (zoo list): eval/NAME or NAME")
    patience: PositiveInt = Field(5, description="evaluations without an improvement before the run stops")
    min_delta: NonNegativeFloat = Field(0.0, description="an improvement must be larger than this to count")

    @model_validator(mode="before")
    @classmethod
    def _a_metric_alone(cls, data: Any) -> Any:
        """`early_stop: loss` is the metric alone, with the other settings at their defaults."""
        return {"metric": data} if isinstance(data, str) else data

    @field_validator("metric")
    @classmethod
    def _on_the_validation_split(cls, name: str) -> str:
        return validation_metric(name)


def metric_settings(value: Any) -> dict[str, dict[str, Any]]:
    """train.metrics: each named metric's settings, validated as a part's are, those away from
    their defaults kept (a metric at its defaults is left out, so the run stays the same run), or
    false for a metric the run does not score."""
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) or v is False for v in value.values()):
        raise PydanticCustomError("metric_settings", "{text}", {"text": "a mapping {metric: {setting: value}, or "
                                  f"metric: false}}, e.g. {{chrf: {{word_order: 2}}, ter: false}}, got {value!r}"})
    dropped = [name for name, settings in value.items() if settings is False and name in ALWAYS_SCORED]
    if dropped:
        raise PydanticCustomError("metric_settings", "{text}", {"text": f"{dropped[0]}: false: every evaluation scores "
                                  f"{' and '.join(ALWAYS_SCORED)} (a diverging run and early stopping read it)"})
    chosen = {name: validate_choice("metric", {**(settings or {}), "name": name}) for name, settings in value.items()}
    return {name: False if value[name] is False else dict(choice.given) for name, choice in chosen.items()
            if value[name] is False or choice.given}


def selection_problems(train, reported: list[str]) -> list[str]:
    """Each metric that early stopping, the best checkpoint or train.metrics name and the task does
    not report, and each that early stopping or the best checkpoint read and train.metrics sets
    false (not scored)."""
    selecting = {"train.early_stop.metric": train.early_stop.metric if train.early_stop else None,
                 "train.keep_best": train.keep_best}
    named = {**selecting, **{f"train.metrics.{name}": f"eval/{name}" for name in train.metrics}}
    valid = [f"eval/{name}" for name in reported]
    unscored = [f"eval/{name}" for name, settings in train.metrics.items() if settings is False]
    return [f"{field}: the task reports no {metric!r}; choices: {', '.join(valid)}"
            for field, metric in named.items() if metric is not None and metric not in valid] + [
        f"{field}: {metric!r} is not scored (train.metrics sets {MetricName.parse(metric).metric}: false)"
        for field, metric in selecting.items() if metric in valid and metric in unscored]
