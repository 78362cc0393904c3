"""Running a sweep: each cell is `zoo train` in a process of its own, so one crashing cell cannot
take the others down; a rerun skips what the ledger says is done and resumes the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import yaml

from zoo.sweep.ledger import DONE, Ledger
from zoo.sweep.spec import Cell, SweepSpec, cell_experiment, expand, shard


def threads_per_worker(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // workers)


def run_cell(sweep: SweepSpec, base: dict[str, Any], cell: Cell, ledger: Ledger, threads: int) -> dict[str, Any]:
    """Train one cell in a child process (resuming its checkpoint if a killed sweep left one)."""
    experiment = cell_experiment(sweep, base, cell)
    run_dir = Path(experiment.train.out_dir) / cell.name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "result.json").unlink(missing_ok=True)
    file = run_dir / "experiment.yaml"
    file.write_text(experiment.to_yaml(), encoding="utf-8")
    identity = {"cell": cell.name, "variant": cell.variant, "seed": cell.seed,
                "assignment": {key: value for key, value in cell.assignment}}
    ledger.append({**identity, "status": "running"})
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    with open(run_dir / "log.txt", "w", encoding="utf-8") as log:
        code = subprocess.run([sys.executable, "-m", "zoo.cli", "train", str(file), "--resume"],
                              stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    result_file = run_dir / "result.json"
    if result_file.exists():
        result = json.loads(result_file.read_text(encoding="utf-8"))
        record = {**identity, **{k: result.get(k) for k in ("status", "metrics", "best", "steps", "wall_time_s",
                                                            "parameters", "model_name", "threads", "history", "diverged_at")}}
    else:
        tail = (run_dir / "log.txt").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        record = {**identity, "status": "failed", "exit_code": code, "error": "\n".join(tail)}
    ledger.append(record)
    return record


def run_sweep(sweep: SweepSpec, base: dict[str, Any], workers: int = 1, shard_of: tuple[int, int] = (0, 1),
              echo: Callable[[str], None] = print) -> dict[str, str]:
    """Run the shard's cells that the ledger does not list as done; returns each cell's status."""
    cells = shard(expand(sweep), *shard_of)
    for cell in cells:
        cell_experiment(sweep, base, cell)  # every cell validates before any trains
    folder = sweep.directory()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sweep.yaml").write_text(
        yaml.safe_dump({**sweep.model_dump(mode="json"), "base": base}, sort_keys=False, allow_unicode=True))
    ledger = Ledger(folder / "ledger.jsonl")
    latest = ledger.latest()
    statuses = {c.name: latest[c.name]["status"] for c in cells if latest.get(c.name, {}).get("status") in DONE}
    todo = [cell for cell in cells if cell.name not in statuses]
    echo(f"sweep {sweep.name}: {len(cells)} cells in this shard, {len(statuses)} already done, "
         f"{len(todo)} to run with {workers} worker(s)")
    threads = threads_per_worker(workers)

    def one(cell: Cell) -> None:
        record = run_cell(sweep, base, cell, ledger, threads)
        statuses[cell.name] = record["status"]
        value = (record.get("metrics") or {}).get(sweep.metric)
        shown = f"{sweep.metric}={value:.4g}" if isinstance(value, (int, float)) else record.get("error", "")[-200:]
        echo(f"[{len(statuses)}/{len(cells)}] {cell.name}: {record['status']} {shown}")

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, todo))
    return statuses
