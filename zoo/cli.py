"""zoo: a Transformer architecture-variant zoo for ablation studies. Pick a variant by name, train
it, sweep a grid of design choices over seeds, compare the variants with intervals."""

from __future__ import annotations

import argparse
import fnmatch
import itertools
import math
import os
import time
from collections.abc import Sequence

from zoo.cli_data import add_data_commands
from zoo.cli_registries import cmd_list, cmd_show, model_sets
from zoo.cli_runs import cmd_average, cmd_consolidate, cmd_eval, cmd_train
from zoo.cli_sweeps import cmd_compare, cmd_reproduce, cmd_sweep
from zoo.errors import ConfigError, exit_code_of
from zoo.specs.catalog import (
    resolve,
)
from zoo.specs.model_spec import ModelSpec
from zoo.specs.parametrization import PARAMETRIZATIONS
from zoo.specs.registries import AXES, registry

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


BUILD_ALL_SIZE = {"vocab_size": 64, "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "d_ff": 64, "n_encoder_layers": 1,
                  "n_decoder_layers": 2}
"""build-all's default size: every combination checked in seconds; sizes of a preset by --set."""


DEFAULT_NORM_TYPE = ModelSpec.model_fields["norm_type"].default


def combination_names(combo: tuple[str, ...]) -> tuple[str, ...]:
    """The parts joined in axis order, and the canonical name's form where norm_type is its
    default and so left out (`pre.rope.fused.relu`)."""
    joined = ".".join(combo)
    return (joined, ".".join(combo[:-1])) if combo[-1] == DEFAULT_NORM_TYPE else (joined,)


def combinations(only: str = "*") -> list[tuple[str, ...]]:
    """Every registered combination of the axes' parts whose name `only` matches (a glob)."""
    return [combo for combo in itertools.product(*(registry(axis).names() for axis in AXES))
            if any(fnmatch.fnmatchcase(name, only) for name in combination_names(combo))]


def cmd_build_all(args: argparse.Namespace) -> None:
    """Build every registered combination, run one forward pass, print its name and size."""
    import torch

    from zoo.model.kinds import build

    overrides = {**BUILD_ALL_SIZE, **model_sets(args.set)}
    combos = combinations(args.only)
    if not combos:
        raise ConfigError(f"build-all: --only {args.only!r} matches no combination of {'.'.join(AXES)} (nor a "
                          f"canonical name, which leaves out norm_type {DEFAULT_NORM_TYPE!r}), e.g. "
                          "'pre.rope.fused.relu' or '*.moe.*'")
    sizes = ", ".join(f"{k} {v}" for k, v in overrides.items())
    print(f"{len(combos)} combinations of {', '.join(AXES)} on preset {args.preset} ({sizes})")
    src = torch.tensor([[5, 6, 7, 8, 2, 0], [9, 10, 11, 12, 13, 2]])
    tgt = torch.tensor([[1, 8, 7, 6, 5, 2], [1, 13, 12, 11, 10, 9]])
    start = time.perf_counter()
    for combo in combos:
        spec = resolve({"preset": args.preset, **dict(zip(AXES, combo))}, **overrides)
        model = build(spec, seed=0).eval()
        with torch.no_grad():
            logits = model(src.clamp(max=spec.src_vocab_size - 1), tgt.clamp(max=spec.tgt_vocab_size - 1))
        if not torch.isfinite(logits).all():
            raise SystemExit(f"zoo: {spec.name} produced non-finite logits")
        print(f"{spec.axes_name:36s} {model.num_parameters():>12,d} parameters")  # the sizes' switches are on line 1
    print(f"built and ran {len(combos)} models in {time.perf_counter() - start:.1f} s")


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


