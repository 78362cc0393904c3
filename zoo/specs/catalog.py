"""Picking a variant by name: presets (data, chained from a base) and canonical names.

A preset is a partial ModelSpec with an optional `base` preset it extends; resolving one walks the
chain and applies each level's fields on top of its base's. Every combination of registered axis
values is also reachable by its canonical name (`pre.learned.per_head.gelu`, and with a kind that
is not the default, `decoder.pre.learned.per_head.gelu`) without being listed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from zoo.errors import ConfigError, ConfigTypeError, describe_validation
from zoo.specs.choices import SETTING_SEPARATOR, Choice, parse_choice_text, split_name
from zoo.specs.model_spec import DEFAULT_KIND, ModelRecipe, ModelSpec
from zoo.specs.registries import AXES, NAMED_AXES, UnknownChoiceError, kinds, load_plugins, registry
from zoo.specs.switches import grouped, merge_groups
from zoo.specs.yamlio import load_yaml, read_mapping

Spec = TypeVar("Spec", bound=ModelRecipe)

_PRESETS: dict[str, dict[str, Any]] = {}


def register_preset(name: str, fields: Mapping[str, Any], *, base: str | None = None, description: str = "") -> None:
    """Add a preset (plugins call this too). Names are unique and dot-free (dots mean axes); a
    preset whose chain of bases would come back to itself is refused here, not at first use."""
    if not isinstance(name, str) or not name or "." in name:
        raise ConfigError(f"preset name {name!r} must be a non-empty string free of dots")
    if name in _PRESETS:
        raise ConfigError(f"preset '{name}' is already registered")
    if not isinstance(fields, Mapping):
        raise ConfigError(f"preset '{name}': its fields must be a mapping, got {type(fields).__name__}")
    if base is not None and not isinstance(base, str):
        raise ConfigError(f"preset '{name}': base must be a preset name, got {base!r}")
    chain, level = [name], base
    while level is not None and level in _PRESETS:
        if level in chain:
            break
        chain.append(level)
        level = _PRESETS[level]["base"]
    if level is not None and level in chain:
        raise ConfigError(f"preset '{name}' would extend itself: {' -> '.join([*chain, level])}")
    _PRESETS[name] = {"base": base, "description": description, "fields": entering(fields, f"preset '{name}'")}


def register_presets_file(path: Path) -> None:
    """Register every preset of a YAML file ({name: {spec, base, description}}): the built-in
    presets.yaml (zoo.variants.presets) and a plugin's own."""
    for name, entry in load_yaml(path.read_text(encoding="utf-8"), str(path)).items():
        register_preset(name, entry.get("spec", {}), base=entry.get("base"), description=entry.get("description", ""))


def _presets() -> dict[str, dict[str, Any]]:
    load_plugins()  # the built-in presets register with the built-in parts
    return _PRESETS


def list_variants(pattern: str = "*") -> list[str]:
    """Preset names matching an fnmatch pattern, like timm's `list_models("*pattern*")`."""
    return sorted(name for name in _presets() if fnmatch.fnmatchcase(name, pattern))


def preset_chain(name: str) -> list[str]:
    """The preset and its bases, most basic first."""
    presets, chain = _presets(), []
    while name is not None:
        if name not in presets:
            raise UnknownChoiceError("preset", name, presets)
        if name in chain:
            raise ConfigError(f"preset '{name}' extends itself: {' -> '.join([*chain, name])}")
        chain.append(name)
        name = presets[name]["base"]
    return chain[::-1]


def preset_fields(name: str) -> dict[str, Any]:
    """The fields a preset sets, its bases' included."""
    fields: dict[str, Any] = {}
    for level in preset_chain(name):
        fields = merge_fields(fields, _presets()[level]["fields"])
    return fields


def preset_description(name: str) -> str:
    """The preset's description; a preset whose base was never registered says so instead of
    failing, so `zoo list` always lists."""
    try:
        chain = preset_chain(name)
    except ConfigError as err:
        return f"(unusable: {err})"
    return _presets()[chain[-1]]["description"]


