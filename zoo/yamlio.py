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

_DROPPED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
            "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}


class CoreLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema booleans, integers and floats."""


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


def load_yaml(text: str, source: str) -> Any:
    """The data of a YAML text; `source` (a file name, or `--set key=value`) names it in errors."""
    try:
        return yaml.load(text, Loader=CoreLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context = getattr(err, "context", None)
        raise ConfigError(f"{where}: invalid YAML: {problem}" + (f" ({context})" if context else "")) from None


def read_yaml(path: str | Path, what: str) -> Any:
    """The data of a YAML file; an unreadable file or bad YAML is a ConfigError naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: {what} is not UTF-8 text") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read {what}: {err.strerror or err}") from None
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
