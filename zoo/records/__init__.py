"""What a run leaves behind, typed and versioned: `result.json`, each line of a sweep's ledger
(the same record plus the cell it belongs to), and the layout of a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from zoo.errors import ConfigError, describe_validation
from zoo.files import atomic_write, read_bounded
from zoo.metric_names import KEPT, MetricName

FORMAT = 1
"""The format of result.json, ledger lines and checkpoints; files without one are format 0."""

Status = Literal["running", "finished", "diverged", "failed", "interrupted"]
DONE = ("finished", "diverged")
"""Statuses a sweep keeps on a rerun; running (killed), failed and interrupted cells run again."""


def check_format(found: int, what: str) -> int:
    if found > FORMAT:
        raise ConfigError(f"{what} has format {found}, written by a newer zoo; this zoo reads up to format {FORMAT}")
    return found


class RunRecord(BaseModel):
    """One run's outcome. A sweep's ledger lines carry the cell's identity too."""

    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    status: Status
    name: str | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    best: dict[str, float] = Field(default_factory=dict)
    steps: int = 0
    wall_time_s: float | None = None
    parameters: int | None = None
    model_name: str | None = None
    threads: int | None = None
    world_size: int | None = Field(None, description="the processes torchrun trained the run on (train.parallel says "
                                   "how they shared the model); absent: one")
    data: dict[str, str] | None = Field(None, description="{file: content digest} of the task's data files")
    data_summary: dict[str, float | int] | None = Field(None, description="what the data is: examples per split, "
                                                        "vocabulary sizes, <unk> shares, lines left out, mean lengths")
    environment: dict[str, str] | None = Field(None, description="what reproduction needs beside the thread count: "
                                               "zoo version and commit, torch and Python versions, the device, the CPU "
                                               "(vendor, family, model), torch's CPU capability, the BLAS")
    history: list[dict[str, float]] = Field(default_factory=list)
    experiment: dict[str, Any] | None = Field(None, description="the experiment the run trained, as validated: what "
                                              "zoo reproduce holds a sweep file to")
    scorers: dict[str, str] | None = Field(None, description="each metric the run reports and how it was scored: "
                                           "sacrebleu's signature for text metrics, 'zoo' for the zoo's own")
    first_loss: float | None = Field(None, description="the training loss of step 1, the model as initialized: what "
                                     "LR sensitivity counts a diverged run at (Wortsman et al. 2023's initial loss)")
    stopped_early_at: int | None = Field(None, description="the step where train.early_stop ended the run")
    flops: float | None = Field(None, description="training model FLOPs spent (zoo.model.flops); None where a part "
                                "does not declare its FLOPs or the run resumed from a checkpoint that did not count them")
    tokens: int | None = Field(None, description="labels the training loss counted, over every step")
    budget_spent_at: int | None = Field(None, description="the step where train.budget ended the run")
    best_checkpoint: dict[str, Any] | None = Field(None, description="train.keep_best: the best evaluation's step, "
                                                   "metric and value, and its checkpoint's metrics on every split")
    averaged: dict[str, Any] | None = Field(None, description="train.average_last: the steps averaged and the "
                                            "average's metrics on every split")
    downstream: dict[str, Any] | None = Field(None, description="train.downstream: lm-evaluation-harness's results by "
                                              "task (standard errors included), and its version")
    diverged_at: int | None = None
    error: str | None = Field(None, description="why a run diverged, failed or was interrupted")
    exit_code: int | None = None
    wandb_run: str | None = Field(None, description="the W&B run's id (wandb sync and the W&B app find it by it)")
    wandb_dir: str | None = Field(None, description="the W&B run's local folder (offline-run-... or run-...)")
    cell: str | None = None
    variant: str | None = None
    seed: int | None = None
    assignment: dict[str, Any] | None = None
    declared: dict[str, Any] | None = Field(None, description="the sweep's question when the cell ran "
                                            "(zoo.sweep.question.declaration): its metric, margins, family, target, "
                                            "fit and choose_on, and the sweep file's SHA-256")
    time: str | None = None

    @field_validator("format")
    @classmethod
    def _readable(cls, found: int) -> int:
        return check_format(found, "the record")

    def final_metrics(self) -> list[str]:
        """The names of every final metric: the last model's, then each kept model's."""
        kept = [f"{group}/{name}" for group in KEPT for name in (getattr(self, group) or {}).get("metrics", {})]
        return [*self.metrics, *kept]

    def value(self, metric: str) -> float | None:
        """A final metric of the run: of its last model (`test/bleu`), or of a model it kept
        (`best_checkpoint/test/bleu`, `averaged/test/bleu`); None where the run has none."""
        name = MetricName.parse(metric)
        if name.model:
            return (getattr(self, name.model) or {}).get("metrics", {}).get(name.of_model)
        return self.metrics.get(metric)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(exclude_none=True))


def write_result(path: str | Path, record: RunRecord) -> None:
    atomic_write(path, json.dumps(record.model_dump(exclude_none=True), indent=1))


def read_result(path: str | Path) -> RunRecord:
    try:
        return RunRecord.model_validate_json(read_bounded(path, "a run record"))
    except ValidationError as err:
        raise ConfigError(f"{path}: not a run record: {describe_validation(err)}") from None


class CheckpointProgress(BaseModel):
    """Where training stands, as a checkpoint holds it."""

    model_config = ConfigDict(extra="forbid")

    step: int
    best: dict[str, float] = Field(default_factory=dict)
    last_eval: dict[str, float] = Field(default_factory=dict)
    history: list[dict[str, float]] = Field(default_factory=list)
    wall_s: float = 0.0
    first_loss: float | None = Field(None, description="the loss of the first step (the explosion rule's base)")
    high_logs: int = Field(0, description="consecutive logs above the explosion threshold")
    flops: float | None = Field(None, description="training FLOPs so far; None where not counted (an older checkpoint)")
    tokens: int | None = Field(None, description="labels trained on so far; None where not counted")


CHECKPOINT_KEYS = ("experiment", "spec", "model", "optimizer", "schedule", "scaler", "rng", "task", "wandb_id",
                   "progress")
"""A checkpoint is a dict of these plus `format` and `data` (the task's data digests, absent in
checkpoints written before they were recorded); a format-0 checkpoint kept its progress at the top."""


def checkpoint_progress(state: dict[str, Any]) -> CheckpointProgress:
    """The progress of a checkpoint of any readable format."""
    if "progress" in state:
        return CheckpointProgress.model_validate(state["progress"])
    return CheckpointProgress(step=state["step"], best=state["best"], last_eval=state["last_eval"],
                    history=state["history"], wall_s=state["wall_s"])
