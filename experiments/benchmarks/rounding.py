"""What another environment's rounding and a change of the code do to a recorded run: the numbers
behind `zoo reproduce`'s tolerance (zoo.sweep.reproduce.EARLY_TOLERANCE).

    python experiments/benchmarks/rounding.py [--cell CELL] [--steps N]    # prints JSON

Trains a committed cell of the main job (experiments/results/seed-axes) on the CPU, in this
process, as recorded and with one change each: 2 threads instead of the recorded count (another
rounding of every sum, as another machine or torch gives), a z-loss of 1e-4 and label smoothing
0.1 (changed losses), Xavier gain 1.1 (a changed initialization). For each: the largest relative
difference of the losses logged in the first quarter of the steps, and each final metric's.
`--steps N` trains the first N steps only (the main job's constant schedule makes them the same
trajectory) and compares the losses logged to step N/4, or the first logged step where that is
later (tests/test_reproduce.py: N = 20, which compares step 20 as N = 60 did).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

import torch
from common import emit, machine, say

import zoo
from zoo.model import init
from zoo.sweep.reproduce import EARLY_TOLERANCE, early_curve_gap, recorded_cells, relative_difference
from zoo.sweep.spec import cell_experiment

LEDGER = Path(__file__).resolve().parents[1] / "results" / "seed-axes" / "ledger.jsonl"
CHANGES = {"as recorded": {}, "2 threads": {"threads": 2}, "z_loss 1e-4": {"z_loss": 1e-4},
           "label_smoothing 0.1": {"label_smoothing": 0.1}, "Xavier gain 1.1": {"gain": 1.1}}


def train_changed(experiment: dict, threads: int, gain: float = 1.0, **train) -> zoo.TrainResult:
    experiment = {**experiment, "train": {**experiment["train"], **train}}
    drawn, before = init._fill, torch.get_num_threads()
    init._fill = lambda name, tensor, owner, placed, generator, g: drawn(
        name, tensor, owner, placed, generator, lambda role, site: gain * g(role, site))
    torch.set_num_threads(threads)
    try:
        with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(sys.stderr):  # stdout: the JSON
            experiment["train"]["out_dir"] = experiment["wandb"]["dir"] = scratch
            return zoo.train(experiment)
    finally:
        init._fill = drawn
        torch.set_num_threads(before)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", default="norm=pre,position=sinusoidal,attention=fused,ffn=gelu,seed=0")
    parser.add_argument("--steps", type=int, help="train only the first N steps (default: all the record's)")
    args = parser.parse_args(argv)
    sweep, base, finished = recorded_cells(LEDGER, [])
    cell, record = finished[args.cell]
    experiment = cell_experiment(sweep, base, cell).model_dump(mode="json")
    experiment["train"]["device"] = "cpu"
    experiment["wandb"]["mode"] = "disabled"
    steps = experiment["train"]["steps"] = args.steps or record.steps
    results = {}
    for name, change in CHANGES.items():
        say(f"{name} ...")
        change = dict(change)
        result = train_changed(experiment, change.pop("threads", record.threads or 1), **change)
        gap, until = early_curve_gap(record.history, result.history, 4 * steps if args.steps else steps)
        final = {} if steps != record.steps else {key: relative_difference(value, result.metrics[key])
                                                  for key, value in record.metrics.items()}
        results[name] = {"early_gap": gap, "to_step": until, "final_relative": final}
    result = {"benchmark": "rounding", "steps": steps, "machine": machine(), "cell": args.cell,
              "recorded_threads": record.threads, "tolerance": EARLY_TOLERANCE, "results": results}
    emit(result)
    return result


if __name__ == "__main__":
    main()
