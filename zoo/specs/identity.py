"""Which run an experiment is: the fields that define what it trains, and its folder's name.

Two experiments that differ in any field that changes what is trained get different folders.
Fields that change how long or how often (more steps, evaluation, logging and checkpoint
intervals) and where W&B logs stay out, so a resume may change them.

A field enters the identity where it differs from its default, so a field added with a default
keeps every earlier name by construction. The one exception is frozen: the training and task
fields the first names were fingerprinted with count at any value (FIRST_TRAIN, FIRST_TASK), as
they did then.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from zoo.files import content_digest
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.registries import registry
from zoo.specs.switches import flat_defaults, flat_fields

RESUMABLE = ("train.steps", "train.budget.flops", "train.budget.tokens", "train.eval_every", "train.log_every",
             "train.checkpoint_every", "train.out_dir", "train.threads")
"""Fields a resume may change, which then take effect; every `wandb.*` field may change too. None
is part of a run's identity (a thread count changes how fast, not what is trained)."""

_LENGTHS = frozenset({"min_len", "max_len", "eval_min_len", "eval_max_len", "alphabet", "long_eval_min_len",
                      "long_eval_max_len"})
_CORPUS = frozenset({"data_dir", "train_split", "valid_split", "test_split", "tokenizer", "vocab_size",
                     "min_frequency", "lowercase", "max_tokens", "train_sentences", "test_size"})
FIRST_TRAIN = frozenset({"batch_size", "compile", "device", "eval_size", "explosion.factor", "explosion.logs",
                         "grad_clip", "label_smoothing", "optimizer.betas", "optimizer.eps", "optimizer.lr",
                         "optimizer.name", "optimizer.weight_decay", "precision", "schedule", "seed", "warmup_steps"})
FIRST_TASK: dict[str, frozenset[str]] = {
    "copy": _LENGTHS, "reverse": _LENGTHS, "sort": _LENGTHS, "random": frozenset({"vocab_size", "src_len", "tgt_len"}),
    "toy_translation": frozenset({"eval_fraction"}), "lm": _CORPUS | {"lang"}, "mlm": _CORPUS | {"lang"},
    "parallel": _CORPUS | {"src_lang", "tgt_lang", "format"},
}
"""Frozen, never to grow: the training fields, and each task's fields by the task's name, that the
first run names were fingerprinted with at every value. Fields added since (and every field of a
task added since) count only away from their defaults."""


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: data}


def task_defaults(task: dict[str, Any]) -> dict[str, Any]:
    """The task's fields at their defaults, dumped as the experiment holds them (its required
    fields as the experiment gives them)."""
    params = registry("task").get(task["name"]).Params
    required = {key: task[key] for key, field in params.model_fields.items() if field.is_required()}
    return params.model_validate(required).model_dump()


def away_from_defaults(group: str, values: dict[str, Any], defaults: dict[str, Any], first: frozenset[str]) -> dict:
    """The dotted fields of one group that count: those away from their defaults, and the first names'."""
    flat, at_default = flatten(values), flatten(defaults)
    return {f"{group}.{key}": value for key, value in flat.items()
            if key in first or key not in at_default or at_default[key] != value}


def identity(experiment: ExperimentSpec) -> dict[str, Any]:
    """The dotted fields that define what a run trains: the model recipe's, the task's and the
    training recipe's fields away from their defaults (and the first names' fields)."""
    recipe = type(experiment.model)
    defaults = {**{key: field.default for key, field in recipe.model_fields.items()}, **flat_defaults(recipe)}
    model = {key: value for key, value in flat_fields(experiment.model.model_dump(mode="json")).items()
             if value != defaults[key]}  # vocabulary sizes too, where the recipe gives them
    task = {key: value for key, value in experiment.task.items() if key != "name"}
    fields = {**flatten(model, "model."), "task.name": experiment.task["name"],
              **away_from_defaults("task", task, task_defaults(experiment.task),
                                   FIRST_TASK.get(experiment.task["name"], frozenset())),
              **away_from_defaults("train", experiment.train.model_dump(mode="json"),
                                   type(experiment.train)().model_dump(mode="json"), FIRST_TRAIN)}
    return {**{key: value for key, value in fields.items() if key not in RESUMABLE}, **source_content(experiment)}


def source_content(experiment: ExperimentSpec) -> dict[str, str]:
    """The content of `train.init_from` (a digest of the file, or of the folder's files): a run is
    its weights' source as it was, so the same path with other weights is another run. A source
    that is missing is said so where the run starts."""
    source = experiment.train.init_from
    if source is None:
        return {}
    try:
        return {"train.init_from_content": content_digest(source, "train.init_from")}
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return {}


def fingerprint(experiment: ExperimentSpec) -> str:
    text = json.dumps(identity(experiment), sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=4).hexdigest()


def run_name(experiment: ExperimentSpec) -> str:
    """`wandb.name` when the user names the run, else `<axes name>-seed<seed>-<fingerprint>`: the
    fingerprint tells apart what the axes' name leaves out (sizes, switches), so a folder's name
    stays short and every earlier folder keeps its name."""
    if experiment.wandb.name:
        return experiment.wandb.name
    return f"{experiment.model.axes_name}-seed{experiment.train.seed}-{fingerprint(experiment)}"


def show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def changes_between(old: dict[str, Any], new: dict[str, Any], then: str) -> list[str]:
    """`key: old <then>, new now` for every dotted key whose value differs."""
    return [f"{key}: {show(old.get(key, '(unset)'))} {then}, {show(new.get(key, '(unset)'))} now"
            for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)]
