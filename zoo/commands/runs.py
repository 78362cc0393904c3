"""The commands of one run: `zoo train` (here, or in N ranks under torchrun), `zoo eval` (a
checkpoint scored again, or by lm-evaluation-harness), `zoo average` and `zoo consolidate`."""

from __future__ import annotations

import argparse
import json
import os
import time

from zoo.commands import Command, add_sets, finite_float, positive_int, register
from zoo.errors import ConfigError


@register("train", 50)
class TrainCommand(Command):
    """train one experiment (no file: experiments/reverse.yaml, the default variant on reverse)"""

    def run(self, args: argparse.Namespace) -> None:
        """With --procs N, this command again in N ranks under torchrun (zoo.sweep.torchrun_cell):
        this process trains nothing and ends with the ranks' code, a refusal said once (exit 2)."""
        if args.procs is not None and "RANK" not in os.environ:
            return in_ranks(args)
        from zoo.specs.experiment import load_experiment
        from zoo.trainer.console import train_and_report
        from zoo.trainer.guards import die_with_parent

        die_with_parent()
        if args.reshard and not args.resume:
            raise ConfigError("--reshard reads a sharded checkpoint at another world size, so it goes with --resume")
        experiment = load_experiment(args.file, args.set)
        if args.print_config:
            return print_config(experiment)
        train_and_report(experiment, args.resume, args.reshard)

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", nargs="?", help="an ExperimentSpec YAML file")
        add_sets(parser, "e.g. --set model.norm=pre train.steps=200 (or --set before each)")
        parser.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint")
        parser.add_argument("--reshard", action="store_true",
                            help="with --resume: read a sharded checkpoint (train.parallel fsdp) at another world size "
                            "than the one that wrote it")
        parser.add_argument("--procs", type=positive_int, default=None, metavar="N",
                            help="train in N processes under torchrun on this machine (one per GPU, or CPU processes "
                            "joined by gloo): a refusal is said once and exits 2, as one process's")
        parser.add_argument("--print-config", action="store_true",
                            help="print the resolved experiment (every default filled in) and its run folder; train "
                            "nothing")


def in_ranks(args: argparse.Namespace) -> None:
    from zoo.sweep.torchrun_cell import launch_ranks

    ranks = ["train", *([args.file] if args.file else []), *(["--set", *args.set] if args.set else []),
             *(["--resume"] if args.resume else []), *(["--reshard"] if args.reshard else []),
             *(["--print-config"] if args.print_config else [])]
    code = launch_ranks(["-m", args.program, *ranks], args.procs)  # the command line's own module (zoo.cli)
    if code:
        raise SystemExit(code)


def print_config(experiment) -> None:
    """The resolved experiment and its run folder, after what training would refuse first
    (without reading the data)."""
    from zoo.specs.yamlio import dump_yaml
    from zoo.trainer.framing import check_before_data
    from zoo.trainer.run_folder import RunFolder

    check_before_data(experiment)
    print(f"# run folder: {RunFolder(experiment).path}  (the model: {experiment.variant})")
    print(dump_yaml(experiment.model_dump(mode="json")), end="")


@register("eval", 60)
class EvalCommand(Command):
    """score a checkpoint on a held-out split, greedy or with beam search"""

    def run(self, args: argparse.Namespace) -> None:
        from zoo.trainer.evaluate import evaluate_checkpoint

        start = time.perf_counter()
        if args.tasks:
            return eval_downstream(args, start)
        metrics = evaluate_checkpoint(args.checkpoint, args.split, args.beams, args.length_penalty, tuple(args.set))
        decoding = "greedy" if args.beams == 1 else f"beam {args.beams}, length_penalty {args.length_penalty}"
        print(json.dumps({"checkpoint": str(args.checkpoint), "split": args.split, "decoding": decoding,
                          "seconds": round(time.perf_counter() - start, 1), **metrics}, indent=1))

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("checkpoint", help="a run's checkpoint.pt")
        parser.add_argument("--split", default="valid", help="valid, or the task's test split (test)")
        parser.add_argument("--beams", type=positive_int, default=1, help="beam search with this many beams; 1: greedy")
        parser.add_argument("--length-penalty", type=finite_float, default=1.0,
                            help="beam scores are divided by length ** this")
        add_sets(parser, "change the saved experiment, e.g. task.data_dir=/path/to/multi30k")
        parser.add_argument("--tasks", help="score tasks of lm-evaluation-harness instead (hellaswag,arc_easy), "
                            "comma-separated")
        parser.add_argument("--include-path", help="with --tasks: a folder of the harness's task YAML files of your own")
        parser.add_argument("--limit", type=positive_int, help="with --tasks: only the first N examples of each task")
        parser.add_argument("--fewshot", type=int, help="with --tasks: examples shown before each question")


def eval_downstream(args: argparse.Namespace, start: float) -> None:
    """`zoo eval --tasks`: the checkpoint scored by lm-evaluation-harness; its scores as JSON."""
    from zoo.trainer.harness import downstream_metrics, harness_version, run_harness, scorer_of_checkpoint

    scorer = scorer_of_checkpoint(args.checkpoint, sets=tuple(args.set))
    tasks = [name.strip() for name in args.tasks.split(",") if name.strip()]
    results = run_harness(scorer, tasks, args.include_path, args.limit, args.fewshot)
    print(json.dumps({"checkpoint": str(args.checkpoint), "harness": f"lm-eval {harness_version()}",
                      "seconds": round(time.perf_counter() - start, 1), **downstream_metrics(results)}, indent=1))


@register("average", 70)
class AverageCommand(Command):
    """average the weights of checkpoints of one model (fairseq's average_checkpoints) into a
    checkpoint zoo eval scores"""

    def run(self, args: argparse.Namespace) -> None:
        from zoo.trainer.averaging import checkpoints_to_average, write_average

        sources = checkpoints_to_average(args.checkpoints, args.last)
        output = write_average(sources, args.output)
        print(f"averaged {len(sources)} checkpoints ({', '.join(map(str, sources))}) into {output}; "
              f"score it with: zoo eval {output} --split test")

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("checkpoints", nargs="+", help="checkpoint files, or run folders: the snapshots their "
                            "train.average_last kept")
        parser.add_argument("--last", type=positive_int, help="only the last N of them")
        parser.add_argument("-o", "--output", required=True, help="the averaged checkpoint to write")


@register("consolidate", 80)
class ConsolidateCommand(Command):
    """make a sharded checkpoint (train.parallel fsdp's checkpoint.dcp folder) one whole checkpoint
    file, for zoo eval, zoo.load, save_pretrained and to_hf"""

    def run(self, args: argparse.Namespace) -> None:
        from zoo.trainer.consolidate import consolidate

        out = consolidate(args.checkpoint, args.output)
        print(f"consolidated {args.checkpoint} into {out}; score it with: zoo eval {out}")

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("checkpoint", help="a run's checkpoint.dcp folder")
        parser.add_argument("-o", "--output", help="the checkpoint file to write (default: checkpoint.pt beside it)")
