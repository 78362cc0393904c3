"""`zoo reproduce LEDGER [CELL...]`: train recorded cells again, in a temporary folder, with the
thread count and the kind of device each was recorded with, and give each cell a verdict.

In the recorded environment (the same torch, Python and device, CPU model included) a run is a
function of its experiment, its data, the code and the thread count: every final metric must be the
same to the last bit. In another environment, kernels round differently, and training amplifies
those differences until the final metrics of the main job move by tens of percent (its cell with
2 threads instead of 1: eval/loss 24%); they cannot tell a code change from another machine. The
start of the learning curve can: to step 60 of 240, another rounding moved the main job's logged
losses by at most 9e-8 relative, while a changed initialization (Xavier gain 1.1) moved them by
3.5e-2 and a z-loss of 1e-4 by 7e-4 (experiments/benchmarks/rounding.py). So elsewhere the
verdict is the losses of the learning curve's first quarter of steps within EARLY_TOLERANCE, with
every final metric's relative difference reported beside it.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from zoo.errors import ConfigError
from zoo.records import RunRecord, read_result
from zoo.specs.experiment import parse_sets, with_sets
from zoo.specs.yamlio import dump_yaml
from zoo.sweep.ledger import Ledger
from zoo.sweep.spec import SweepSpec, cell_experiment, expand, read_saved_sweep

ENVIRONMENT = ("torch_version", "python_version", "device")
"""What makes two runs of the same code and thread count round alike (the commit is the code)."""

EARLY_TOLERANCE = 1e-5
"""The largest relative difference of a logged loss in the first quarter of steps that another
environment may cause (measured: 9e-8 at most; a changed initialization or loss: 7e-4 and more)."""


@dataclass
class Reproduction:
    cell: str
    differences: list[str] = field(default_factory=list)
    """`metric: recorded value, value now` for every final metric that is not the same float."""
    environment: list[str] = field(default_factory=list)
    """How the environment differs from the recorded one (empty: the recorded environment)."""
    error: str | None = None
    early_gap: float | None = None
    """The largest relative difference of a logged loss in the first quarter of steps."""
    early_steps: int = 0
    relative: dict[str, float] = field(default_factory=dict)
    """Each final metric's relative difference from the record."""

    @property
    def matches(self) -> bool:
        """Every final metric the same to the last bit."""
        return not self.differences and self.error is None

    @property
    def agrees(self) -> bool:
        """Bit for bit, or, in another environment, the early learning curve within EARLY_TOLERANCE."""
        if self.error is not None:
            return False
        if self.matches or not self.environment:
            return self.matches
        return self.early_gap is not None and self.early_gap <= EARLY_TOLERANCE


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def relative_difference(old: float, new: float) -> float:
    if same(old, new):
        return 0.0
    if not (math.isfinite(old) and math.isfinite(new)):
        return math.inf
    return abs(new - old) / max(abs(old), 1e-12)


def early_curve_gap(recorded: list[dict[str, float]], now: list[dict[str, float]], steps: int) -> tuple[float, int] | None:
    """(largest relative difference, last step compared) of the losses logged in the first quarter
    of `steps` (at least the first logged ones), train and eval; None where the record holds no
    loss or the two were logged at other steps."""
    def points(history: list[dict[str, float]]) -> dict[tuple[int, str], float]:
        return {(int(row["train/step"]), key): row[key] for row in history for key in ("train/loss", "eval/loss")
                if key in row and "train/step" in row}

    old, new = points(recorded), points(now)
    if not old:
        return None
    until = max(steps / 4, min(step for step, _ in old))
    old, new = ({key: value for key, value in each.items() if key[0] <= until} for each in (old, new))
    if old.keys() != new.keys():
        return None
    return max(relative_difference(old[key], new[key]) for key in old), max(step for step, _ in old)


def recorded_cells(ledger_path: Path, sets: Sequence[str]) -> tuple[SweepSpec, dict[str, Any], dict[str, Any]]:
    """The sweep beside the ledger, its base with `--set task.*` applied, and each finished cell's
    (Cell, record) by name."""
    folder = ledger_path.parent
    if not ledger_path.is_file():
        raise ConfigError(f"{ledger_path}: no such ledger")
    if not (folder / "sweep.yaml").is_file():
        raise ConfigError(f"{folder}: no sweep.yaml beside the ledger; zoo reproduce needs the sweep it records")
    bad = [key for key, _ in parse_sets(sets) if not key.startswith("task.")]
    if bad:
        raise ConfigError(f"zoo reproduce --set {', '.join(bad)}: only task.* (where the data is) may change")
    sweep, base = read_saved_sweep(folder)
    base = with_sets(base, sets)
    cells = {cell.name: cell for cell in expand(sweep)}
    latest, _ = Ledger(ledger_path).read().of_cells(list(cells.values()))
    return sweep, base, {name: (cells[name], r) for name, r in latest.items() if r.status == "finished"}


