"""What another CPU's rounding and a change of the code do to a published cell's early losses: the
numbers behind `zoo reproduce`'s tolerance (zoo.sweep.reproduce.EARLY_TOLERANCE).

    python experiments/benchmarks/rounding.py [--ledger NAME ...] [--until N]    # prints JSON

For each ledger (default: every published one whose data ships with the zoo) its most sensitive
cell (zoo.sweep.reproduce.sensitive_cell: the first post-norm one) is trained to its early window
(step 20, or the first logged step), or to step N, in a child process: once under each CPU
capability this CPU runs (ATEN_CPU_CAPABILITY, torch's detection and every level below it: what
another CPU generation's kernels round like; the levels above it are named as not tried), and
once with each change of the code: a z-loss of 1e-4, label smoothing 0.1 (changed losses), Xavier
gain 1.1 (a changed initialization). For each: the largest relative difference from the record of
a loss logged at each step.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from common import emit, machine, say

from zoo.sweep.reproduce import EARLY_TOLERANCE, early_window, recorded_cells, sensitive_cell, step_gaps
from zoo.sweep.retrain import CAPABILITY, cpu_capabilities, retrain
from zoo.sweep.spec import cell_experiment

RESULTS = Path(__file__).resolve().parents[1] / "results"
SHIPPED = ("seed-axes", "kinds", "ffn", "norms", "positions-length", "transfer-sort", "warmup-vs-norm")
"""The published ledgers whose data the zoo makes itself; the others train on Multi30k."""
CHANGES = {"z_loss 1e-4": {"z_loss": 1e-4}, "label_smoothing 0.1": {"label_smoothing": 0.1}, "Xavier gain 1.1": {}}


def measure(ledger: str, until: int | None) -> dict:
    path = RESULTS / ledger / "ledger.jsonl"
    sweep, base, finished = recorded_cells(path, [])
    name = sensitive_cell(path)
    cell, record = finished[name]
    experiment = cell_experiment(sweep, base, cell).model_dump(mode="json")
    experiment["train"]["device"] = "cpu"
    window = until or early_window(record.history)
    runs = {f"capability {c}": (experiment, None) for c in cpu_capabilities()[0]}
    for change, fields in CHANGES.items():
        changed = {**experiment, "train": {**experiment["train"], **fields}}
        runs[change] = (changed, [sys.executable, __file__, "--gain", "1.1"] if change.startswith("Xavier") else None)
    gaps = {}
    with tempfile.TemporaryDirectory() as scratch:
        for label, (run, entry) in runs.items():
            say(f"{ledger} {name}: {label} ...")
            capability = {CAPABILITY: label.split()[-1]} if label.startswith("capability") else {}
            now = retrain(run, record.threads or 1, Path(scratch), until=window, environment=capability, entry=entry)
            capability = now.environment.get("cpu_capability") if now.environment else None
            steps = step_gaps(record.history, now.history, window) or {}
            gaps[label] = {"ran_as": capability, "by_step": {step: float(f"{gap:.2g}") for step, gap in steps.items()}}
    return {"cell": name, "window": window, "gaps": gaps}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledger", nargs="+", default=list(SHIPPED), choices=SHIPPED)
    parser.add_argument("--until", type=int, help="compare the losses logged to step N (default: the early window)")
    args = parser.parse_args(argv)
    for level, why in cpu_capabilities()[1].items():
        say(f"capability {level}: not tried, {why}")
    results = {ledger: measure(ledger, args.until) for ledger in args.ledger}
    result = {"benchmark": "rounding", "machine": machine(), "tolerance": EARLY_TOLERANCE,
              "capabilities_not_tried": cpu_capabilities()[1], "results": results}
    emit(result)
    return result


def changed_gain(argv: list[str]) -> None:
    """The child of a run with a changed initialization: every Xavier draw scaled by the gain."""
    from zoo.model import init
    from zoo.sweep import retrain as child

    gain, drawn = float(argv[0]), init._fill
    init._fill = lambda name, tensor, owner, placed, generator, g: drawn(
        name, tensor, owner, placed, generator, lambda role, site: gain * g(role, site))
    child.main(argv[1:])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--gain"]:
        changed_gain(sys.argv[2:])
    else:
        main()
