"""ExperimentSpec: model + task + train + wandb, the whole of one training run.

Its defaults are the main job: the default variant on the reverse task, sized to reach exact
match 0.99 on two CPU cores. A run is reproducible from its ExperimentSpec alone.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from zoo.errors import ConfigError, describe_validation
from zoo.specs.catalog import recipe
from zoo.specs.choices import AxisChoice, Choice
from zoo.specs.downstream import DownstreamSpec
from zoo.specs.model_spec import ModelRecipe, ModelSpec
from zoo.specs.optimizer_spec import OptimizerSpec
from zoo.specs.registries import AXES, UnknownChoiceError, registry
from zoo.specs.selection import EarlyStopSpec, metric_settings, selection_problems, validation_metric
from zoo.specs.strict import Strict
from zoo.specs.switches import FLAT, grouped_key
from zoo.specs.synonyms import TRAIN_SYNONYMS
from zoo.specs.yamlio import dump_yaml, load_yaml, read_mapping

Seed = Annotated[int, Field(ge=0, le=2**63 - 1, description="a whole number from 0 to 2^63 - 1: what a 64-bit "
                                                                 "seed holds, in a run's record and in W&B alike")]
"""A run's seed: its batches, initialization and dropout all draw from it."""


def mup_optimizer_problem(name: str) -> str | None:
    """Why optimizer `name` cannot train under muP, or None: muP's per-layer rates are Adam's
    (zoo.model.mup), and another optimizer's updates scale otherwise. Training and the coordinate
    check refuse alike."""
    optimizers = registry("optimizer")
    if getattr(optimizers.get(name), "mup_rates", False):
        return None
    able = ", ".join(other for other in optimizers.names() if getattr(optimizers.get(other), "mup_rates", False))
    return (f"train.optimizer {name}: parametrization mup sets Adam's per-layer learning rates, which hold for an "
            f"update whose size does not follow the gradient's; choices: {able}")


class ExplosionSpec(Strict):
    """A finite loss can still blow up: the run is diverged when its logged training loss stays
    above `factor` times the loss of its first step for `logs` logs in a row, or ends above it."""

    factor: float = Field(10.0, gt=1.0)
    logs: PositiveInt = 3


class BudgetSpec(Strict):
    """A compute budget that ends the run at the first step where it is spent, so that variants
    compare at equal compute rather than equal steps: model FLOPs (zoo.model.flops) or the
    labels trained on. The schedule still follows train.steps."""

    flops: PositiveFloat | None = Field(None, allow_inf_nan=False, description="training FLOPs (model FLOPs, "
                                        "zoo.model.flops)")
    tokens: PositiveInt | None = Field(None, description="labels the loss counted (padding and prompts not)")


