"""Registries: for each axis of the design, a name -> part class table.

Built-in parts live in `zoo.variants`; third-party packages add parts through the entry-point
group `zoo.variants` (a module that registers its parts when imported). Both are loaded once, on
the first lookup, so importing `zoo` stays cheap and registration order never matters.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from zoo.errors import ConfigError

AXES: tuple[str, ...] = ("norm", "position", "attention", "ffn", "norm_type")
"""The model's design axes, in the order they appear in a canonical variant name."""

NAMED_AXES: tuple[str, ...] = ("norm", "position", "attention", "ffn")
"""The axes every canonical name shows. An axis added later shows only when it is not at its
default, so the names, folders and ledgers written before it existed stay valid."""

PLUGIN_GROUP = "zoo.variants"

KINDS: dict[str, Any] = {}
"""The one table of model kinds: each kind's name -> its model class (a zoo.model.zoo_model.ZooModel),
whose `reads` are the stacks its models have. The built-in kinds register as a plugin's kind does
(register_kind), when the built-in packages load; read it through `kinds()`. A kind of one stack
has one vocabulary; the spec builds only the layers of the stacks its kind has. A kind may begin a
canonical name, so no part may take its name."""

T = TypeVar("T")


def swapped(typed: str, choice: str) -> bool:
    """Whether `typed` is `choice` with two neighbouring letters swapped (`gleu` for `gelu`): the
    likeliest typo, which a similarity ratio can rank below a shorter name (`glu`)."""
    diff = [i for i, (a, b) in enumerate(zip(typed, choice)) if a != b]
    return (len(typed) == len(choice) and len(diff) == 2 and diff[1] == diff[0] + 1
            and typed[diff[0]] == choice[diff[1]] and typed[diff[1]] == choice[diff[0]])


def describe_unknown(kind: str, name: object, choices: Iterable[str]) -> str:
    """The one message for an unknown choice: what was asked, a close match, and every choice."""
    choices = sorted(choices)
    close = close_match(name, choices)
    hint = f"; did you mean '{close}'?" if close else ";"
    return f"unknown {kind} '{name}'{hint} choices: {', '.join(choices)}"


def close_match(name: object, choices: Iterable[str]) -> str | None:
    """The choice `name` most likely meant: two neighbouring letters swapped, else the closest."""
    choices = sorted(choices)
    close = [c for c in choices if swapped(str(name), c)] or difflib.get_close_matches(str(name), choices, n=1, cutoff=0.6)
    return close[0] if close else None


class UnknownChoiceError(ConfigError):
    """A name that no registry (or preset table) knows."""

    def __init__(self, kind: str, name: object, choices: Iterable[str], hint: str = ""):
        self.kind, self.name, self.choices = kind, name, sorted(choices)
        super().__init__(describe_unknown(kind, name, self.choices) + hint)


class Registry(Generic[T]):
    """Name -> part for one axis. `register(name)` is a class decorator."""

    def __init__(self, kind: str, plugins: bool = True):
        """`plugins`: whether a lookup first loads the built-in packages and entry-point plugins
        (every registry of parts, tasks and metrics); the command line's and the comparison's own
        registries hold only their package's modules, and `zoo --help` must not wait for torch."""
        self.kind, self.plugins = kind, plugins
        self._parts: dict[str, T] = {}
        self._checks: list[Callable[[str, T], None]] = []

    def check_with(self, check: Callable[[str, T], None]) -> None:
        """Run `check(name, part)` on every part registered from now on: a kind's own demands of
        its parts (a metric's declared direction), refused at registration with a ConfigError."""
        self._checks.append(check)

    def register(self, name: str) -> Callable[[T], T]:
        if name in KINDS:
            raise ConfigError(f"{self.kind} name {name!r} is reserved: a canonical variant name may start with a model "
                              f"kind ({', '.join(KINDS)})")
        if not name or "." in name or name != name.strip():
            raise ConfigError(
                f"{self.kind} name {name!r} is not allowed: names are non-empty, without dots "
                "(dots separate the axes of a canonical variant name) and without spaces"
            )

        def add(part: T) -> T:
            for check in self._checks:
                check(name, part)
            if name in self._parts:
                taken = self._parts[name]
                raise ConfigError(
                    f"{self.kind} '{name}' is already registered by "
                    f"{taken.__module__}.{taken.__qualname__}; pick another name"
                )
            self._parts[name] = part
            return part

        return add

    def get(self, name: str) -> T:
        if self.plugins and not _plugins_loaded:  # asked thousands of times per spec: the check, not a call
            load_plugins()
        try:
            return self._parts[name]
        except (KeyError, TypeError):
            raise UnknownChoiceError(self.kind, name, self._parts) from None

    def names(self) -> list[str]:
        if self.plugins:
            load_plugins()
        return sorted(self._parts)

    def __contains__(self, name: object) -> bool:
        if self.plugins:
            load_plugins()
        return name in self._parts

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.names())})"


