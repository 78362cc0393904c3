"""The commands of one run: `zoo train` and `zoo eval`; the parser that reads their arguments is
zoo.cli's."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zoo.specs.experiment import ExperimentSpec


def cmd_train(args: argparse.Namespace) -> None:
    from zoo.specs.experiment import load_experiment
    from zoo.trainer.guards import die_with_parent

    die_with_parent()
    experiment = load_experiment(args.file, args.set)
    if args.print_config:
        from zoo.specs.yamlio import dump_yaml
        from zoo.trainer.run_folder import RunFolder

        print(f"# run folder: {RunFolder(experiment).path}  (the model: {experiment.variant})")
        print(dump_yaml(experiment.model_dump(mode="json")), end="")
        return
    train_and_report(experiment, args.resume)


def train_and_report(experiment: ExperimentSpec, resume: bool) -> None:
    """Train (or resume) one experiment and print where its result went: `zoo train`, and each
    cell of a sweep in its worker (zoo.sweep.worker), which calls this without argument strings."""
    from zoo.trainer import train

    result = train(experiment, resume=resume)
    if result.already_finished:
        print(f"{result.run_dir} finished all {experiment.train.steps} steps already: nothing to train (raise "
              "train.steps to train on); its recorded result:")
    if result.metrics:
        print("final " + " ".join(f"{k}={v:.4g}" for k, v in result.metrics.items()))
        print(f"run directory:     {result.run_dir}")
        print(f"checkpoint:        {result.checkpoint}")
        if result.attention_png:  # a model with cross-attention draws one
            print(f"attention picture: {result.attention_png}")
        if result.wandb_dir:
            runs = Path(result.wandb_dir).parent.parent
            runs = runs if runs.is_absolute() else f"./{runs}"
            print(f"W&B run:           {Path(result.wandb_dir).parent}  (browse: wandb leet {runs}; upload: wandb sync)")


def cmd_eval(args: argparse.Namespace) -> None:
    import json

    from zoo.trainer.evaluate import evaluate_checkpoint

    start = time.perf_counter()
    metrics = evaluate_checkpoint(args.checkpoint, args.split, args.beams, args.length_penalty, tuple(args.set))
    decoding = "greedy" if args.beams == 1 else f"beam {args.beams}, length_penalty {args.length_penalty}"
    print(json.dumps({"checkpoint": str(args.checkpoint), "split": args.split, "decoding": decoding,
                      "seconds": round(time.perf_counter() - start, 1), **metrics}, indent=1))
