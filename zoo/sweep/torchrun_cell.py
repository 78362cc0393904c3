"""A sweep cell trained by several processes: `zoo train FILE --resume` in each rank
(zoo.sweep.cell_rank) under torchrun on this machine, one process per GPU the task was given (or
CPU processes joined by gloo), started afresh for each cell. Sharded cells (train.parallel fsdp)
need it even at one process: FSDP's mesh is a process group's.

The launcher is torchrun's own code run in a small program of ours, so that the chain of
processes holds: torchrun dies with the sweep (as a sweep's worker does), and each rank dies with
torchrun, which on SIGTERM or SIGINT passes the signal to its ranks; they checkpoint and stop."""

from __future__ import annotations

import logging
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
    return per_cell if per_cell > 1 or experiment.train.sharded else None


def torchrun_command(experiment_file: Path, processes: int) -> list[str]:
    """The command that trains the cell in `processes` processes; --standalone finds a free port,
    so cells of a sweep's workers can train side by side."""
    return [sys.executable, "-c", LAUNCHER, "--standalone", f"--nproc_per_node={processes}",
            "-m", "zoo.sweep.cell_rank", str(experiment_file)]


def main() -> None:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    from zoo.trainer.guards import die_with_parent

    die_with_parent()  # the sweep's (or zoo train --procs's) death reaches torchrun ...
    os.environ["ZOO_PARENT_PID"] = str(os.getpid())  # ... and torchrun's reaches each rank it starts
    for name in ("torch.distributed.elastic", "torch.distributed.elastic.agent.server.api"):
        logging.getLogger(name).setLevel(logging.CRITICAL)  # its reports of a rank's end and of a signal: below
    try:
        run(parse_args(sys.argv[1:]))
    except SignalException as stopped:  # passed on to the ranks, which stopped; rank 0 said where
        raise SystemExit(128 + int(stopped.sigval)) from None
    except ChildFailedError as failed:  # a refusal: rank 0 said why (zoo.errors.say); anything else, one line here
        rank, code = rank_exit_code(failed)
        if code != 2 or rank != 0:  # a refusal rank 0 did not say (it met none, or was stopped first)
            print(f"torchrun: rank {rank} ended with exit code {failed.failures[rank].exitcode} (its output is above)",
                  file=sys.stderr)
        raise SystemExit(code) from None


def rank_exit_code(failed) -> tuple[int, int]:
    """The rank whose failure counts and the exit code it means: rank 0's where it ended by itself
    (2 for a refusal the zoo explained), else the first rank that ended by itself (the others were
    stopped by torchrun's signal because of it), else rank 0's or the first's; a rank killed by a
    signal gives 128 + the signal."""
    failures = failed.failures
    ended_by_itself = sorted(rank for rank, failure in failures.items() if failure.exitcode > 0)
    candidates = ended_by_itself or sorted(failures)
    rank = 0 if 0 in candidates else candidates[0]
    code = failures[rank].exitcode
    return rank, 128 - code if code < 0 else code or 1


def launch_ranks(command: list[str], processes: int) -> int:
    """Run `python COMMAND` (`-m MODULE ARGS`) in `processes` ranks under this launcher (torchrun on
    this machine, --standalone): its exit code, 2 for a refusal said once by rank 0. A SIGTERM or
    SIGINT here goes to torchrun alone (in a session of its own, so a terminal's Ctrl-C arrives
    once), which passes it to its ranks: they checkpoint and stop, rank 0 says so, and the code is
    the signal's (143, 130). Torchrun dies with this process, so no rank trains on as an orphan."""
    import signal
    import subprocess

    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, "--standalone", f"--nproc_per_node={processes}",
                                 *command], env={**os.environ, "ZOO_PARENT_PID": str(os.getpid())},
                                start_new_session=True)
    stops = (signal.SIGTERM, signal.SIGINT)
    before = {signum: signal.signal(signum, lambda signum, _frame: launcher.send_signal(signum)) for signum in stops}
    try:
        code = launcher.wait()
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code
