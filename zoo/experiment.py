"""ExperimentSpec: model + task + train + wandb, the whole of one training run.

Its defaults are the main job: the default variant on the reverse task, sized to reach exact
match 0.99 on two CPU cores. A run is reproducible from its ExperimentSpec alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from zoo.catalog import resolve
from zoo.registry import UnknownChoiceError, registry
from zoo.spec import ModelSpec


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OptimizerSpec(Strict):
    name: Literal["adam", "adamw"] = "adam"
    lr: PositiveFloat = 2e-3
    betas: tuple[float, float] = (0.9, 0.98)
    eps: PositiveFloat = 1e-9
    weight_decay: float = Field(0.0, ge=0.0)


class TrainSpec(Strict):
    steps: PositiveInt = 400
    batch_size: PositiveInt = 256
    optimizer: OptimizerSpec = OptimizerSpec()
    schedule: Literal["constant", "inverse_sqrt", "cosine"] = "cosine"
    warmup_steps: NonNegativeInt = 30
    grad_clip: PositiveFloat | None = 1.0
    label_smoothing: float = Field(0.0, ge=0.0, lt=1.0)
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field("auto", description="auto: bf16 on CUDA, fp32 on CPU")
    compile: bool = False
    eval_every: PositiveInt = 100
    eval_size: PositiveInt = 500
    log_every: PositiveInt = 20
    checkpoint_every: PositiveInt = 100
    out_dir: str = "runs"


class WandbSpec(Strict):
    project: str = "zoo"
    entity: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()
    name: str | None = Field(None, description="default: the variant's canonical name and the seed")
    mode: Literal["offline", "online", "disabled"] = "offline"
    job_type: str = Field("train", description="W&B's job type: train; a sweep's cells use sweep")
    dir: str = Field(".", description="W&B writes DIR/wandb; one folder for all runs, so `wandb leet ./wandb` browses them")


DEFAULT_MODEL = {
    "preset": "vaswani2017", "d_model": 128, "n_heads": 4, "d_ff": 512,
    "n_encoder_layers": 1, "n_decoder_layers": 1, "dropout": 0.0,
}
PLACEHOLDER_VOCAB = {"src_vocab_size": 1 << 20, "tgt_vocab_size": 1 << 20}


class ExperimentSpec(Strict):
    model: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_MODEL), validate_default=True)
    task: dict[str, Any] = Field(default_factory=lambda: {"name": "reverse"}, validate_default=True)
    train: TrainSpec = TrainSpec()
    wandb: WandbSpec = WandbSpec()

    @field_validator("model")
    @classmethod
    def _model_resolves(cls, model: dict[str, Any]) -> dict[str, Any]:
        try:
            resolve({**PLACEHOLDER_VOCAB, **model})
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
            raise PydanticCustomError("model_spec", "{problems}", {"problems": problems}) from None
        except (UnknownChoiceError, ValueError) as err:
            raise PydanticCustomError("model_spec", "{problem}", {"problem": str(err)}) from None
        return model

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
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
            raise PydanticCustomError("task_params", "{name}: {problems}", {"name": name, "problems": problems}) from None
        return {"name": name, **params.model_dump()}

    def model_spec(self, src_vocab_size: int, tgt_vocab_size: int) -> ModelSpec:
        """The ModelSpec, with the task's vocabulary sizes unless the experiment gives them."""
        return resolve({"src_vocab_size": src_vocab_size, "tgt_vocab_size": tgt_vocab_size, **self.model})

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def with_sets(data: Mapping[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """Apply `dotted.key=value` assignments (values read as YAML) to nested experiment fields.

    A key whose first part is not an ExperimentSpec field fails with the valid keys; deeper keys
    are checked by the spec's own validation, which names them.
    """
    out = yaml.safe_load(yaml.safe_dump(dict(data)))  # a deep copy of plain data
    for assignment in sets:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set expects dotted.key=value, got {assignment!r}")
        assign(out, key.strip(), yaml.safe_load(value), "--set ")
    return out


def assign(data: dict[str, Any], key: str, value: Any, origin: str = "") -> None:
    """Set the dotted `key` of nested experiment data in place, creating groups on the way."""
    parts = key.split(".")
    if parts[0] not in ExperimentSpec.model_fields:
        raise ValueError(f"{origin}{key}: unknown key '{parts[0]}'; valid keys start with one of: "
                         + ", ".join(ExperimentSpec.model_fields))
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ValueError(f"{origin}{key}: '{part}' holds a value, not a group of fields")
    node[parts[-1]] = value


def load_experiment(path: str | Path | None = None, sets: Sequence[str] = ()) -> ExperimentSpec:
    """An ExperimentSpec from a YAML file (or the defaults) with `--set` assignments applied."""
    data: dict[str, Any] = {}
    if path is not None:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: an experiment file holds a mapping, got {type(data).__name__}")
    if sets:
        defaults = ExperimentSpec().model_dump(mode="json")
        data = with_sets({**{k: defaults[k] for k in ("model", "task") if k not in data}, **data}, sets)
    return ExperimentSpec.model_validate(data)
