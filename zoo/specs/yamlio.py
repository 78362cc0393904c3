"""Every YAML the zoo reads (files, `--set` values, presets) goes through one safe loader.

The loader follows YAML 1.2's core schema for plain scalars: only `true` and `false` are booleans
(`no` stays the string "no", which a boolean field then rejects instead of silently reading it as
false), `1e-3` is a float, `010` is not an octal number, and dates stay strings. Syntax errors and
unsafe tags become one ConfigError that names the source, the line and the column.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from zoo.errors import ConfigError
from zoo.files import read_bounded
from zoo.near_paths import near_path

_DROPPED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
            "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}


class CoreLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema booleans, integers and floats, that refuses a mapping
    with a key twice (PyYAML keeps the last silently, so a grid written twice runs half of it)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, yaml.Mark] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *base` merges keys that the mapping's own keys may override
                key = self.construct_object(key_node, deep=True)
                try:
                    mark = first.setdefault(key, key_node.start_mark)
                except TypeError:
                    continue  # an unhashable key: the base loader says what is wrong with it
                if mark is not key_node.start_mark:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} appears twice (first on line {mark.line + 1})", key_node.start_mark)
        return super().construct_mapping(node, deep)


CoreLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _DROPPED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
CoreLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                 list("tTfF"))
CoreLoader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?[0-9]+$|^0x[0-9a-fA-F]+$"),
                                 list("-+0123456789"))
CoreLoader.add_constructor("tag:yaml.org,2002:int",
                           lambda loader, node: int(loader.construct_scalar(node), 0 if "x" in node.value else 10))
CoreLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."),
)


class CoreDumper(yaml.SafeDumper):
    """SafeDumper that quotes every string that either YAML 1.2 (the zoo) or YAML 1.1 (PyYAML, as
    W&B reads a sweep file) would read as something else: "1e-3", "010", "no", "on"."""


CoreDumper.yaml_implicit_resolvers = {
    first: [*CoreLoader.yaml_implicit_resolvers.get(first, []), *yaml.SafeDumper.yaml_implicit_resolvers.get(first, [])]
    for first in {*CoreLoader.yaml_implicit_resolvers, *yaml.SafeDumper.yaml_implicit_resolvers}
}


MOST_VALUES = 1_000_000
"""Values a YAML text may stand for once its aliases are expanded: a "billion laughs" of nested
aliases reads as a few objects, then takes the machine's memory when a grid is expanded or copied."""
MOST_DEPTH = 100
"""Levels of nesting: an experiment needs a handful; thousands would overflow Python's stack."""


def load_yaml(text: str, source: str) -> Any:
    """The data of a YAML text; `source` (a file name, or `--set key=value`) names it in errors."""
    try:
        data = yaml.load(text, Loader=CoreLoader)
    except RecursionError:
        raise ConfigError(f"{source}: invalid YAML: nested too deeply to read (the zoo reads at most "
                          f"{MOST_DEPTH} levels)") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context = getattr(err, "context", None)
        raise ConfigError(f"{where}: invalid YAML: {problem}" + (f" ({context})" if context else "")) from None
    values = expanded_size(data, source)
    if values > MOST_VALUES:
        raise ConfigError(f"{source}: its aliases (*name) expand to {values:,} values, more than the {MOST_VALUES:,} "
                          "the zoo reads; write the values out, or use fewer nested aliases")
    glued = glued_key(data)
    if glued is not None:
        key, value = glued.split(":", 1)
        raise ConfigError(f"{source}: YAML reads {{{glued}}} as one key {glued!r} without a value; put a space after "
                          f"the colon: {{{key}: {value}}}")
    return data


def glued_key(data: Any) -> str | None:
    """A flow mapping's key with a colon and no value (`{name:rope}`, a space missing after the
    colon), which no zoo field is named: the first one found."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and value is None and ":" in key.strip(":"):
                return key
            found = glued_key(value)
            if found is not None:
                return found
    elif isinstance(data, list):
        return next((found for item in data if (found := glued_key(item)) is not None), None)
    return None


def expanded_size(data: Any, source: str, depth: int = 0, seen: dict[int, int] | None = None) -> int:
    """How many values `data` holds with every alias expanded, counted once per shared object."""
    if depth > MOST_DEPTH:
        raise ConfigError(f"{source}: nested more than {MOST_DEPTH} levels deep (or an alias that holds itself)")
    if not isinstance(data, dict | list):
        return 1
    seen = {} if seen is None else seen
    if id(data) not in seen:
        children = [*data.keys(), *data.values()] if isinstance(data, dict) else data
        seen[id(data)] = 1 + sum(expanded_size(child, source, depth + 1, seen) for child in children)
    return seen[id(data)]


def read_yaml(path: str | Path, what: str) -> Any:
    """The data of a YAML file; an unreadable file or bad YAML is a ConfigError naming it."""
    path = Path(path)
    try:
        text = read_bounded(path, what).decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: {what} is not UTF-8 text") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read {what}: {err.strerror or err}{near_path(path)}") from None
    return load_yaml(text, str(path))


def read_mapping(path: str | Path, what: str, empty_ok: bool = False) -> dict[str, Any]:
    """A YAML file that must hold a mapping (an experiment, a sweep, a model spec)."""
    data = read_yaml(path, what)
    if data is None and not empty_ok:
        raise ConfigError(f"{path}: the {what} is empty; write its fields (or give no file to run the defaults)")
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: a {what} holds a mapping of fields, got {type(data).__name__}")
    return data or {}


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=CoreDumper, sort_keys=False, allow_unicode=True)