def reproduce(ledger_path: str | Path, names: Sequence[str] = (), sets: Sequence[str] = (),
              echo: Callable[[str], None] = print) -> list[Reproduction]:
    """Re-run the named finished cells (default: all) and compare each with its record."""
    sweep, base, finished = recorded_cells(Path(ledger_path), sets)
    unknown = [name for name in names if name not in finished]
    if unknown:
        shown = ", ".join(sorted(finished)[:6]) + (", ..." if len(finished) > 6 else "")
        raise ConfigError(f"zoo reproduce: no finished cell {unknown[0]!r} in {ledger_path}; finished cells: {shown}")
    if not finished:
        raise ConfigError(f"zoo reproduce: {ledger_path} holds no finished cell of its sweep's grid: nothing to "
                          "reproduce")
    out = []
    with tempfile.TemporaryDirectory(prefix="zoo-reproduce-") as scratch:
        for name in names or sorted(finished, key=lambda n: finished[n][0].index):
            cell, record = finished[name]
            result = rerun(cell_experiment(sweep, base, cell).model_dump(mode="json"), record, Path(scratch))
            out.append(result)
            echo(describe(result))
    elsewhere = sum(r.agrees and not r.matches for r in out)
    echo(f"{sum(r.matches for r in out)} of {len(out)} cells reproduce bit for bit"
         + (f"; {elsewhere} more agree within another environment's tolerance" if elsewhere else ""))
    return out


def rerun(experiment: dict[str, Any], record: RunRecord, scratch: Path) -> Reproduction:
    """Train the cell's experiment in `scratch` with the recorded thread count, on the CPU where the
    record was made on one (W&B off: logging changes no number), and compare its result.json with
    the record."""
    name = experiment["wandb"]["name"]
    if not record.metrics:
        return Reproduction(name, error="its record holds no final metric, so nothing could be compared")
    recorded = record.environment or {}
    experiment["train"]["out_dir"] = str(scratch / "runs")
    if recorded.get("device", "").startswith("cpu"):
        experiment["train"]["device"] = "cpu"  # not the GPU that `auto` would pick here
    experiment["wandb"].update(mode="disabled", dir=str(scratch))
    file = scratch / f"{len(list(scratch.glob('*.yaml')))}.yaml"
    file.write_text(dump_yaml(experiment), encoding="utf-8")
    threads = str(record.threads or torch.get_num_threads())
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    done = subprocess.run([sys.executable, "-m", "zoo.cli", "train", str(file)], capture_output=True, text=True, env=env)
    outcome = Reproduction(name)
    result_file = scratch / "runs" / name / "result.json"
    if done.returncode != 0 or not result_file.exists():
        outcome.error = "training it again failed: " + (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return outcome
    now = read_result(result_file)
    outcome.environment = environment_changes(recorded, now.environment or {})
    outcome.differences = metric_differences(record.metrics, now.metrics)
    outcome.relative = {key: relative_difference(old, now.metrics.get(key, math.nan)) for key, old in record.metrics.items()}
    if now.steps != record.steps:
        outcome.differences.append(f"steps: {record.steps} recorded, {now.steps} now")
    gap = early_curve_gap(record.history, now.history, record.steps) if now.steps == record.steps else None
    outcome.early_gap, outcome.early_steps = gap if gap is not None else (None, 0)
    return outcome


def metric_differences(recorded: dict[str, float], now: dict[str, float]) -> list[str]:
    """Every final metric whose value differs, and every metric only one side reported: a run that
    stopped reporting a metric, or started reporting one, does not reproduce its record."""
    changed = [f"{key}: {old!r} recorded, {now[key]!r} now" for key, old in recorded.items()
               if key in now and not same(old, now[key])]
    lost = [f"{key}: {old!r} recorded, not reported now" for key, old in recorded.items() if key not in now]
    new = [f"{key}: not in the record, {value!r} now" for key, value in now.items() if key not in recorded]
    return changed + lost + new


def environment_changes(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    return [f"{key}: {recorded.get(key)} recorded, {now.get(key)} now" for key in ENVIRONMENT
            if recorded.get(key) != now.get(key)]


def describe(result: Reproduction) -> str:
    if result.error is not None:
        return f"{result.cell}: NOT REPRODUCED: {result.error}"
    if result.matches:
        return f"{result.cell}: every final metric matches bit for bit"
    if not result.environment:
        return f"{result.cell}: DIFFERS in the recorded environment: {'; '.join(result.differences)}"
    where = f"another environment ({'; '.join(result.environment)})"
    spread = ", ".join(f"{key} {value:.2g}" for key, value in result.relative.items())
    if result.early_gap is None:
        return (f"{result.cell}: DIFFERS, in {where}, and the record holds no learning curve to compare "
                f"(final metrics' relative differences: {spread})")
    curve = (f"the losses logged to step {result.early_steps} are within {result.early_gap:.2g} of the record "
             f"(tolerance {EARLY_TOLERANCE:g})")
    if result.agrees:
        return f"{result.cell}: agrees in {where}: {curve}; final metrics' relative differences: {spread}"
    return (f"{result.cell}: DIFFERS beyond {where}'s rounding: {curve.replace('within', 'up to')}; final metrics' "
            f"relative differences: {spread}")
