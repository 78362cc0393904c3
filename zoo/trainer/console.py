"""What `zoo train` prints of a run: its final metrics and where its files and W&B run went, the
same on a terminal and in a sweep cell's log."""

from __future__ import annotations

from pathlib import Path

from zoo.specs.experiment import ExperimentSpec
from zoo.trainer.loop import train
from zoo.trainer.run_folder import TrainResult
from zoo.trainer.selection import kept_lines, metric_line


def train_and_report(experiment: ExperimentSpec, resume: bool, reshard: bool = False) -> None:
    """Train (or resume) one experiment and print where its result went: `zoo train`, and each
    cell of a sweep in its worker (zoo.sweep.worker), which calls this without argument strings."""
    result = train(experiment, resume=resume, reshard=reshard)
    if result.already_finished:
        print(f"{result.run_dir} {finished_how(result, experiment)}; its recorded result:")
    if result.metrics:
        print("final " + metric_line(result.metrics))
        print(f"run directory:     {result.run_dir}")
        print(f"checkpoint:        {result.checkpoint}")
        for line in kept_lines(result.kept):
            print(line)
        if result.attention_png:  # a model with cross-attention draws one
            print(f"attention picture: {result.attention_png}")
        if result.wandb_dir:
            runs = Path(result.wandb_dir).parent.parent
            runs = runs if runs.is_absolute() else f"./{runs}"
            print(f"W&B run:           {Path(result.wandb_dir).parent}  (browse: wandb leet {runs}; upload: wandb sync)")


def finished_how(result: TrainResult, experiment: ExperimentSpec) -> str:
    """How a run that `--resume` found finished ended, and whether more steps would train on."""
    if result.kept.get("stopped_early_at") is not None:
        return (f"stopped early at step {result.kept['stopped_early_at']} (train.early_stop) already: nothing to "
                "train, and more steps would train nothing either")
    return f"finished all {experiment.train.steps} steps already: nothing to train (raise train.steps to train on)"
