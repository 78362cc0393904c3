"""Which run an experiment is: its folder's name, and whether a checkpoint may continue it.

Two experiments that differ in any field that changes what is trained get different folders; a
resume continues only the same experiment. Fields that change how long or how often (more steps,
evaluation, logging and checkpoint intervals) and where W&B logs may change on a resume.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from zoo.errors import CheckpointError, ConfigError
from zoo.specs.experiment import PLACEHOLDER_VOCAB, ExperimentSpec, placeholder_spec
from zoo.specs.model_spec import ModelSpec

ADDED_LATER = {"train.eval_beams": 1, "train.length_penalty": 1.0, "train.batch_tokens": None, "task.shared_vocab": False,
               "train.z_loss": 0.0, "train.loss_chunk": None, "train.init_from": None,
               "task.tokenizer_dir": None, "task.source_prefix": ""}
"""Fields added after run names were first written: at these defaults they stay out of the
fingerprint, so every earlier run keeps its folder."""
RESUMABLE = ("train.steps", "train.eval_every", "train.log_every", "train.checkpoint_every", "train.out_dir")
"""Fields a resume may change, which then take effect; every `wandb.*` field may change too."""


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: data}


def identity(experiment: ExperimentSpec) -> dict[str, Any]:
    """The dotted fields that define what a run trains: the resolved model (its non-default
    fields, so a new field with a default keeps old names), the task and the training recipe."""
    spec = placeholder_spec(experiment.model)
    model = {k: v for k, v in spec.model_dump(mode="json").items()
             if k not in PLACEHOLDER_VOCAB and v != ModelSpec.model_fields[k].default}
    data = {"model": model, "task": experiment.task, "train": experiment.train.model_dump(mode="json")}
    return {k: v for k, v in flatten(data).items()
            if k not in RESUMABLE and not (k in ADDED_LATER and v == ADDED_LATER[k])}


def fingerprint(experiment: ExperimentSpec) -> str:
    text = json.dumps(identity(experiment), sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=4).hexdigest()


def run_name(experiment: ExperimentSpec) -> str:
    """`wandb.name` when the user names the run, else `<variant>-seed<seed>-<fingerprint>`."""
    if experiment.wandb.name:
        return experiment.wandb.name
    return f"{experiment.variant}-seed{experiment.train.seed}-{fingerprint(experiment)}"


def show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def changes_between(old: dict[str, Any], new: dict[str, Any], then: str) -> list[str]:
    """`key: old <then>, new now` for every dotted key whose value differs."""
    return [f"{key}: {show(old.get(key, '(unset)'))} {then}, {show(new.get(key, '(unset)'))} now"
            for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)]


def changed_fields(saved: dict[str, Any], now: ExperimentSpec, source: str) -> list[str]:
    """Every field that defines the run and differs between a checkpoint's experiment and `now`."""
    try:
        before = ExperimentSpec.model_validate(saved)
    except ValueError as err:
        raise CheckpointError(f"{source}: its experiment is not valid in this zoo: {err}") from None
    return changes_between(identity(before), identity(now), "in the checkpoint")


def check_resumable(saved: dict[str, Any], now: ExperimentSpec, done_steps: int, source: str) -> None:
    """Refuse to continue a checkpoint under a changed experiment, naming every changed field."""
    changed = changed_fields(saved, now, source)
    if changed:
        raise ConfigError(f"--resume refused: {source} is from another experiment ({'; '.join(changed)}). "
                          f"Only {', '.join(RESUMABLE)} and wandb.* may change on a resume; start a new run "
                          "instead (a different experiment gets its own folder unless wandb.name names one)")
    if now.train.steps < done_steps:
        raise ConfigError(f"--resume refused: train.steps {now.train.steps} is fewer than the {done_steps} steps "
                          f"{source} has already trained")


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
