"""The sweep's ledger: one JSON line per event of a cell (running, then finished, diverged or
failed). Appends only, so a sweep killed at any moment leaves a ledger that says what was done."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

DONE = ("finished", "diverged")
"""Statuses a rerun keeps; a running (interrupted) or failed cell runs again."""


class Ledger:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps({**record, "time": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())

    def records(self) -> list[dict[str, Any]]:
        """Every readable record in order; a line cut short by a kill is skipped."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def latest(self) -> dict[str, dict[str, Any]]:
        """The last record of each cell, by cell name."""
        return {record["cell"]: record for record in self.records()}
