"""Runs that are not fresh evidence: the same computation as a run another sweep recorded earlier,
whether copied from its ledger (a seeded folder) or trained again to the same bits (the same model
function, seed and batches under another name). Two runs computed the same where every training
loss they logged is equal, bit for bit, at the same steps. The sweeps looked in are the folders
beside the compared one (`sweeps/*`, or a results folder's ledgers).

A confirmatory study (every compared run recorded the question it declares now) leaves such runs
out of its comparison unless the sweep declares their sweep in `reuses`; a study that is not
confirmatory counts them and says so. A tuned sweep's confirmation compares its confirmation runs
only: its tuning runs choose, so reused ones there are named and kept."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from zoo.records import RunRecord
from zoo.records.ledger import Ledger
from zoo.sweep.question import declaration, declaration_changes
from zoo.sweep.spec import SweepSpec

TrainingCurve = tuple[tuple[float, float], ...]


def training_curve(record: RunRecord) -> TrainingCurve | None:
    """The training losses a run logged, with their steps: None where fewer than two were logged
    (too little to call two runs one computation)."""
    losses = tuple((row["train/step"], row["train/loss"]) for row in record.history
                   if "train/loss" in row and "train/step" in row)
    return losses if len(losses) >= 2 else None


def group(record: RunRecord) -> str | None:
    """The sweep a record was trained by (its W&B group), where it recorded its experiment."""
    return ((record.experiment or {}).get("wandb") or {}).get("group")


def earlier_runs(folder: Path) -> Iterator[tuple[str, TrainingCurve, str | None]]:
    """(sweep, training curve, time) of every finished run in the ledgers beside `folder`, each
    trained by the sweep whose folder holds it (a record copied there from another sweep is that
    sweep's, not its)."""
    for ledger in sorted(folder.resolve().parent.glob("*/ledger.jsonl")):
        if ledger.parent == folder.resolve():
            continue
        stat = ledger.stat()
        for curve, time in finished_curves(ledger, stat.st_size, stat.st_mtime_ns):
            yield ledger.parent.name, curve, time


@lru_cache(maxsize=256)
def finished_curves(ledger: Path, size: int, modified: int) -> tuple[tuple[TrainingCurve, str | None], ...]:
    """(training curve, time) of each finished run the ledger's own sweep trained, read once per
    version of the file (its size and modification time): comparing every published sweep reads
    each other ledger once, not once per sweep and metric."""
    return tuple((curve, record.time) for record in Ledger(ledger).read().records
                 if record.status == "finished" and group(record) in (None, ledger.parent.name)
                 and (curve := training_curve(record)) is not None)


def origins(folder: Path, name: str, records: list[RunRecord]) -> dict[str, str]:
    """Each reused record's cell and the sweep it is reused from: the sweep named by a record's own
    group, where a record was copied from another sweep's ledger, else the sweep beside that
    recorded the same computation first."""
    found = {r.cell: group(r) for r in records if group(r) not in (None, name)}
    wanted: dict[TrainingCurve, list[RunRecord]] = {}
    for record in records:
        if record.cell not in found and training_curve(record) is not None:
            wanted.setdefault(training_curve(record), []).append(record)
    if not wanted:
        return found
    first: dict[str, tuple[str, str]] = {}  # cell -> (time, sweep) of the earliest run of its computation
    for sweep, curve, time in earlier_runs(folder):
        for mine in wanted.get(curve, []):
            if time and mine.time and time < mine.time and (time, sweep) < first.get(mine.cell, ("~", "")):
                first[mine.cell] = (time, sweep)
    return {**found, **{cell: sweep for cell, (_, sweep) in first.items()}}


def confirmatory(sweep: SweepSpec, records: list[RunRecord]) -> bool:
    """Every run recorded the question the sweep file declares now."""
    now = declaration(sweep)
    return bool(records) and all(r.declared is not None and not declaration_changes(r.declared, now) for r in records)


@dataclass
class Reuse:
    compared: dict[str, str] = field(default_factory=dict)
    """Compared runs' cells, each with the sweep it is reused from."""
    choosing: dict[str, str] = field(default_factory=dict)
    """A confirmation's tuning runs reused, which choose values and are not compared."""
    left_out: list[str] = field(default_factory=list)
    """Cells left out of the comparison: reused, undeclared, in a confirmatory study."""
    confirmatory: bool = False
    declared: tuple[str, ...] = ()

    @classmethod
    def of(cls, folder: Path, sweep: SweepSpec, records: list[RunRecord]) -> Reuse:
        found = origins(folder, sweep.name, records)
        confirming = set(sweep.confirm_seeds)
        compared = {r.cell: found[r.cell] for r in records if r.cell in found and (not confirming or r.seed in confirming)}
        choosing = {cell: sweep_ for cell, sweep_ in found.items() if cell not in compared}
        sure = confirmatory(sweep, records)
        left_out = [cell for cell, origin in compared.items() if sure and origin not in sweep.reuses]
        return cls(compared, choosing, left_out, sure, tuple(sweep.reuses))

    def notes(self, compared_runs: int, confirmation: bool) -> list[str]:
        said = []
        if self.compared:
            runs = "confirmation runs" if confirmation else "runs"
            said.append(f"reused: {len(self.compared)} of the {compared_runs} {runs} are the same computations "
                        f"as runs recorded earlier by {counted(self.compared)} (every logged training loss equal, bit "
                        f"for bit): not fresh evidence; " + self.verdict())
        if self.choosing:
            said.append(f"reused: {len(self.choosing)} tuning runs are the same computations as runs recorded earlier by "
                        f"{counted(self.choosing)}; they choose the values and are not compared")
        return said

    def verdict(self) -> str:
        undeclared = sorted({origin for origin in self.compared.values() if origin not in self.declared})
        if not undeclared:
            return "counted, as the sweep declares (reuses)"
        if self.confirmatory:
            return (f"left out of this confirmatory comparison (declare `reuses: {json.dumps(undeclared)}` in the sweep "
                    "before its runs to count them)")
        return ("counted, as this study is not confirmatory (no run records the question declared now), so its "
                "verdicts rest on them too")


def counted(origins_: dict[str, str]) -> str:
    """'seed-axes (16) and seed-axes-powered (8)'."""
    parts = [f"{sweep} ({n})" for sweep, n in sorted(Counter(origins_.values()).items())]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