def entering(fields: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Fields where they enter the catalog (a preset, a name's switches, a mapping, overrides):
    the one step that moves old flat switch keys into their groups (zoo.specs.switches.grouped),
    after which everything here holds the grouped form only."""
    try:
        return grouped(fields)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}" if where else str(err)) from None


def merge_fields(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Overrides on top of base, both in the grouped form (`entering`), where `vocab_size` stands
    for both vocabulary sizes, an axis mapping without a name changes settings of the base's part
    (`position: {base: 500000}`), and a switch in its group changes that switch alone."""
    merged, overrides = dict(base), dict(overrides)
    overrides = {key: _merge_axis(key, merged.get(key), value) for key, value in overrides.items()}
    overrides.update(following_width(merged, overrides))
    overrides.update(merge_groups(merged, overrides))
    if "vocab_size" in merged and ({"vocab_size", "src_vocab_size", "tgt_vocab_size"} & set(overrides)):
        size = merged.pop("vocab_size")
        merged.setdefault("src_vocab_size", size)
        merged.setdefault("tgt_vocab_size", size)
    if "vocab_size" in overrides:
        merged.pop("src_vocab_size", None)
        merged.pop("tgt_vocab_size", None)
    merged.update(overrides)
    return merged


def base_widths(base: Mapping[str, Any]) -> tuple[Any, Any]:
    """(d_model, d_ff) of fields, each the spec's default where they do not give it."""
    return tuple(base.get(key, ModelSpec.model_fields[key].default) for key in ("d_model", "d_ff"))


def following_width(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """d_ff for a d_model given without one: the base's d_ff scaled to the new width (its ratio
    kept: 4 x d_model for vaswani2017 and the canonical names), not the base's 2048 at any width.
    Nothing where d_ff is given, `auto` (the feed-forward part sizes itself) or the width unchanged."""
    width, (was, inner) = overrides.get("d_model"), base_widths(base)
    counts = all(isinstance(value, int) and not isinstance(value, bool) for value in (width, was, inner))
    if "d_ff" in overrides or not counts or width == was:
        return {}
    return {"d_ff": max(1, round(width * inner / was))}


def _merge_axis(key: str, base: Any, value: Any) -> Any:
    if key not in AXES or not isinstance(value, Mapping) or "name" in value:
        return value
    if base is None:
        base = ModelSpec.model_fields[key].default
    if isinstance(base, Choice):
        base = base.dump()
    return {**({"name": base} if isinstance(base, str) else dict(base)), **value}


def axis_fields(parts: list[str]) -> dict[str, Any]:
    """The axis values of a canonical name's parts: NAMED_AXES in order, then later axes by the
    part each names."""
    fields: dict[str, Any] = dict(zip(NAMED_AXES, map(parse_choice_text, parts)))
    for text in parts[len(NAMED_AXES):]:
        value = parse_choice_text(text)
        name = value if isinstance(value, str) else value["name"]
        axes = [axis for axis in AXES if axis not in NAMED_AXES and name in registry(axis)]
        if len(axes) != 1:
            later = [f"{a}: {', '.join(registry(a).names())}" for a in AXES if a not in NAMED_AXES]
            raise ConfigError(f"'{text}' in a canonical name names {'no' if not axes else 'more than one'} later axis"
                              f"{'; choices: ' + '; '.join(later) if later else ' (there are none)'}")
        if axes[0] in fields:
            raise ConfigError(f"a canonical name gives {axes[0]} twice: {fields[axes[0]]} and {text}")
        fields[axes[0]] = value
    return fields


SWITCH_TEXT = re.compile(r"[A-Za-z_]\w*=")
"""A canonical name's last part holds its switches where it starts with `key=` (no part does)."""


def switch_fields(text: str) -> dict[str, Any]:
    """The switches of a canonical name's last part: `qk_norm=rmsnorm+window=128` -> fields."""
    fields = {}
    for switch in SETTING_SEPARATOR.split(text):
        key, _, value = switch.partition("=")
        if key in fields:
            raise ConfigError(f"a canonical name gives the switch {key} twice: {text}")
        fields[key] = load_yaml(value, f"switch {key} of {text!r}")
    return fields


def name_fields(name: str) -> dict[str, Any]:
    """The fields a preset or canonical name stands for."""
    if not isinstance(name, str):
        raise ConfigError(f"a variant name must be a string, got {type(name).__name__}")
    if name in _presets():
        return preset_fields(name)
    parts = split_name(name)
    kind = {"kind": parts.pop(0)} if parts and parts[0] in kinds() and parts[0] != DEFAULT_KIND else {}
    switches = switch_fields(parts.pop()) if parts and SWITCH_TEXT.match(parts[-1]) else {}
    if len(parts) >= len(NAMED_AXES) and all(parts):
        return {**kind, **axis_fields(parts), **entering(switches, f"the switches of {name!r}")}
    raise UnknownChoiceError(
        "variant", name, _presets(), hint=f"; or a canonical name [decoder. or encoder.]{'.'.join(NAMED_AXES)}, "
        "e.g. post.sinusoidal.fused.relu or decoder.pre.rope.sdpa.swiglu"
    )


def validated(fields: Mapping[str, Any], into: type[Spec] = ModelSpec) -> Spec:
    """A ModelSpec (or another `into`) of `fields`; a bad field is the zoo's ConfigError (naming
    the field and what is wrong), with pydantic's ValidationError as its cause."""
    try:
        return into.model_validate(fields)
    except ValidationError as err:
        raise ConfigError(describe_validation(err)) from err


def spec(name: str, **overrides: Any) -> ModelSpec:
    """A validated ModelSpec for a preset or canonical name, with field overrides."""
    return validated(merge_fields(name_fields(name), entering(overrides)))


def resolve(source: ModelSpec | str | Mapping[str, Any], **overrides: Any) -> ModelSpec:
    """A ModelSpec from a spec, a name, or a mapping (which may name a `preset` to start from)."""
    if isinstance(source, ModelSpec):
        if not overrides:
            return source
        return validated(merge_fields(source.model_dump(), entering(overrides)))
    if isinstance(source, str):
        return spec(source, **overrides)
    if isinstance(source, Mapping):
        return validated(written_fields(source, overrides))
    if isinstance(source, ModelRecipe):
        raise ConfigTypeError("a ModelRecipe leaves its vocabulary sizes to a task: give them with recipe.sized(src, tgt)")
    raise ConfigTypeError(f"cannot make a ModelSpec from {type(source).__name__}; give a ModelSpec, a name or a mapping")


def written_fields(source: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The fields a mapping stands for: its `preset`'s (if it names one), then its own, then `overrides`."""
    fields = dict(source)
    preset = fields.pop("preset", None)
    base = name_fields(preset) if preset is not None else {}
    return merge_fields(merge_fields(base, entering(fields)), entering(overrides or {}))


def recipe(source: ModelRecipe | str | Mapping[str, Any]) -> ModelRecipe:
    """A ModelRecipe (vocabulary sizes optional) from a recipe, a name, or a mapping that may name
    a `preset`: an experiment's model, whose sizes its task fills in."""
    if isinstance(source, ModelRecipe):
        return source if type(source) is ModelRecipe else validated(source.model_dump(), ModelRecipe)
    return validated(name_fields(source) if isinstance(source, str) else written_fields(source), ModelRecipe)


def load_spec(path: str | Path, **overrides: Any) -> ModelSpec:
    """A ModelSpec from a YAML (or JSON) file: full fields, or `preset:` plus overrides."""
    try:
        return resolve(read_mapping(path, "model spec file"), **overrides)
    except ConfigError as err:
        raise ConfigError(err.args[0] if str(err).startswith(str(path)) else f"{path}: {err}") from err.__cause__
