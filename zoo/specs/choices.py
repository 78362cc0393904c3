"""An axis value: a registered part's name plus the part's own, typed settings.

A part declares its settings as a `Settings` model on its class (the RoPE base, the T5 bucket
count); the spec then takes the axis as a name (`position: rope`) or as a mapping
(`position: {name: rope, base: 500000}`) and validates the mapping with the part's model. A
choice remembers only the settings that differ from their defaults, so a name stays the same
choice with or without its defaults written out, and a setting added to a part later keeps every
existing spec, name and checkpoint valid.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from pydantic import ValidationError, model_validator
from pydantic_core import PydanticCustomError, core_schema

from zoo.specs.hooks import HasSettings, implements
from zoo.specs.registries import UnknownChoiceError, registry
from zoo.specs.strict import StrictSettings
from zoo.specs.yamlio import load_yaml


class PartSettings(StrictSettings):
    """The settings of a part without any; a part with some subclasses this as `Settings`, and
    every field needs a default."""

    TRIED: ClassVar[tuple[dict[str, Any], ...]] = ()
    """Settings away from their defaults that the tests' grid crosses with every value of every
    other axis, as it does the part itself (tests/conftest.py): a new form meets every other part."""

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        """Unknown settings are left to pydantic: validate_choice names them with the part's
        settings and their defaults, which say more than the bare keys."""
        return data


@functools.cache
def settings_model(part: Any) -> type[PartSettings]:
    """A part's settings model, once per part: every validation of a choice asks it."""
    return part.Settings if implements(part, HasSettings) else PartSettings


def value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


SETTING_SEPARATOR = re.compile(r"\+(?=[A-Za-z_]\w*=)")
"""`+` before `key=`, so the `+` of an exponent (`1e+20`) stays inside its value."""


@dataclass(frozen=True, eq=False)
class Choice:
    """One axis's value. `str(choice)` is its text in canonical names: the name, then `+key=value`
    for each non-default setting (`rope+base=500000.0`). A choice without non-default settings
    equals (and hashes as) its plain name, so `spec.norm == "pre"` reads as it looks."""

    axis: str
    name: str
    given: tuple[tuple[str, Any], ...] = ()
    """The non-default settings, in the order of the part's settings model."""

    @cached_property
    def settings(self) -> PartSettings:
        """Every setting of the part, defaults included."""
        return settings_model(registry(self.axis).get(self.name)).model_validate(dict(self.given))

    def __getattr__(self, key: str) -> Any:
        """`spec.position.base`: a setting read straight off the choice."""
        if key.startswith("_") or key in ("axis", "name", "given", "settings"):
            raise AttributeError(key)
        return getattr(self.settings, key)

    def __str__(self) -> str:
        return self.name + "".join(f"+{key}={value_text(value)}" for key, value in self.given)

    def __repr__(self) -> str:
        return f"Choice({self.axis}={self})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Choice):
            return (self.axis, self.name, self.given) == (other.axis, other.name, other.given)
        if isinstance(other, str):
            return not self.given and self.name == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def dump(self) -> str | dict[str, Any]:
        """The plain name, or `{name, **non-default settings}`: what specs, YAML and checkpoints hold."""
        return self.name if not self.given else {"name": self.name, **dict(self.given)}


def parse_choice_text(text: str) -> str | dict[str, Any]:
    """The inverse of `str(choice)`: `rope+base=500000.0` -> {name: rope, base: 500000.0}."""
    name, *settings = SETTING_SEPARATOR.split(text)
    if not settings:
        return name
    fields: dict[str, Any] = {"name": name}
    for setting in settings:
        key, _, value = setting.partition("=")
        fields[key] = load_yaml(value, f"setting {key} of {text!r}")
    return fields


NAME_DOT = re.compile(r"(?<!\d)\.|\.(?!\d)")
"""The dots that separate a canonical name's axes: every dot but one inside a number (`0.5`)."""


def split_name(name: str) -> list[str]:
    return NAME_DOT.split(name)


def _problem(kind: str, text: str, **context: Any) -> PydanticCustomError:
    return PydanticCustomError(kind, "{text}", {"text": text, **context})


def settings_text(settings: PartSettings) -> str:
    return ", ".join(f"{key}={value_text(value)}" for key, value in settings.model_dump().items())


def part_text(axis: str, name: str) -> str:
    """`name(setting=default, ...)`, or the name of a part without settings (for `zoo list`)."""
    model = settings_model(registry(axis).get(name))
    return f"{name}({settings_text(model())})" if model.model_fields else name


def describe_settings(axis: str, name: str, model: type[PartSettings]) -> str:
    fields = model.model_fields
    if not fields:
        return f"{axis} '{name}' has no settings"
    return f"{axis} '{name}' settings: " + ", ".join(f"{key} (default {value_text(f.default)})" for key, f in fields.items())


def settings_error(axis: str, name: str, model: type[PartSettings], err: ValidationError) -> PydanticCustomError:
    problems = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            close = difflib.get_close_matches(key, list(model.model_fields), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            problems.append(f"unknown setting '{key}'{hint}")
        else:
            message = e["msg"].removeprefix("Value error, ")
            problems.append(f"{key}: {message}" if key else message)
    return _problem("part_settings", f"{'; '.join(problems)} ({describe_settings(axis, name, model)})")


def validate_choice(axis: str, value: Any) -> Choice:
    """A Choice from a name, a mapping `{name, **settings}` or a Choice of the same axis."""
    if isinstance(value, Choice) and value.axis == axis:
        return value
    if isinstance(value, str):
        name, fields = value, {}
    elif isinstance(value, Mapping):
        fields = dict(value)
        name = fields.pop("name", None)
        if not isinstance(name, str):
            raise _problem("part_name", f"a mapping for {axis} needs the part's name, e.g. {{name: ..., setting: value}}; "
                           f"choices: {', '.join(registry(axis).names())}")
    else:
        raise _problem("part_type", f"{axis} is a part's name or a mapping {{name: ..., setting: value}}, "
                       f"got {type(value).__name__} {value!r}")
    try:
        model = settings_model(registry(axis).get(name))
    except UnknownChoiceError as err:
        raise _problem("unknown_choice", str(err)) from None
    try:
        settings = model.model_validate(fields)
    except ValidationError as err:
        raise settings_error(axis, name, model, err) from None
    return Choice(axis, name, tuple(settings.model_dump(exclude_defaults=True).items()))


def choice_json_schema(axis: str) -> dict[str, Any]:
    """A name among the registered parts, or a mapping with a part's name and its settings."""
    mappings = []
    for name in registry(axis).names():
        schema = settings_model(registry(axis).get(name)).model_json_schema()
        if schema.get("properties"):
            properties = {"name": {"const": name}, **schema["properties"]}
            mappings.append({"type": "object", "title": name, "properties": properties, "required": ["name"],
                             "additionalProperties": False})
    names = {"type": "string", "enum": registry(axis).names()}
    return {"anyOf": [names, *mappings]} if mappings else names


@dataclass(frozen=True)
class AxisChoice:
    """Pydantic metadata for an axis field: validates to a Choice, dumps to a name or a mapping,
    and its JSON schema lists the parts and settings registered when it is asked for."""

    axis: str

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            lambda value: validate_choice(self.axis, value),
            serialization=core_schema.plain_serializer_function_ser_schema(Choice.dump),
        )

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict:
        return choice_json_schema(self.axis)