class PrintVersion(argparse.Action):
    """--version: the zoo's version and commit, and torch's, found only when asked (torch loads slowly)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the zoo's version, commit and torch's version")

    def __call__(self, parser, namespace, values, option_string=None):
        import torch

        from zoo.provenance import zoo_commit, zoo_version

        print(f"zoo {zoo_version()} (commit {zoo_commit() or 'unknown'}; torch {torch.__version__})")
        parser.exit()


def cmd_coord_check(args: argparse.Namespace) -> None:
    from zoo.compare.tables import text_table
    from zoo.coord_check import coord_check, verdict_lines, write_coord_check
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
    if check.grows("mup") or check.diverged("mup"):
        raise SystemExit(1)


def cmd_train_in_ranks(args: argparse.Namespace) -> None:
    """`zoo train`, or with --procs N, this command again in N ranks under torchrun (zoo.sweep.torchrun_cell):
    this process trains nothing and ends with the ranks' code, a refusal said once (exit 2)."""
    if args.procs is None or "RANK" in os.environ:
        return cmd_train(args)
    from zoo.sweep.torchrun_cell import launch

    ranks = ["train", *([args.file] if args.file else []), *(["--set", *args.set] if args.set else []),
             *(["--resume"] if args.resume else []), *(["--reshard"] if args.reshard else []),
             *(["--print-config"] if args.print_config else [])]
    code = launch(["-m", "zoo.cli", *ranks], args.procs)
    if code:
        raise SystemExit(code)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zoo", description=__doc__, epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=PrintVersion)
    commands = parser.add_subparsers(dest="command", required=True)

    listing = commands.add_parser("list", help="list presets and the registered parts of every axis")
    listing.add_argument("pattern", nargs="?", default="*", help="fnmatch pattern over preset names")
    listing.set_defaults(run=cmd_list)

    show = commands.add_parser("show", help="print the resolved spec of a preset or canonical name")
    show.add_argument("name", help="a preset or canonical name; or a kind (optimizer, schedule, task, an axis) ...")
    show.add_argument("choice", nargs="?", help="... and a registered name of it: zoo show optimizer adafactor")
    show.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                      help="ModelSpec fields, e.g. --set vocab_size=8000 d_model=256")
    show.set_defaults(run=cmd_show)

    build_all = commands.add_parser("build-all", help="build and run every registered combination, at a small size "
                                    "unless --set says otherwise")
    build_all.add_argument("--preset", default="vaswani2017", help="sizes and options for every combination")
    build_all.add_argument("--only", default="*", metavar="GLOB",
                           help="only the combinations whose parts, joined by dots in axis order (norm_type too), match, "
                           "e.g. '*.moe.*'")
    build_all.add_argument("--set", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                           help="ModelSpec fields for every combination (default: "
                           + " ".join(f"{k}={v}" for k, v in BUILD_ALL_SIZE.items()) + "), e.g. --set d_model=512")
    build_all.set_defaults(run=cmd_build_all)

    checking = commands.add_parser("coord-check", help="train a few steps at 4 or more widths under the standard "
                                   "parametrization and muP, and flag every layer whose activations grow with width")
    checking.add_argument("file", nargs="?", help="an ExperimentSpec YAML file; its d_model is the base width")
    checking.add_argument("--set", action="extend", nargs="+", default=[], metavar="DOTTED.KEY=VALUE",
                          help="override experiment fields")
    checking.add_argument("--widths", type=positive_int, nargs="+", metavar="D",
                          help="d_model of each width (default: the base width times 1, 2, 4 and 8)")
    checking.add_argument("--steps", type=positive_int, default=4, help="training steps at each width")
    checking.add_argument("--parametrization", choices=PARAMETRIZATIONS, action="append",
                          help="one of them only (default: both)")
    checking.add_argument("--out", default="coord_check", help="the folder of coord_check.md and coord_check.png")
    checking.set_defaults(run=cmd_coord_check)

    training = commands.add_parser("train", help="train one experiment (no file: experiments/reverse.yaml, "
                                      "the default variant on reverse)")
    training.add_argument("file", nargs="?", help="an ExperimentSpec YAML file")
    training.add_argument("--set", action="extend", nargs="+", default=[], metavar="DOTTED.KEY=VALUE",
                          help="e.g. --set model.norm=pre train.steps=200 (or --set before each)")
    training.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint")
    training.add_argument("--reshard", action="store_true",
                          help="with --resume: read a sharded checkpoint (train.parallel fsdp) at another world size than "
                               "the one that wrote it")
    training.add_argument("--procs", type=positive_int, default=None, metavar="N",
                          help="train in N processes under torchrun on this machine (one per GPU, or CPU processes "
                               "joined by gloo): a refusal is said once and exits 2, as one process's")
    training.add_argument("--print-config", action="store_true",
                          help="print the resolved experiment (every default filled in) and its run folder; train nothing")
    training.set_defaults(run=cmd_train_in_ranks)

    scoring = commands.add_parser("eval", help="score a checkpoint on a held-out split, greedy or with beam search")
    scoring.add_argument("checkpoint", help="a run's checkpoint.pt")
    scoring.add_argument("--split", default="valid", help="valid, or the task's test split (test)")
    scoring.add_argument("--beams", type=positive_int, default=1, help="beam search with this many beams; 1: greedy")
    scoring.add_argument("--length-penalty", type=finite_float, default=1.0, help="beam scores are divided by length ** this")
    scoring.add_argument("--set", action="extend", nargs="+", default=[], metavar="DOTTED.KEY=VALUE",
                         help="change the saved experiment, e.g. task.data_dir=/path/to/multi30k")
    scoring.add_argument("--tasks", help="score tasks of lm-evaluation-harness instead (hellaswag,arc_easy), "
                         "comma-separated")
    scoring.add_argument("--include-path", help="with --tasks: a folder of the harness's task YAML files of your own")
    scoring.add_argument("--limit", type=positive_int, help="with --tasks: only the first N examples of each task")
    scoring.add_argument("--fewshot", type=int, help="with --tasks: examples shown before each question")
    scoring.set_defaults(run=cmd_eval)

    averaging = commands.add_parser("average", help="average the weights of checkpoints of one model (fairseq's "
                                    "average_checkpoints) into a checkpoint zoo eval scores")
    averaging.add_argument("checkpoints", nargs="+", help="checkpoint files, or run folders: the snapshots their "
                           "train.average_last kept")
    averaging.add_argument("--last", type=positive_int, help="only the last N of them")
    averaging.add_argument("-o", "--output", required=True, help="the averaged checkpoint to write")
    averaging.set_defaults(run=cmd_average)

    joining = commands.add_parser("consolidate", help="make a sharded checkpoint (train.parallel fsdp's checkpoint.dcp "
                                  "folder) one whole checkpoint file, for zoo eval, zoo.load, save_pretrained and to_hf")
    joining.add_argument("checkpoint", help="a run's checkpoint.dcp folder")
    joining.add_argument("-o", "--output", help="the checkpoint file to write (default: checkpoint.pt beside it)")
    joining.set_defaults(run=cmd_consolidate)

    sweeping = commands.add_parser("sweep", help="train a grid of variants over seeds in worker processes")
    sweeping.add_argument("file", help="a SweepSpec YAML file")
    sweeping.add_argument("--workers", type=positive_int, default=1,
                          help="cells at once (at least 1), each worker a process that trains cell after cell; "
                          "CPU threads are divided between them")
    sweeping.add_argument("--cells-per-process", type=positive_int, metavar="N",
                          help="start a worker's process afresh after N cells (default: never; 1: a process per cell)")
    sweeping.add_argument("--procs-per-cell", type=positive_int, metavar="N",
                          help="train each cell by N processes under torchrun on this machine (GPUs, or CPU "
                          "processes with gloo); train.parallel fsdp cells always go through torchrun (default 1; "
                          "with --launcher submitit, one per GPU of a task)")
    sweeping.add_argument("--max-cells", type=positive_int, metavar="N",
                          help="allow a grid of up to N cells (default 10,000; counted before the grid expands)")
    sweeping.add_argument("--shard", default="0/1", metavar="I/N", help="run only shard I of N (0-based)")
    sweeping.add_argument("--dry-run", action="store_true", help="print the cells and their names")
    sweeping.add_argument("--export", choices=["wandb"], help="write a W&B sweep configuration instead of running")
    sweeping.add_argument("--cell", nargs="+", metavar="KEY=VALUE",
                          help="train only the cell of these grid and tuned values and seed (seed=N), as W&B's agent "
                               "asks for an exported sweep's cells")
    sweeping.add_argument("--set", action="extend", nargs="+", default=[], metavar="DOTTED.KEY=VALUE",
                          help="experiment fields (train.steps=100) or sweep fields (seeds=[0,1,2])")
    slurm = sweeping.add_argument_group("a job array through submitit (--launcher submitit)")
    slurm.add_argument("--launcher", choices=["local", "submitit"], default="local",
                       help="local: this process runs the cells; submitit: one array task per cell on Slurm, or "
                       "submitit's local executor where there is no Slurm")
    slurm.add_argument("--cluster", choices=["auto", "slurm", "local", "debug"], default="auto",
                       help="submitit's executor (auto: Slurm where sbatch exists, else local)")
    slurm.add_argument("--tasks", type=positive_int, help="array tasks, each a shard of the sweep (default: one per cell)")
    slurm.add_argument("--partition", help="Slurm partition")
    slurm.add_argument("--gpus-per-cell", type=int, default=0, help="GPUs of each task")
    slurm.add_argument("--cpus-per-cell", type=positive_int, help="CPU cores of each task")
    slurm.add_argument("--time-limit", type=positive_int, default=24 * 60, metavar="MINUTES",
                       help="each task's time limit; a task stopped by it is requeued and resumes (default 1440)")
    slurm.add_argument("--array-parallelism", type=positive_int, help="array tasks running at once (Slurm's %%N)")
    sweeping.set_defaults(run=cmd_sweep)

    comparing = commands.add_parser("compare", help="table, effects with 95%% intervals, plots and report of a sweep; "
                                    "of two sweeps with the same grid: whether the ranking transfers")
    comparing.add_argument("sweep_dirs", nargs="+", metavar="SWEEP_DIR", help="one sweep folder, or two (A B)")
    comparing.add_argument("--out", help="the folder of a two-sweep report (default: A-vs-B beside A, by the sweeps' names)")
    comparing.add_argument("--metric", help="another logged metric than the sweep's, e.g. long/exact_match, or a "
                           "kept model's: best_checkpoint/test/bleu")
    comparing.add_argument("--by", action="append", default=[], metavar="AXIS",
                           help="draw every other axis's paired effects within each value of AXIS (a grid key or its "
                                "label) into effects_by_AXIS.png; repeatable; model sizes always get one")
    comparing.add_argument("--wandb-mode", choices=["offline", "online", "disabled"],
                           help="default: the sweep's own mode (WANDB_MODE wins)")
    comparing.set_defaults(run=cmd_compare)

    reproducing = commands.add_parser("reproduce", help="train recorded cells of a sweep's ledger again: where all that "
                                      "decides the rounding is the recorded one every final metric must match bit for "
                                      "bit, elsewhere the losses logged to step 20 must agree within rounding (exit 1 if "
                                      "not; 3 where another rounding here moves this cell past the tolerance too)")
    reproducing.add_argument("ledger", help="a sweep's ledger.jsonl (its sweep.yaml beside it)")
    reproducing.add_argument("cells", nargs="*", help="cell names, e.g. 'norm=pre,ffn=gelu,seed=0' (default: every "
                             "finished cell)")
    reproducing.add_argument("--set", action="extend", nargs="+", default=[], metavar="task.KEY=VALUE",
                             help="where the data is now, e.g. task.data_dir=/path/to/multi30k")
    reproducing.add_argument("--strict", action="store_true",
                             help="exit 1 unless every cell matches bit for bit, in another environment too")
    reproducing.add_argument("--early", action="store_true",
                             help="train only each cell's first steps (to step 20, or its first logged step) and judge "
                             "them: what CI runs on one cell of every published ledger")
    reproducing.add_argument("--replay", metavar="FILE", help="with --early and one cell: train it from the batches a "
                             "replay recorded (python -m zoo.sweep.record_replay), where its corpus is not")
    reproducing.set_defaults(run=cmd_reproduce)

    add_data_commands(commands)
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