class TrainSpec(Strict):
    synonyms: ClassVar[dict[str, str]] = TRAIN_SYNONYMS
    """Names other libraries (transformers' Trainer, fairseq, nanoGPT) give these fields."""
    steps: PositiveInt = 400
    budget: BudgetSpec = Field(default_factory=BudgetSpec, description="end the run once this much compute is "
                               "spent (at most train.steps)")
    probes: bool = Field(False, description="at each evaluation, mechanism statistics of one held-out batch: each "
                         "attention layer's largest logit and entropy, the output logits' largest and log-partition "
                         "(mech/*; zoo.kernels.probes)")
    batch_size: PositiveInt = 256
    batch_tokens: PositiveInt | None = Field(None, description="batch by a token budget per rank instead: rows x the "
                                             "longest side's length, sentences of similar length together")
    accumulate: PositiveInt = Field(1, description="micro-batches per optimizer step, their gradients added up: a "
                                    "step learns from accumulate x batch_size rows (or accumulate x batch_tokens "
                                    "per rank) in the memory of one micro-batch")
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    schedule: Annotated[Choice, AxisChoice("schedule")] = Field(
        "cosine", validate_default=True, description="a registered schedule (zoo.optim) after the warmup: its name, or "
                                                     "{name: ..., setting: value}")
    warmup_steps: NonNegativeInt = 30
    grad_clip: PositiveFloat | None = 1.0
    label_smoothing: float = Field(0.0, ge=0.0, lt=1.0)
    z_loss: float = Field(0.0, ge=0.0, description="PaLM's penalty on the squared log-partition of the logits, "
                                                   "added to the training loss (PaLM: 1e-4); 0: none")
    loss_chunk: PositiveInt | None = Field(None, description="positions whose logits the training loss computes at "
                                           "a time, recomputed in the backward pass: the full logits never exist; "
                                           "null: all at once")
    seed: Seed = 0
    init_from: str | None = Field(None, description="start from these weights instead of an initialization: a "
                                  "run's checkpoint.pt, or a folder that save_pretrained wrote (the zoo's or "
                                  "transformers'); its model must be the experiment's, vocabulary included")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: PositiveInt | None = Field(None, description="CPU threads of the run (torch.set_num_threads); null: "
                                        "OMP_NUM_THREADS where set, else the CPUs the process may run on. On a busy "
                                        "machine fewer can run faster; not part of the run's identity")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field("auto", description="auto: bf16 on CUDA, fp32 on CPU")
    compile: bool = False
    parallel: Literal["ddp", "fsdp"] = Field(
        "ddp", description="how the ranks torchrun starts share the model: ddp (each holds it whole, gradients "
        "averaged) or fsdp (torch's FSDP2: weights, gradients and optimizer state sharded over the ranks, each block "
        "gathered when it computes; checkpoints sharded by torch.distributed.checkpoint); a run of fsdp needs torchrun")
    activation_checkpointing: Literal["none", "blocks", "every_k"] = Field(
        "none", description="recompute blocks' activations in the backward pass instead of keeping them: none, every "
        "block (blocks), or every activation_checkpointing_k-th block (every_k); the same gradients, less memory")
    activation_checkpointing_k: PositiveInt = Field(2, description="with activation_checkpointing every_k: the first "
                                                    "of every k blocks is recomputed")
    eval_every: PositiveInt = 100
    eval_size: PositiveInt = 500
    eval_beams: PositiveInt = Field(1, description="beams of held-out decoding (exact match, BLEU); 1: greedy")
    length_penalty: float = Field(1.0, description="with eval_beams > 1: scores are divided by length ** this")
    log_every: PositiveInt = 20
    checkpoint_every: PositiveInt = 100
    early_stop: EarlyStopSpec | None = Field(None, description="stop when a validation metric stops improving: "
                                             "{metric, patience, min_delta}; null: train every step")
    keep_best: str | None = Field(None, description="a validation metric (eval/NAME): the checkpoint of its best "
                                  "evaluation is kept as checkpoint_best.pt and scored on every split at the end")
    average_last: int | None = Field(None, ge=2, description="average the weights of the last N checkpoints "
                                     "(checkpoint_every apart) at the end into checkpoint_averaged.pt, scored on "
                                     "every split")
    metrics: dict[str, dict[str, Any] | Literal[False]] = Field(
        {}, description="the task's metrics by name: their settings ({chrf: {word_order: 2}} scores chrF++; zoo show "
                        "metric NAME), or false for one the run does not score ({bleu: false, chrf: false, ter: false, "
                        "exact_match: false}: its evaluations decode nothing); every other metric is scored")
    explosion: ExplosionSpec | None = Field(ExplosionSpec(), description="null: only a non-finite loss diverges")
    downstream: DownstreamSpec | None = Field(None, description="tasks of lm-evaluation-harness scored on the last "
                                              "model at the end ({tasks: [hellaswag, arc_easy]}): metrics "
                                              "downstream/TASK/METRIC of the run")
    out_dir: str = "runs"

    @field_validator("init_from", mode="before")
    @classmethod
    def _a_path_as_text(cls, value: Any) -> Any:
        """The Path that save_pretrained returns names a folder as its text does."""
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("keep_best")
    @classmethod
    def _on_the_validation_split(cls, name: str | None) -> str | None:
        return None if name is None else validation_metric(name)

    @model_validator(mode="before")
    @classmethod
    def _k_alone(cls, data: Any) -> Any:
        """A k written without a mode sets nothing: the mode is none by default. (An experiment
        written back in full holds both, k at its default: that one is read as it was.)"""
        if isinstance(data, Mapping) and "activation_checkpointing_k" in data and "activation_checkpointing" not in data:
            raise PydanticCustomError(
                "activation_checkpointing_k", "train.activation_checkpointing_k {k} is read only with "
                "activation_checkpointing: every_k (it is none, the default); set both, or leave k out",
                {"k": data["activation_checkpointing_k"]})
        return data

    @model_validator(mode="after")
    def _k_with_every_k(self) -> TrainSpec:
        """A k that nothing reads would be a setting silently lost."""
        if self.activation_checkpointing_k != 2 and self.activation_checkpointing != "every_k":
            raise PydanticCustomError(
                "activation_checkpointing_k", "train.activation_checkpointing_k {k} is read only with "
                "activation_checkpointing: every_k (it is {choice}); set both, or leave k out",
                {"k": self.activation_checkpointing_k, "choice": self.activation_checkpointing})
        return self

    @model_validator(mode="after")
    def _trains_at_a_rate(self) -> TrainSpec:
        schedule = registry("schedule").get(self.schedule.name)
        problem = schedule.untrained(self.schedule.name, self.schedule.settings, self.warmup_steps, self.steps)
        if problem:
            raise PydanticCustomError("schedule", "{problem}", {"problem": problem})
        return self

    @model_validator(mode="after")
    def _enough_checkpoints_to_average(self) -> TrainSpec:
        """A run checkpoints every checkpoint_every steps and at its end: fewer checkpoints than
        average_last would leave nothing to average, and a sweep comparing averaged/... nothing."""
        made = self.steps // self.checkpoint_every + (1 if self.steps % self.checkpoint_every else 0)
        if self.average_last is not None and made < self.average_last:
            raise PydanticCustomError(
                "average_last", "train.average_last {last}: a run of {steps} steps with checkpoint_every {every} makes "
                "{made} checkpoint(s), fewer than it averages; lower average_last or checkpoint_every, or train longer",
                {"last": self.average_last, "steps": self.steps, "every": self.checkpoint_every, "made": made})
        return self

    @field_validator("metrics", mode="before")
    @classmethod
    def _metric_settings(cls, value: Any) -> dict[str, dict[str, Any]]:
        return metric_settings(value)

    @property
    def sharded(self) -> bool:
        """train.parallel fsdp: what decides a run's checkpoint format and launch before it starts;
        a started run reads zoo.trainer.parallelism.Parallelism instead."""
        return self.parallel == "fsdp"


