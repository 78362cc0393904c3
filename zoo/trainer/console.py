"""What `zoo train` prints of a run: its final metrics and where its files and W&B run went, the
same on a terminal and in a sweep cell's log."""

from __future__ import annotations

from pathlib import Path

from zoo.specs.experiment import ExperimentSpec
from zoo.trainer.loop import train


def train_and_report(experiment: ExperimentSpec, resume: bool) -> None:
    """Train (or resume) one experiment and print where its result went: `zoo train`, and each
    cell of a sweep in its worker (zoo.sweep.worker), which calls this without argument strings."""
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
