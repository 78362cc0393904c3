"""ModelSpec: the single, validated description of one encoder-decoder variant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError, core_schema

from zoo.registry import AXES, UnknownChoiceError, registry


@dataclass(frozen=True)
class AxisChoice:
    """Pydantic metadata: the value must be registered on `axis`; the JSON schema lists the
    choices registered at the time the schema is asked for (plugins included)."""

    axis: str

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._validate, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict:
        json_schema = handler(schema)
        json_schema["enum"] = registry(self.axis).names()
        return json_schema

    def _validate(self, value: str) -> str:
        try:
            registry(self.axis).get(value)
        except UnknownChoiceError as err:
            raise PydanticCustomError("unknown_choice", str(err)) from None
        return value


class ModelSpec(BaseModel):
    """Every choice that defines a model. Immutable; unknown keys are rejected.

    `vocab_size` is accepted as shorthand for equal source and target vocabularies.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    src_vocab_size: PositiveInt
    tgt_vocab_size: PositiveInt
    d_model: PositiveInt = 512
    n_heads: PositiveInt = 8
    d_ff: PositiveInt = 2048
    n_encoder_layers: PositiveInt = 6
    n_decoder_layers: PositiveInt = 6
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    max_len: PositiveInt = 512
    pad_id: NonNegativeInt = 0
    bos_id: NonNegativeInt = 1
    eos_id: NonNegativeInt = 2
    norm: Annotated[str, AxisChoice("norm")] = "post"
    position: Annotated[str, AxisChoice("position")] = "sinusoidal"
    attention: Annotated[str, AxisChoice("attention")] = "fused"
    ffn: Annotated[str, AxisChoice("ffn")] = "relu"
    final_norm: Literal["auto"] | bool = Field(
        "auto", description="LayerNorm after the last block of each stack; auto: as the norm placement wants"
    )
    scale_embeddings: bool = Field(True, description="multiply token embeddings by sqrt(d_model)")
    embedding_norm: bool = Field(False, description="LayerNorm after adding positions (BERT-style)")
    tie_embeddings: bool = Field(False, description="output projection shares the target embedding")
    bias: bool = Field(True, description="biases in the linear layers")

    @model_validator(mode="before")
    @classmethod
    def _expand_vocab_size(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "vocab_size" not in data:
            return data
        data = dict(data)
        size = data.pop("vocab_size")
        for side in ("src_vocab_size", "tgt_vocab_size"):
            if side in data and data[side] != size:
                raise PydanticCustomError(
                    "vocab_conflict",
                    "vocab_size {size} conflicts with {side} {other}; give one or the other",
                    {"size": size, "side": side, "other": data[side]},
                )
            data[side] = size
        return data

    @field_validator("n_heads")
    @classmethod
    def _heads_divide_width(cls, n_heads: int, info: ValidationInfo) -> int:
        d_model = info.data.get("d_model")
        if d_model is not None and d_model % n_heads:
            raise PydanticCustomError(
                "heads_divide_width",
                "d_model {d_model} is not divisible by n_heads {n_heads}",
                {"d_model": d_model, "n_heads": n_heads},
            )
        return n_heads

    @field_validator("pad_id", "bos_id", "eos_id")
    @classmethod
    def _special_id_fits(cls, value: int, info: ValidationInfo) -> int:
        for side in ("src_vocab_size", "tgt_vocab_size"):
            size = info.data.get(side)
            if size is not None and value >= size:
                raise PydanticCustomError(
                    "special_id_range",
                    "{field} {value} is outside {side} {size} (valid ids 0..{last})",
                    {"field": info.field_name, "value": value, "side": side, "size": size, "last": size - 1},
                )
        for other in ("pad_id", "bos_id"):
            if other != info.field_name and info.data.get(other) == value:
                raise PydanticCustomError(
                    "special_id_distinct",
                    "{field} {value} equals {other}; pad, bos and eos ids must be distinct",
                    {"field": info.field_name, "value": value, "other": other},
                )
        return value

    @property
    def name(self) -> str:
        """Canonical variant name: the axis values in AXES order, e.g. `pre.learned.per_head.gelu`."""
        return ".".join(getattr(self, axis) for axis in AXES)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def uses_final_norm(self) -> bool:
        if self.final_norm == "auto":
            return bool(getattr(registry("norm").get(self.norm), "wants_final_norm", False))
        return self.final_norm

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(), sort_keys=False)

    def axes(self) -> dict[str, str]:
        return {axis: getattr(self, axis) for axis in AXES}
