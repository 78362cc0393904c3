"""zoo: a Transformer architecture-variant zoo for ablation studies. Pick a variant by name, train
it, sweep a grid of design choices over seeds, compare the variants with intervals."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from zoo.commands import help_order
from zoo.errors import exit_code_of

EXAMPLES = """examples:
  zoo list                                          presets, every axis's parts, tasks and their metrics
  zoo show pre-ln --set vocab_size=8000             the resolved spec of a preset or canonical name
  zoo show optimizer adafactor                      a registered choice's settings and defaults
  zoo train --set model.norm=pre train.steps=200    one run (no file: the default experiment)
  zoo train experiments/multi30k.yaml --print-config  the resolved experiment and its folder, nothing run
  zoo eval runs/RUN/checkpoint.pt --beams 4         score a checkpoint again, greedy or with beams
  zoo average runs/RUN --last 5 -o avg.pt           average the last checkpoints' weights
  zoo sweep experiments/seed_axes.yaml --workers 2  a grid of variants over seeds
  zoo compare sweeps/seed-axes                      ranked table, axis effects, plots, report.md
  zoo reproduce sweeps/seed-axes/ledger.jsonl       train recorded cells again and compare
  zoo build-all --only '*.moe.*'                    build and run every combination
each command's own --help says more."""


class PrintVersion(argparse.Action):
    """--version: the zoo's version and commit, and torch's, found only when asked (torch loads slowly)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the zoo's version, commit and torch's version")

    def __call__(self, parser, namespace, values, option_string=None):
        import torch

        from zoo.provenance import zoo_commit, zoo_version

        print(f"zoo {zoo_version()} (commit {zoo_commit() or 'unknown'}; torch {torch.__version__})")
        parser.exit()


PROGRAM = "zoo.cli"
"""This module: what a command that runs itself again (`zoo train --procs N`, in each rank) runs."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every registered command (zoo.commands), each with the arguments it declares."""
    parser = argparse.ArgumentParser(prog="zoo", description=__doc__, epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=PrintVersion)
    parser.set_defaults(program=PROGRAM)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, command in help_order():
        command.add_args(commands.add_parser(name, help=command.help.replace("%", "%%")))
        commands.choices[name].set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and getattr(args, "command", None) == "reproduce" and not any(word.startswith("-") for word in rest):
        args.cells += rest  # cells after a flag (`zoo reproduce LEDGER --early CELL`), which argparse leaves over
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    code = exit_code_of(lambda: args.run(args))
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    main()
