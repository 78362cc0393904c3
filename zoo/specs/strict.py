"""The base of every settings model (specs, part settings, task parameters): unknown keys, coerced
types and non-finite numbers are errors, and so is a number float32 cannot hold.

The model computes in float32 (or narrower): a setting of 1e39 becomes infinity there and one of
1e-50 becomes 0, so a run would "diverge at step 1" or "finish" having learned nothing, and a sweep
would record that as a result. Every float anywhere in a setting (in tuples and mappings too) is
held to float32's range of normal numbers, or 0.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from zoo.errors import ConfigError, describe_validation

FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38
"""float32's largest finite and smallest normal magnitudes."""


def floats_in(value: Any) -> list[float]:
    """The floats of a setting's value, nested models aside (they check their own)."""
    if isinstance(value, float):
        return [value]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [number for item in value for number in floats_in(item)]
    if isinstance(value, dict):
        return [number for item in value.values() for number in floats_in(item)]
    return []


def field_names(model: type[BaseModel]) -> list[str]:
    """The keys a settings model takes: its fields, under their aliases where they have one."""
    names = []
    for name, info in model.model_fields.items():
        alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
        names.append(alias or name)
    return names


def unknown_keys(unknown: list[Any], known: list[str], synonyms: dict[str, str]) -> str:
    """`unknown field 'd_modle' (did you mean 'd_model'?); fields: ...`: each unknown key with the
    field it most likely meant (a name other libraries use, else the closest spelling), then every
    field of its level."""
    from zoo.specs.registries import close_match

    said = []
    for key in unknown:
        close = close_match(key, known)
        meant = synonyms.get(str(key)) or (f"'{close}'" if close else None)
        said.append(f"'{key}'" + (f" (did you mean {meant}?)" if meant else ""))
    return f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(said)}; fields: {', '.join(sorted(known))}"


class ConfigErrorOnCall(type(BaseModel)):
    """Building a settings model by calling it (`ExperimentSpec(train={"lr": 1})`) raises the
    zoo's ConfigError, pydantic's ValidationError as its cause, as zoo.spec and replace do.
    pydantic's own model_validate keeps its ValidationError (the zoo's readers describe it in
    their words), and nested models are validated without a call, so their errors keep their place."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as err:
            raise ConfigError(f"{cls.__name__}: {describe_validation(err)}") from err


class StrictSettings(BaseModel, metaclass=ConfigErrorOnCall):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    synonyms: ClassVar[dict[str, str]] = {}
    """Keys other libraries use for a field (`n_layers`, `hidden_size`) -> what to write here, quoted."""
    shorthands: ClassVar[tuple[str, ...]] = ()
    """Keys a before-validator turns into fields (a switch's flat key): named among the level's keys."""

    def __setattr__(self, name: str, value: Any) -> None:
        """A frozen model says how to change it (pydantic's own error names no way out)."""
        if self.model_config.get("frozen"):
            raise ConfigError(f"{type(self).__name__} is frozen: spec.replace({name}=...) gives a changed copy")
        super().__setattr__(name, value)

    def replace(self, **changes: Any):
        """A copy with `changes`, validated as the original was: the way to change a frozen spec
        (`spec.replace(ffn="swiglu", d_model=256)`); a bad value is an error that names it."""
        return self.validated_copy({**self.model_dump(), **changes})

    def validated_copy(self, data: dict[str, Any]):
        """`data` validated as this model; a bad value is the Python API's documented error, a
        zoo.ConfigError, as zoo.spec(...) raises, not pydantic's."""
        try:
            return type(self).model_validate(data)
        except ValidationError as err:
            raise ConfigError(f"{type(self).__name__}.replace: {describe_validation(err)}") from None

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False):
        """pydantic's copy, except that an update is validated: pydantic's skips validation, which
        let `model_copy(update={"ffn": "swigluu"})` make a spec no model can be built from."""
        return super().model_copy(deep=deep) if not update else self.replace(**update)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        """An unknown key gets a close match and the keys of its level, as an unknown value does
        (pydantic alone says "Extra inputs are not permitted"). Runs after the subclass's own
        before-validators, which may turn shorthand keys (vocab_size, preset) into fields."""
        if isinstance(data, dict):
            known = field_names(cls)
            unknown = [key for key in data if key not in known]
            if unknown:
                text = unknown_keys(unknown, [*known, *cls.shorthands], cls.synonyms)
                raise PydanticCustomError("unknown_field", "{text}", {"text": text})
        return data

    @field_validator("*", mode="after")
    @classmethod
    def _fits_float32(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None or isinstance(value, (str, int, BaseModel)):  # no float in it (bool is an int)
            return value
        for number in floats_in(value):
            if number != 0.0 and not FLOAT32_TINY <= abs(number) <= FLOAT32_MAX:
                raise ConfigError(f"{number!r} cannot be held in float32, the precision the model computes in "
                                  f"(magnitudes from {FLOAT32_TINY:.4g} to {FLOAT32_MAX:.4g}, or 0)")
        return value


class Strict(StrictSettings):
    """The base of an experiment's groups (model, task, train, wandb) and of a sweep: the settings
    rules above, for a group a user writes by hand."""
