"""Whether a checkpoint may continue under the experiment asked now: the same identity, no fewer
steps than it trained, the same data."""

from __future__ import annotations

from typing import Any

from zoo.errors import CheckpointError, ConfigError
from zoo.optim.schedules import SCANNED, multiplier
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.identity import RESUMABLE, changes_between, identity


def saved_experiment(saved: dict[str, Any], source: str) -> ExperimentSpec:
    """A checkpoint's experiment, validated as this zoo reads it."""
    try:
        return ExperimentSpec.model_validate(saved)
    except ValueError as err:
        raise CheckpointError(f"{source}: its experiment is not valid in this zoo: {err}") from None


def changed_fields(saved: dict[str, Any], now: ExperimentSpec, source: str) -> list[str]:
    """Every field that defines the run and differs between a checkpoint's experiment and `now`."""
    return changes_between(identity(saved_experiment(saved, source)), identity(now), "in the checkpoint")


def check_resumable(saved: dict[str, Any], now: ExperimentSpec, done_steps: int, source: str,
                    stopped_at: int | None = None) -> None:
    """Refuse to continue a checkpoint under a changed experiment, naming every changed field; and
    more steps where they would train nothing (the run stopped early) or other rates than a fresh
    run of that many steps (a schedule that decays over train.steps, re-stretched)."""
    before = saved_experiment(saved, source)
    changed = changes_between(identity(before), identity(now), "in the checkpoint")
    if changed:
        raise ConfigError(f"--resume refused: {source} is from another experiment ({'; '.join(changed)}). "
                          f"Only {', '.join(RESUMABLE)} and wandb.* may change on a resume; start a new run "
                          "instead (a different experiment gets its own folder unless wandb.name names one)")
    if now.train.steps < done_steps:
        raise ConfigError(f"--resume refused: train.steps {now.train.steps} is fewer than the {done_steps} steps "
                          f"{source} has already trained")
    if now.train.steps == before.train.steps:
        return
    if stopped_at is not None:
        raise ConfigError(f"--resume refused: {source} stopped early at step {stopped_at} (train.early_stop), so more "
                          f"steps ({before.train.steps} -> {now.train.steps}) would train nothing; start a new run to train on")
    t = now.train
    stretched = next((step for step in range(1, min(done_steps, SCANNED) + 1)
                      if multiplier(t.schedule, step, t.warmup_steps, before.train.steps)
                      != multiplier(t.schedule, step, t.warmup_steps, t.steps)), None)
    if stretched is not None:
        raise ConfigError(f"--resume refused: train.schedule {t.schedule.name} follows train.steps, so the {done_steps} "
                          f"steps {source} trained had the rates of a {before.train.steps}-step run (from step {stretched} on "
                          f"they differ from a {t.steps}-step run's) and the rest would be re-stretched; a longer run "
                          "is a new run (a schedule that ignores train.steps, constant or inverse_sqrt, may be resumed "
                          "longer)")


def data_changes(before: dict[str, str], now: dict[str, str]) -> list[str]:
    """`FILE (what changed)` for every data file whose content differs, or that came or went."""
    changes = [f"{file} ({'content changed' if file in now else 'no longer read'})"
               for file, digest in sorted(before.items()) if now.get(file) != digest]
    return changes + [f"{file} (newly read)" for file in sorted(now.keys() - before.keys())]


def check_same_data(saved: dict[str, str] | None, now: dict[str, str], source: str) -> None:
    """Refuse to continue training on data other than the checkpoint's, naming every changed file
    (a checkpoint from before data was recorded is taken as it is)."""
    changed = data_changes(saved, now) if saved is not None else []
    if changed:
        raise ConfigError(f"--resume refused: the task's data changed since {source} was written: {'; '.join(changed)}. "
                          "Restore the files, or start a new run (--set wandb.name=NAME) on the new data")