def resolved_mode(configured: str) -> str:
    """The W&B mode a run (or a comparison) uses: WANDB_MODE in the environment wins over the
    configured one (`dryrun` is W&B's old word for offline)."""
    mode = os.environ.get("WANDB_MODE", configured)
    return "offline" if mode == "dryrun" else mode


class WandbSpec(Strict):
    project: str = "zoo"
    entity: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = Field((), strict=False)
    name: str | None = Field(None, description="the run's name and folder; default: variant, seed and a fingerprint")
    mode: Literal["offline", "online", "disabled"] = "offline"
    job_type: str = Field("train", description="W&B's job type: train; a sweep's cells use their variant, so "
                          "grouping a sweep's group by job type gives one line with a seed band per variant")
    dir: str = Field(".", description="W&B writes DIR/wandb; one folder for all runs, so `wandb leet ./wandb` browses them")
    config: dict[str, str | int | float | bool | None] = Field(
        {}, description="more top-level W&B config keys, beside the model's axes: a sweep's cells put their grid "
        "values (by their short names), variant and seed here, for W&B's parallel-coordinates and importance panels")

    @field_validator("config")
    @classmethod
    def _not_a_group(cls, config: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(set(config) & {"model", "task", "train", "wandb", "model_name"})
        if taken:
            raise ConfigError(f"wandb.config keys {taken} would replace the experiment's own config groups")
        return config

    @field_validator("name")
    @classmethod
    def _a_folder_name(cls, name: str | None) -> str | None:
        if name is not None and (not name.strip() or any(c in name for c in "/\\\0") or name in (".", "..")):
            raise ConfigError(f"wandb.name {name!r} names the run's folder: non-empty, without '/', '\\' or a NUL byte")
        return name


DEFAULT_MODEL = {
    "preset": "vaswani2017", "d_model": 128, "n_heads": 4, "d_ff": 512,
    "n_encoder_layers": 1, "n_decoder_layers": 1, "dropout": 0.0,
}
DEFAULT_TASK = {"name": "reverse"}
SPECIAL_IDS = ("pad_id", "bos_id", "eos_id")
TOKENIZER_SETTINGS = {"tokenizer", "tokenizer_dir", "vocab_size", "min_frequency"}
"""A text task's settings of how text becomes ids: a task that names one reads with its own tokenizer."""


def written_defaults() -> dict[str, Any]:
    """The model and task of the default experiment as written (a preset and the fields it
    changes), for `--set` and a sweep's grid to change as a user would the file: a preset set on
    top replaces the written one, where the resolved fields would override it."""
    return {"model": dict(DEFAULT_MODEL), "task": dict(DEFAULT_TASK)}


class ExperimentSpec(Strict):
    model: ModelRecipe = Field(default_factory=lambda: recipe(DEFAULT_MODEL))
    task: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_TASK), validate_default=True)
    train: TrainSpec = Field(default_factory=TrainSpec)
    wandb: WandbSpec = WandbSpec()

    @model_validator(mode="before")
    @classmethod
    def _init_froms_tokenizer(cls, data: Any) -> Any:
        """train.init_from a folder that holds a tokenizer reads the task's text with it, as litgpt
        and transformers do, unless the task names tokenizer settings of its own."""
        if not isinstance(data, Mapping) or not isinstance(task := data.get("task"), Mapping):
            return data
        train = data.get("train")
        source = train.get("init_from") if isinstance(train, Mapping) else getattr(train, "init_from", None)
        if source is None or TOKENIZER_SETTINGS & task.keys() or task.get("name") not in registry("task"):
            return data
        folder = os.fspath(source)
        if "tokenizer_dir" not in registry("task").get(task["name"]).Params.model_fields or \
                not (Path(folder) / "tokenizer.json").is_file():
            return data
        return {**data, "task": {**task, "tokenizer_dir": folder}}

    @field_validator("model", mode="before")
    @classmethod
    def _model_resolves(cls, model: Any) -> ModelRecipe:
        """The model as written (a preset or canonical name, a mapping that may name a preset, a
        recipe) becomes its recipe here, once; the task fills in its vocabulary sizes."""
        if not isinstance(model, str | Mapping | ModelRecipe):
            raise PydanticCustomError("model_spec", "a mapping of model fields (or a preset or variant name), got "
                                      "{kind}", {"kind": type(model).__name__})
        try:
            return recipe(model)
        except ConfigError as err:
            raise PydanticCustomError("model_spec", "{problem}", {"problem": str(err)}) from None

    @field_validator("task")
    @classmethod
    def _task_resolves(cls, task: dict[str, Any]) -> dict[str, Any]:
        fields = dict(task)
        name = fields.pop("name", None)
        if name is None:
            raise PydanticCustomError("task_name", "a task needs a name; choices: {choices}",
                                      {"choices": ", ".join(registry("task").names())})
        try:
            params = registry("task").get(name).Params.model_validate(fields)
        except UnknownChoiceError as err:
            raise PydanticCustomError("task_name", "{problem}", {"problem": str(err)}) from None
        except ValidationError as err:
            raise PydanticCustomError("task_params", "{name}: {problems} (zoo show task {name}: its settings)",
                                      {"name": name, "problems": describe_validation(err)}) from None
        return {"name": name, **params.model_dump()}

    @model_validator(mode="after")
    def _special_ids_match_the_task(self) -> ExperimentSpec:
        """The task's vocabulary decides pad, bos and eos; a model that says otherwise is an error."""
        task = registry("task").get(self.task["name"])
        ids = task.special_ids_for(task.Params.model_validate({k: v for k, v in self.task.items() if k != "name"}))
        conflicts = [f"model.{k} {getattr(self.model, k)} (the task's is {ids[k]})" for k in SPECIAL_IDS
                     if getattr(self.model, k) != ids[k]]
        if conflicts:
            wanted = ", ".join(f"model.{k}={ids[k]}" for k in SPECIAL_IDS)
            fix = "give the task's ({wanted})" if self.train.init_from is None or self.task.get("tokenizer_dir") else \
                "the model of train.init_from keeps its own: read the text with its tokenizer (task.tokenizer_dir)"
            raise PydanticCustomError(
                "special_ids", "{conflicts}: task {task} fixes pad, bos and eos ids in its vocabulary; " + fix,
                {"conflicts": "; ".join(conflicts), "task": self.task["name"], "wanted": wanted})
        return self

    @model_validator(mode="after")
    def _token_batches_need_a_task_that_makes_them(self) -> ExperimentSpec:
        if self.train.batch_tokens is not None:
            tasks = registry("task")
            if not tasks.get(self.task["name"]).token_batches:
                able = ", ".join(name for name in tasks.names() if tasks.get(name).token_batches)
                raise PydanticCustomError("batch_tokens", "train.batch_tokens: task '{task}' has no token batches; "
                                          "tasks that do: {able}", {"task": self.task["name"], "able": able})
        return self

    @model_validator(mode="after")
    def _downstream_needs_a_model_that_continues_text(self) -> ExperimentSpec:
        """The harness asks for the likelihood of a continuation: a model that labels positions has none."""
        if self.train.downstream is not None and registry("task").get(self.task["name"]).shape != "sequences":
            raise PydanticCustomError("downstream", "train.downstream: task '{task}' labels positions (a masked model); "
                                      "the harness scores models that continue text: a language model or a "
                                      "translation model", {"task": self.task["name"]})
        return self

    @model_validator(mode="after")
    def _mup_trains_with_adams_rates(self) -> ExperimentSpec:
        """muP's per-layer rates are Adam's (zoo.model.mup); another optimizer's updates scale otherwise."""
        problem = mup_optimizer_problem(self.train.optimizer.name) if self.model.parametrization == "mup" else None
        if problem:
            raise PydanticCustomError("mup_optimizer", "{problem}", {"problem": problem})
        return self

    @model_validator(mode="after")
    def _selection_names_reported_metrics(self) -> ExperimentSpec:
        problems = selection_problems(self.train, registry("task").get(self.task["name"]).metrics())
        if problems:
            raise PydanticCustomError("selection", "{problems}", {"problems": "; ".join(problems)})
        return self

    @property
    def variant(self) -> str:
        """The model's canonical name (no vocabulary needed)."""
        return self.model.name

    def model_spec(self, src_vocab_size: int, tgt_vocab_size: int) -> ModelSpec:
        """The ModelSpec, with the task's vocabulary sizes unless the experiment gives them."""
        return self.model.sized(src_vocab_size, tgt_vocab_size)

    def to_yaml(self) -> str:
        return dump_yaml(self.model_dump(mode="json"))


