"""Ablation sweeps: a grid of variants over seeds, one process a cell, a ledger to resume from."""

from zoo.records.ledger import Ledger
from zoo.sweep.export import export_wandb, wandb_sweep_config
from zoo.sweep.loading import load_sweep
from zoo.sweep.runner import run_sweep
from zoo.sweep.spec import Cell, SweepSpec, cell_experiment, expand, shard

__all__ = ["Cell", "Ledger", "SweepSpec", "cell_experiment", "expand", "export_wandb", "load_sweep", "run_sweep",
           "shard", "wandb_sweep_config"]
