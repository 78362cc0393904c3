"""`zoo coord-check`: a few steps at four or more widths under the standard parametrization and
muP, every layer whose update grows or vanishes with width flagged (zoo.compare.coord_check)."""

from __future__ import annotations

import argparse

from zoo.commands import Command, add_sets, positive_int, register
from zoo.specs.parametrization import PARAMETRIZATIONS


@register("coord-check", 40)
class CoordCheckCommand(Command):
    """train a few steps at 4 or more widths under the standard parametrization and muP, and flag
    every layer whose update grows or vanishes with width"""

    def run(self, args: argparse.Namespace) -> None:
        from zoo.compare.coord_check import coord_check, verdict_lines, write_coord_check
        from zoo.compare.tables import text_table
        from zoo.files import check_writable_folder
        from zoo.specs.experiment import load_experiment

        experiment = load_experiment(args.file, args.set)
        check_writable_folder(args.out, "--out")  # before minutes of training, not after
        base = experiment.model.d_model
        check = coord_check(experiment, args.widths or [base * k for k in (1, 2, 4, 8)], args.steps,
                            args.parametrization or PARAMETRIZATIONS)
        command = " ".join(["zoo coord-check", *([args.file] if args.file else []), *(f"--set {s}" for s in args.set),
                            "--widths", *map(str, check.widths), "--steps", str(args.steps)])
        files = write_coord_check(check, args.out, command)
        print(text_table(*check.table()))
        for line in verdict_lines(check):
            print(f"zoo coord-check: {line}")
        print(f"zoo coord-check: wrote {', '.join(map(str, files))}")
        if check.failed("mup"):
            raise SystemExit(1)

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", nargs="?", help="an ExperimentSpec YAML file; its d_model is the base width")
        add_sets(parser, "override experiment fields")
        parser.add_argument("--widths", type=positive_int, nargs="+", metavar="D",
                            help="d_model of each width (default: the base width times 1, 2, 4 and 8)")
        parser.add_argument("--steps", type=positive_int, default=4, help="training steps at each width")
        parser.add_argument("--parametrization", choices=PARAMETRIZATIONS, action="append",
                            help="one of them only (default: both)")
        parser.add_argument("--out", default="coord_check", help="the folder of coord_check.md and coord_check.png")