def parse_sets(sets: Sequence[str]) -> list[tuple[str, Any]]:
    """`dotted.key=value` words as (key, value) pairs, each value read as YAML (`8` is a number,
    `true` a boolean, `[0, 1]` a list). The one parser of `--set` for every command."""
    pairs = []
    for assignment in sets:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects dotted.key=value, got {assignment!r}")
        pairs.append((key.strip(), load_yaml(value, f"--set {assignment}")))
    return pairs


def assign(data: dict[str, Any], key: str, value: Any, origin: str = "", fields: Sequence[str] | None = None) -> None:
    """Set the dotted `key` of nested data in place, creating groups on the way. The first part
    must be one of `fields` (default: the ExperimentSpec's groups)."""
    fields = list(ExperimentSpec.model_fields) if fields is None else list(fields)
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(f"{origin}{key}: a dotted key with an empty part; write group.field, e.g. model.d_model")
    if parts[0] not in fields:
        raise ConfigError(f"{origin}{key}: unknown key '{parts[0]}'; valid keys start with one of: " + ", ".join(fields))
    if parts[0] == "model" and len(parts) == 2:  # a switch by its flat key is set in its group
        parts = ["model", *grouped_key(parts[1])]
    if parts[0] == "model" and len(parts) == 3 and isinstance(data.get("model"), dict):
        for flat in [key for key, path in FLAT.items() if list(path) == parts[1:]]:
            data["model"].pop(flat, None)  # the value set replaces the one written under the flat key
    node = data
    for part in parts[:-1]:
        if part in AXES and isinstance(node.get(part), str):
            node[part] = {"name": node[part]}  # a part's name stands for its default settings
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{origin}{key}: '{part}' holds a value, not a group of fields")
    node[parts[-1]] = value


def with_sets(data: Mapping[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """A copy of experiment data with `--set` assignments applied."""
    out = copy.deepcopy(dict(data))
    for key, value in parse_sets(sets):
        assign(out, key, value, "--set ")
    return out


def validate_experiment(data: Mapping[str, Any], source: str = "experiment") -> ExperimentSpec:
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{source}: {describe_validation(err)}") from None


def load_experiment(path: str | Path | None = None, sets: Sequence[str] = ()) -> ExperimentSpec:
    """An ExperimentSpec from a YAML file (or the defaults) with `--set` assignments applied."""
    data: dict[str, Any] = {} if path is None else read_mapping(path, "experiment file")
    if path is not None and {"grid", "rows", "base"} & data.keys() and not set(ExperimentSpec.model_fields) & data.keys():
        raise ConfigError(f"{path} is a sweep file (it has {', '.join(sorted({'grid', 'rows', 'base'} & data.keys()))}); "
                          f"run it with zoo sweep {path}, or train its base experiment alone with zoo train BASE")
    if sets:
        data = with_sets({**written_defaults(), **data}, sets)
    return validate_experiment(data, str(path) if path is not None else "experiment")