TASKS = "task"
"""The registry of training tasks; not a model axis."""
RECIPE = ("optimizer", "schedule")
"""The registries of the training recipe's choices (zoo.optim); not model axes."""

METRIC = "metric"
"""The registry of held-out metrics (zoo.metrics): each with its direction, range and the tasks that report it."""

FORMAT = "format"
"""The registry of corpus formats (zoo.tasks.formats): how a split's sentence pairs are stored."""

_REGISTRIES: dict[str, Registry] = {kind: Registry(kind) for kind in (*AXES, TASKS, *RECIPE, METRIC, FORMAT)}


def registry(kind: str) -> Registry:
    """The registry of one axis, e.g. `registry("ffn").names()`."""
    try:
        return _REGISTRIES[kind]
    except (KeyError, TypeError):
        raise UnknownChoiceError("registry", kind, _REGISTRIES) from None


def import_modules(package: str, path: Iterable[str]) -> None:
    """Import every module of a package (its `__name__` and `__path__`): a module of built-in parts,
    tasks or optimizers registers them when imported, so none can be left out by a forgotten line."""
    for found in pkgutil.iter_modules(path):
        importlib.import_module(f"{package}.{found.name}")


BUILT_IN: list[str] = []
"""The packages of built-in parts, tasks, corpus formats, optimizers, schedules and metrics: `zoo`
itself (the top floor) names them here when it is imported, so no lower floor loads a higher one by
name; each package imports every module it holds (import_modules)."""

_plugins_loaded = False


def kinds() -> dict[str, Any]:
    """KINDS, the built-in kinds and the plugins' loaded."""
    load_plugins()
    return KINDS


def register_kind(model: T) -> T:
    """Add a kind of model (a class decorator): a ZooModel subclass with its own `kind` name, the
    stacks it `reads` and its framing; specs then accept `kind: NAME`, and the trainer, evaluation
    and decoding use its class methods. Its name may not be a part's, nor a kind's already."""
    kind = model.kind  # type: ignore[attr-defined]
    if kind in KINDS or any(kind in registry(axis) for axis in AXES):
        raise ConfigError(f"kind {kind!r} is taken (a kind or a part of that name exists); pick another name")
    KINDS[kind] = model
    return model


def load_plugins() -> None:
    """Import the built-in packages (BUILT_IN), then every `zoo.variants` entry point, once per process.

    A broken third-party plugin is reported as a warning and skipped, so it cannot take the
    built-in variants down with it; a broken built-in is a bug and raises.
    """
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    try:
        for package in BUILT_IN:
            importlib.import_module(package)
    except BaseException:
        _plugins_loaded = False
        raise
    from importlib.metadata import entry_points  # here: `import zoo` names the built-ins without reading metadata

    for point in entry_points(group=PLUGIN_GROUP):
        try:
            point.load()
        except Exception as err:  # a plugin's bug must not break the zoo
            warnings.warn(
                f"zoo plugin '{point.name}' ({point.value}) failed to load and was skipped: {err!r}",
                RuntimeWarning,
                stacklevel=2,
            )


def build_part(axis: str, spec: Any, **context: Any) -> Any:
    """The part (an nn.Module) the spec names on an axis, built from the spec (and, for norm
    placements and position schemes, the `site` they serve)."""
    return registry(axis).get(getattr(spec, axis).name)(spec, **context)
