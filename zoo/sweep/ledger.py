"""The sweep's ledger: one RunRecord a line for each event of a cell (running, then finished,
diverged, failed or interrupted). Appends only, each line written whole under a file lock, so a
sweep killed at any moment, or two shards appending at once, leave a ledger that says what was done."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from zoo.errors import describe_validation
from zoo.files import fcntl
from zoo.records import RunRecord


@dataclass
class LedgerRead:
    """The readable records in order, and the damaged lines as (line number, problem)."""

    records: list[RunRecord] = field(default_factory=list)
    damaged: list[tuple[int, str]] = field(default_factory=list)

    def latest(self) -> dict[str, RunRecord]:
        """The last record of each cell, by cell name."""
        return {record.cell: record for record in self.records if record.cell is not None}

    def warnings(self, path: Path) -> list[str]:
        return [f"{path}:{number}: a damaged line was left out ({problem})" for number, problem in self.damaged]


class Ledger:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def append(self, record: RunRecord | dict) -> None:
        if isinstance(record, dict):
            record = RunRecord.model_validate(record)
        record = record.model_copy(update={"time": time.strftime("%Y-%m-%dT%H:%M:%S")})
        line = (record.to_json() + "\n").encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)  # closing drops the lock

    def records(self) -> list[dict]:
        """Every readable record as plain data, in order."""
        return [record.model_dump(exclude_none=True) for record in self.read().records]

    def latest(self) -> dict[str, dict]:
        """The last record of each cell as plain data, by cell name."""
        return {name: record.model_dump(exclude_none=True) for name, record in self.read().latest().items()}

    def read(self) -> LedgerRead:
        out = LedgerRead()
        if not self.path.exists():
            return out
        for number, line in enumerate(self.path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.records.append(RunRecord.model_validate_json(line))
            except ValidationError as err:
                problem = describe_validation(err)
                out.damaged.append((number, problem if len(problem) < 160 else problem[:157] + "..."))
        return out
