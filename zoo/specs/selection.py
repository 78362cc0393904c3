"""Which model a run keeps, and when it stops: early stopping on a validation metric, the best
checkpoint by one, and the average of the last checkpoints (fairseq's average_checkpoints). The
metrics they name are held to those the experiment's task reports."""

from __future__ import annotations

from pydantic import Field, NonNegativeFloat, PositiveInt, field_validator

from zoo.specs.optimizer_spec import Strict


def validation_metric(name: str) -> str:
    """`bleu` and `eval/bleu` both name the validation split's BLEU."""
    return name if name.startswith("eval/") else f"eval/{name}"


class EarlyStopSpec(Strict):
    """Stop once the validation metric has gone `patience` evaluations without improving on its
    best by more than `min_delta`; the run ends there as a finished run, its last checkpoint that step."""

    metric: str = Field("eval/loss", description="a validation metric the task reports (zoo list): eval/NAME or NAME")
    patience: PositiveInt = Field(5, description="evaluations without an improvement before the run stops")
    min_delta: NonNegativeFloat = Field(0.0, description="an improvement must be larger than this to count")

    @field_validator("metric")
    @classmethod
    def _on_the_validation_split(cls, name: str) -> str:
        return validation_metric(name)


def selection_problems(train, reported: list[str]) -> list[str]:
    """Each metric that early stopping or the best checkpoint names and the task does not report."""
    named = {"train.early_stop.metric": train.early_stop.metric if train.early_stop else None,
             "train.keep_best": train.keep_best}
    valid = [f"eval/{name}" for name in reported]
    return [f"{field}: the task reports no {metric!r}; choices: {', '.join(valid)}"
            for field, metric in named.items() if metric is not None and metric not in valid]
