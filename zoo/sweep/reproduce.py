"""`zoo reproduce LEDGER [CELL...]`: train recorded cells again, in a temporary folder, with the
thread count each was recorded with, and say cell by cell whether every final metric is the same
to the last bit. A CPU run is a function of its experiment, its data, the code and the thread
count; a published table that does not reproduce was made by other code or other data."""

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
from zoo.provenance import environment
from zoo.records import RunRecord, read_result
from zoo.specs.experiment import parse_sets, with_sets
from zoo.specs.yamlio import dump_yaml, read_mapping
from zoo.sweep.ledger import Ledger
from zoo.sweep.spec import SweepSpec, cell_experiment, expand


@dataclass
class Reproduction:
    cell: str
    differences: list[str] = field(default_factory=list)
    """`metric: recorded value, value now` for every final metric that is not the same float."""
    notes: list[str] = field(default_factory=list)
    """How the environment differs from the recorded one (what may explain a difference)."""
    error: str | None = None

    @property
    def matches(self) -> bool:
        return not self.differences and self.error is None


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


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
    data = read_mapping(folder / "sweep.yaml", "saved sweep")
    sweep = SweepSpec.model_validate({**data, "base": {}})
    base = with_sets(data.get("base") or {}, sets)
    cells = {cell.name: cell for cell in expand(sweep)}
    latest, _ = Ledger(ledger_path).read().of_cells(list(cells.values()))
    return sweep, base, {name: (cells[name], r) for name, r in latest.items() if r.status == "finished"}


def reproduce(ledger_path: str | Path, names: Sequence[str] = (), sets: Sequence[str] = (),
              echo: Callable[[str], None] = print) -> list[Reproduction]:
    """Re-run the named finished cells (default: all) and compare their final metrics bit for bit."""
    sweep, base, finished = recorded_cells(Path(ledger_path), sets)
    unknown = [name for name in names if name not in finished]
    if unknown:
        shown = ", ".join(sorted(finished)[:6]) + (", ..." if len(finished) > 6 else "")
        raise ConfigError(f"zoo reproduce: no finished cell {unknown[0]!r} in {ledger_path}; finished cells: {shown}")
    out = []
    with tempfile.TemporaryDirectory(prefix="zoo-reproduce-") as scratch:
        for name in names or sorted(finished, key=lambda n: finished[n][0].index):
            cell, record = finished[name]
            result = rerun(cell_experiment(sweep, base, cell).model_dump(mode="json"), record, Path(scratch))
            out.append(result)
            echo(describe(result))
    echo(f"{sum(r.matches for r in out)} of {len(out)} cells reproduce bit for bit")
    return out


def rerun(experiment: dict[str, Any], record: RunRecord, scratch: Path) -> Reproduction:
    """Train the cell's experiment in `scratch` with the recorded thread count (W&B off: logging
    changes no number) and compare its result.json with the record."""
    name = experiment["wandb"]["name"]
    experiment["train"]["out_dir"] = str(scratch / "runs")
    experiment["wandb"].update(mode="disabled", dir=str(scratch))
    file = scratch / f"{len(list(scratch.glob('*.yaml')))}.yaml"
    file.write_text(dump_yaml(experiment), encoding="utf-8")
    threads = str(record.threads or torch.get_num_threads())
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    done = subprocess.run([sys.executable, "-m", "zoo.cli", "train", str(file)], capture_output=True, text=True, env=env)
    outcome = Reproduction(name, notes=environment_changes(record.environment or {}))
    result_file = scratch / "runs" / name / "result.json"
    if done.returncode != 0 or not result_file.exists():
        outcome.error = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return outcome
    now = read_result(result_file)
    outcome.differences = [f"{key}: {old!r} recorded, {now.metrics.get(key)!r} now" for key, old in record.metrics.items()
                           if key not in now.metrics or not same(old, now.metrics[key])]
    if now.steps != record.steps:
        outcome.differences.append(f"steps: {record.steps} recorded, {now.steps} now")
    return outcome


def environment_changes(recorded: dict[str, str]) -> list[str]:
    now = environment(torch.device("cpu"))
    return [f"{key}: {value} recorded, {now.get(key)} now" for key, value in recorded.items() if now.get(key) != value]


def describe(result: Reproduction) -> str:
    if result.error is not None:
        return f"{result.cell}: could not be trained again: {result.error}"
    if result.matches:
        return f"{result.cell}: every final metric matches bit for bit"
    notes = f" (recorded with {'; '.join(result.notes)})" if result.notes else ""
    return f"{result.cell}: DIFFERS: {'; '.join(result.differences)}{notes}"
