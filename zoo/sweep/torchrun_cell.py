"""A sweep cell trained by several processes: `zoo train FILE --resume` in each rank
(zoo.sweep.cell_rank) under torchrun on this machine, one process per GPU the task was given (or
CPU processes joined by gloo), started afresh for each cell. Sharded cells (train.parallel fsdp)
need it even at one process: FSDP's mesh is a process group's.

The launcher is torchrun's own code run in a small program of ours, so that the chain of
processes holds: torchrun dies with the sweep (as a sweep's worker does), and each rank dies with
torchrun, which on SIGTERM or SIGINT passes the signal to its ranks; they checkpoint and stop."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zoo.specs.experiment import ExperimentSpec

LAUNCHER = "from zoo.sweep.torchrun_cell import main; main()"
"""The program of a cell's torchrun process (`-c`: this package imports this module)."""


def cell_processes(experiment: ExperimentSpec, per_cell: int) -> int | None:
    """How many processes torchrun starts for the cell, or None where it trains in a sweep's worker
    (one process, not sharded)."""
    return per_cell if per_cell > 1 or experiment.train.parallel == "fsdp" else None


def torchrun_command(experiment_file: Path, processes: int) -> list[str]:
    """The command that trains the cell in `processes` processes; --standalone finds a free port,
    so cells of a sweep's workers can train side by side."""
    return [sys.executable, "-c", LAUNCHER, "--standalone", f"--nproc_per_node={processes}",
            "-m", "zoo.sweep.cell_rank", str(experiment_file)]


def main() -> None:
    from torch.distributed.run import main as torchrun

    from zoo.trainer.guards import die_with_parent

    die_with_parent()  # the sweep's death reaches torchrun ...
    os.environ["ZOO_PARENT_PID"] = str(os.getpid())  # ... and torchrun's reaches each rank it starts
    torchrun(sys.argv[1:])
