"""A sweep's cells in worker processes that each train cell after cell, against a process started
for every cell (`--cells-per-process 1`, the runner before): the wall time of the same sweep, and
what each cell's process start cost.

    python experiments/benchmarks/sweep_workers.py [--cells 8] [--steps 60] [--workers 2] [--rounds 2]
    python experiments/benchmarks/sweep_workers.py --smoke     # tiny: checks the script

The cells are the main job's (experiments/seed_axes.yaml: d_model 64, 2+2 layers, `reverse`, W&B
offline), the first `--cells` of its grid, at `--steps` steps each. The two ways run in turn within
each round, each in a folder of its own, on whatever device `train.device: auto` picks.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import emit, machine, say

from zoo.sweep import SweepSpec, load_sweep, run_sweep

MAIN_JOB = Path(__file__).resolve().parents[1] / "seed_axes.yaml"


def timed_sweep(sweep: SweepSpec, base: dict, workers: int, cells_per_process: int | None, out_dir: Path) -> float:
    sweep = sweep.model_copy(update={"out_dir": str(out_dir)})
    start = time.perf_counter()
    statuses = run_sweep(sweep, base, workers=workers, echo=lambda _: None, cells_per_process=cells_per_process)
    seconds = time.perf_counter() - start
    if set(statuses.values()) != {"finished"}:
        raise SystemExit(f"a cell did not finish: {statuses}; see {sweep.directory()}")
    return seconds


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="two cells of two steps, one round: checks the script")
    args = parser.parse_args(argv)
    cells, steps, rounds = (2, 2, 1) if args.smoke else (args.cells, args.steps, args.rounds)
    sweep, base = load_sweep(MAIN_JOB, [f"base.train.steps={steps}", f"base.train.eval_every={steps}",
                                        f"base.train.log_every={steps}", f"base.train.checkpoint_every={steps}"])
    key, values = list(sweep.grid.items())[-1]  # the grid's last key (ffn: relu, gelu) times enough seeds
    grid = {key: values}
    seeds = list(range(max(1, cells // len(values))))
    sweep = sweep.model_copy(update={"grid": grid, "seeds": seeds, "name": "sweep-workers"})
    ways = {"worker per pool thread": None, "process per cell": 1}  # --cells-per-process
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    with tempfile.TemporaryDirectory(prefix="zoo-sweep-workers-") as scratch:
        for round_index in range(rounds):
            for index, (name, cells_per_process) in enumerate(ways.items()):
                took = timed_sweep(sweep, base, args.workers, cells_per_process, Path(scratch) / f"{round_index}-{index}")
                seconds[name].append(took)
                say(f"round {round_index}: {name}: {took:.1f} s")
    median = {name: statistics.median(values) for name, values in seconds.items()}
    count = len(values) * len(seeds)
    result = {"benchmark": "sweep_workers", "smoke": args.smoke, "machine": machine(), "cells": count,
              "steps": steps, "workers": args.workers, "seconds": {k: round(v, 2) for k, v in median.items()},
              "ratio_workers_to_process_per_cell": round(median["worker per pool thread"] /
                                                         median["process per cell"], 3),
              "start_s_saved_per_cell": round((median["process per cell"] - median["worker per pool thread"])
                                              * args.workers / count, 2)}
    emit(result)
    return result


if __name__ == "__main__":
    main()
