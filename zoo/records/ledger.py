"""The sweep's ledger: one RunRecord a line for each event of a cell (running, then finished,
diverged, failed or interrupted). Appends only, each line written whole under a file lock, so a
sweep killed at any moment, or two shards appending at once, leave a ledger that says what was done."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from zoo.errors import describe_validation
from zoo.files import WriteError, fcntl, inside_its_folder, read_bounded
from zoo.records import DONE, RunRecord

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""Open the ledger itself, never what a link in its place points at."""

LEDGER_BYTES = 1 << 30
"""The most a ledger may hold: a line a cell event, each a few kB with its learning curve, so a
million cells' worth; a device or a FIFO in its place is refused (zoo.files.regular_file)."""


class GridCell(Protocol):
    """What the ledger asks of a sweep's cell (zoo.sweep.spec.Cell): its name and grid values."""

    name: str
    assignment: Any


def stands_for(record: RunRecord, cell: GridCell) -> bool:
    """Whether a ledger record is a result of this cell: the same grid values, compared as data."""
    def text(values: dict[str, Any]) -> str:
        return json.dumps(values, sort_keys=True, default=repr)

    return record.assignment is not None and text(record.assignment) == text(dict(cell.assignment))


def write_whole(fd: int, data: bytes, path: Path, size: int) -> None:
    """Write all of `data` at the end of the file and fsync it; on a short or failed write, cut the
    file back to `size` (its length before) and raise a WriteError."""
    written = 0
    try:
        while written < len(data):
            n = os.write(fd, data[written:])
            if n == 0:
                raise OSError(0, "no byte could be written")
            written += n
        os.fsync(fd)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise WriteError(f"{path}: a record could not be appended ({err.strerror or err}; {written} of {len(data)} "
                         "bytes written, then cut off again): the cell's result is kept in its run folder, and "
                         "running the sweep again records it") from None


@dataclass
class LedgerRead:
    """The readable records in order, and the damaged lines as (line number, problem)."""

    records: list[RunRecord] = field(default_factory=list)
    damaged: list[tuple[int, str]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    """The line number of each record."""

    def latest(self) -> dict[str, RunRecord]:
        """The last record of each cell, by cell name."""
        return {record.cell: record for record in self.records if record.cell is not None}

    def of_cells(self, cells: Sequence[GridCell]) -> tuple[dict[str, RunRecord], list[str]]:
        """The last record of each cell that stands for it (same grid values), and the names of the
        cells that also have records which do not (left out: another experiment's, by that name)."""
        by_name = {cell.name: cell for cell in cells}
        latest: dict[str, RunRecord] = {}
        foreign: set[str] = set()
        for record in self.records:
            cell = by_name.get(record.cell)
            if cell is not None and stands_for(record, cell):
                latest[cell.name] = record
            elif cell is not None:
                foreign.add(cell.name)
        return latest, sorted(foreign)

    def warnings(self, path: Path) -> list[str]:
        return [f"{path}:{number}: a damaged line was left out ({problem})" for number, problem in self.damaged]

    def repeated_results(self, path: Path) -> list[str]:
        """Each cell with more than one result line (finished or diverged): the last stands for it
        (a record appended after a rerun, or by hand), and the ones it replaces are said, not dropped
        in silence."""
        done: dict[str, list[int]] = {}
        for record, number in zip(self.records, self.lines, strict=True):
            if record.cell is not None and record.status in DONE:
                done.setdefault(record.cell, []).append(number)
        return [f"{path}: cell {cell} has {len(numbers)} result lines ({', '.join(map(str, numbers))}); the last, line "
                f"{numbers[-1]}, stands for it (the earlier stay in the ledger, not compared)" for cell, numbers in done.items()
                if len(numbers) > 1]


class Ledger:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def append(self, record: RunRecord | dict) -> None:
        """Append one record on a line of its own (after a line that lacks its newline, a newline
        first), written whole or not at all: a short write (full disk, file-size limit) is cut
        back off and raised as a WriteError that names the ledger."""
        if isinstance(record, dict):
            record = RunRecord.model_validate(record)
        record = record.model_copy(update={"time": time.strftime("%Y-%m-%dT%H:%M:%S")})
        line = (record.to_json() + "\n").encode("utf-8")
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                inside_its_folder(self.path, "a sweep's ledger")
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | NOFOLLOW, 0o666)
            except OSError as err:
                if err.errno == errno.ELOOP:  # a link planted between the check and the open
                    inside_its_folder(self.path, "a sweep's ledger")
                raise WriteError(f"{self.path}: cannot append a record: {err.strerror or err}") from None
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line
                write_whole(fd, line, self.path, size)
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
        inside_its_folder(self.path, "a sweep's ledger")
        if not self.path.exists():
            return out
        text = read_bounded(self.path, "a sweep's ledger", LEDGER_BYTES).decode("utf-8", errors="replace")
        for number, line in enumerate(text.split("\n"), 1):  # at newlines alone: a raw U+2028 in a string is text
            if not line.strip():
                continue
            try:
                out.records.append(RunRecord.model_validate_json(line))
                out.lines.append(number)
            except ValidationError as err:
                problem = describe_validation(err)
                out.damaged.append((number, problem if len(problem) < 160 else problem[:157] + "..."))
        return out
