"""The command line's commands, registered by name as parts are: each declares its arguments
beside its body (fairseq's `add_args`), and `zoo --help` lists every registered command in its
`order`. Adding a command is one class in a module here, found by the package."""

from __future__ import annotations

import argparse
import inspect
import math
from typing import ClassVar

from zoo.specs.registries import Registry, import_modules

COMMANDS: Registry[Command] = Registry("command", plugins=False)


class Command:
    """One `zoo` command: its docstring's first paragraph is its line in `zoo --help`; `run` its
    body, `add_args` its arguments, on its own parser."""

    order: ClassVar[int]
    """Where `zoo --help` lists it."""

    @property
    def help(self) -> str:
        return " ".join(inspect.getdoc(self).split("\n\n")[0].split())

    def run(self, args: argparse.Namespace) -> None:
        raise NotImplementedError

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        """No arguments but the command's name."""


def register(name: str, order: int):
    """Register a command class as `zoo NAME`, listed `order`-th by `zoo --help`."""
    def add(command: type[Command]) -> type[Command]:
        command.order = order
        COMMANDS.register(name)(command())
        return command

    return add


def help_order() -> list[tuple[str, Command]]:
    return sorted(((name, COMMANDS.get(name)) for name in COMMANDS.names()), key=lambda item: item[1].order)


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def add_sets(parser: argparse.ArgumentParser, help: str, metavar: str = "DOTTED.KEY=VALUE") -> None:
    """--set KEY=VALUE ..., repeatable, the way every command that changes a spec takes it."""
    parser.add_argument("--set", action="extend", nargs="+", default=[], metavar=metavar, help=help)


import_modules(__name__, __path__)  # every module: each registers its commands
