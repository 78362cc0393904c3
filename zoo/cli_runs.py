"""The commands of one run: `zoo train` and `zoo eval`; the parser that reads their arguments is
zoo.cli's."""

from __future__ import annotations

import argparse
import time


def cmd_train(args: argparse.Namespace) -> None:
    from zoo.specs.experiment import load_experiment
    from zoo.trainer.console import train_and_report
    from zoo.trainer.guards import die_with_parent

    die_with_parent()
    if args.reshard and not args.resume:
        from zoo.errors import ConfigError

        raise ConfigError("--reshard reads a sharded checkpoint at another world size, so it goes with --resume")
    experiment = load_experiment(args.file, args.set)
    if args.print_config:
        from zoo.specs.yamlio import dump_yaml
        from zoo.trainer.framing import check_before_data
        from zoo.trainer.run_folder import RunFolder

        check_before_data(experiment)  # what training would refuse first, without reading the data

        print(f"# run folder: {RunFolder(experiment).path}  (the model: {experiment.variant})")
        print(dump_yaml(experiment.model_dump(mode="json")), end="")
        return
    train_and_report(experiment, args.resume, args.reshard)


def cmd_eval(args: argparse.Namespace) -> None:
    import json

    from zoo.trainer.evaluate import evaluate_checkpoint

    start = time.perf_counter()
    if args.tasks:
        return cmd_eval_downstream(args, start)
    metrics = evaluate_checkpoint(args.checkpoint, args.split, args.beams, args.length_penalty, tuple(args.set))
    decoding = "greedy" if args.beams == 1 else f"beam {args.beams}, length_penalty {args.length_penalty}"
    print(json.dumps({"checkpoint": str(args.checkpoint), "split": args.split, "decoding": decoding,
                      "seconds": round(time.perf_counter() - start, 1), **metrics}, indent=1))


def cmd_eval_downstream(args: argparse.Namespace, start: float) -> None:
    """`zoo eval --tasks`: the checkpoint scored by lm-evaluation-harness; its scores as JSON."""
    import json

    from zoo.trainer.harness import downstream_metrics, harness_version, run_harness, scorer_of_checkpoint

    scorer = scorer_of_checkpoint(args.checkpoint, sets=tuple(args.set))
    tasks = [name.strip() for name in args.tasks.split(",") if name.strip()]
    results = run_harness(scorer, tasks, args.include_path, args.limit, args.fewshot)
    print(json.dumps({"checkpoint": str(args.checkpoint), "harness": f"lm-eval {harness_version()}",
                      "seconds": round(time.perf_counter() - start, 1), **downstream_metrics(results)}, indent=1))


def cmd_consolidate(args: argparse.Namespace) -> None:
    from zoo.trainer.consolidate import consolidate

    out = consolidate(args.checkpoint, args.output)
    print(f"consolidated {args.checkpoint} into {out}; score it with: zoo eval {out}")


def cmd_average(args: argparse.Namespace) -> None:
    from zoo.trainer.averaging import checkpoints_to_average, write_average

    sources = checkpoints_to_average(args.checkpoints, args.last)
    output = write_average(sources, args.output)
    print(f"averaged {len(sources)} checkpoints ({', '.join(map(str, sources))}) into {output}; "
          f"score it with: zoo eval {output} --split test")
