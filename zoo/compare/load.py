"""A finished sweep read back from its folder alone: the saved sweep, its base experiment, and
the latest record of each current cell; what was left out is said, not dropped silently."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoo.compare.comparison import Comparison
from zoo.compare.reused import Reuse
from zoo.errors import ConfigError
from zoo.metrics import by_comparison, impossible_values, without_impossible_values
from zoo.near_paths import near_path
from zoo.records import RunRecord
from zoo.records.ledger import Ledger
from zoo.specs.registries import describe_unknown
from zoo.sweep.keys import check_comparisons_metric
from zoo.sweep.names import safe_text
from zoo.sweep.record_differences import experiment_changes
from zoo.sweep.spec import SweepSpec, cell_experiment, confirmation_cells, expand, read_saved_sweep


@dataclass
class SweepRecords:
    folder: Path
    comparison: Comparison
    """The saved sweep's design, asked its own question or, where another metric was asked for, that one."""
    base: dict[str, Any]
    records: list[RunRecord]
    notes: list[str]
    progress: str
    """How many cells of the grid are finished, diverged, failed, running, interrupted or missing."""
    suffix: str
    """"" for the sweep's own metric, else "-<metric>": the files of another metric get their own names."""


def logged_metrics(records: list[RunRecord]) -> list[str]:
    """Every metric a finished run of the sweep reported at its end."""
    return sorted({name for r in records for name in r.final_metrics()})


def read_sweep(sweep_dir: str | Path, metric: str | None = None) -> SweepRecords:
    """Only the records of the sweep's current cells count: after a grid or the seeds changed, the
    ledger's records of other cells are left out, and so are damaged lines; both become notes.
    `metric` other than the sweep's own is another question of the same design (Question.asking):
    its goal from its name (min for a loss), without the target set for the sweep's own metric."""
    sweep_dir = Path(sweep_dir)
    saved = sweep_dir / "sweep.yaml"
    if not saved.exists():
        there = near_path(sweep_dir)
        raise ConfigError(f"{sweep_dir}: no such folder{there}" if there else
                          f"{sweep_dir}: no sweep.yaml; is this a folder that `zoo sweep` wrote?")
    sweep, base = read_saved_sweep(sweep_dir)
    read = Ledger(sweep_dir / "ledger.jsonl").read()
    notes = [*read.warnings(sweep_dir / "ledger.jsonl"), *read.repeated_results(sweep_dir / "ledger.jsonl")]
    tuning = expand(sweep)
    cells = [*tuning, *confirmation_cells(sweep)]  # the confirmation's candidates: its chosen cells are among them
    names = {cell.name for cell in cells}
    other = sorted({r.cell for r in read.records if r.cell is not None and r.cell not in names})
    if other:
        notes.append(f"{len(other)} ledger record(s) of cells outside the current grid and seeds were left out "
                     f"(e.g. {other[0]})")
    current, foreign = read.of_cells(cells)
    if foreign:
        notes.append(f"{len(foreign)} cell(s) have ledger records whose grid values differ from the cell's, left out "
                     f"(e.g. {foreign[0]})")
    records = [r for r in current.values() if r.status not in ("running", "interrupted")]
    check_counts(sweep_dir / "ledger.jsonl", records)
    notes += [f"cell {r.cell}: {said}; left out, as a non-finite value is" for r in records
              for said in impossible_values(r)]
    records = [without_impossible_values(r) for r in records]
    check_ran_as_defined(sweep_dir, sweep, base, {cell.name: cell for cell in cells}, records)
    progress = grid_progress(len(tuning), [current[c.name].status for c in tuning if c.name in current])
    reuse = Reuse.of(sweep_dir, sweep, records)
    compared = len([r for r in records if not sweep.confirm_seeds or r.seed in sweep.confirm_seeds])
    reused = reuse.notes(compared, bool(sweep.confirm_seeds))  # the compared runs' note first, where there is one
    notes += reused
    if reuse.left_out and len(reuse.left_out) == compared:
        raise ConfigError(f"{sweep_dir}: every compared run is reused: {reused[0]}")
    records = [r for r in records if r.cell not in reuse.left_out]
    confirmed = [r for r in records if r.seed in sweep.confirm_seeds]
    if sweep.confirm_seeds:
        notes.append(f"confirmation on seeds {sweep.confirm_seeds}: {len(confirmed)} run(s) of chosen values recorded")
    if not records:
        raise ConfigError(f"{sweep_dir}: the ledger holds no finished, diverged or failed cell of this grid yet "
                          f"({progress})")
    suffix, known, comparison = "", logged_metrics(records), Comparison.of(sweep)
    notes += [f"margins: {describe_unknown('metric', name, known).replace('unknown metric', 'metric')} (what the runs "
              "logged): its margin is never applied" for name in sweep.margins
              if known and name not in known and not (by_comparison(name) and name == sweep.metric)]
    if known and (metric or sweep.metric) not in known and not by_comparison(metric or sweep.metric):
        raise ConfigError(f"{sweep_dir}: {'--metric' if metric else 'the sweep metric'}: "
                          f"{describe_unknown('metric', metric or sweep.metric, known)} (what this sweep's runs logged)")
    if metric is not None and metric != sweep.metric:
        try:
            check_comparisons_metric(metric, sweep.tune, ())  # asked afterwards: its tuning seeds compute it
            comparison = comparison.asking(metric)
        except ConfigError as err:  # a tuned sweep compares on a held-out split only, say
            raise ConfigError(f"{sweep_dir}: --metric {metric}: {err}") from None
        suffix = "-" + safe_text(metric)
    notes += [] if by_comparison(comparison.metric) else missing_metric(records, comparison.metric)
    return SweepRecords(sweep_dir, comparison, base, records, notes, progress, suffix)


COUNT_LIMITS = {"flops": 1e40, "parameters": 1e16, "tokens": 1e20}
"""Beyond these no run trained (the largest trainings spend about 1e27 FLOPs): a count past one is
an edit or a bug, and a fit against it would overflow."""


def check_counts(ledger: Path, records: list[RunRecord]) -> None:
    """Each run's counts (FLOPs, parameters, tokens), where recorded, are positive numbers a run
    could reach: 0 or 1e308 FLOPs broke the scaling fit deep in numpy, and a negative count is no count."""
    for record in records:
        for field, limit in COUNT_LIMITS.items():
            value = getattr(record, field)
            if value is not None and not (0 < value <= limit):
                raise ConfigError(f"{ledger}: cell {record.cell}: {field} {value:g} is not a count a run can record "
                                  f"(a positive number up to {limit:g}); correct or remove the line")


def check_ran_as_defined(sweep_dir: Path, sweep: SweepSpec, base: dict[str, Any], cells: dict[str, Any],
                         records: list[RunRecord]) -> None:
    """Each record ran the experiment sweep.yaml gives its cell (where it recorded its experiment):
    a sweep.yaml edited after its cells ran (a size's d_model, say) would put another model's
    numbers under the edited definition. `zoo sweep` refuses the same edit (runner.check_folder)."""
    for record in records:
        if record.experiment is None or record.cell not in cells:
            continue
        changed = experiment_changes(record.experiment, cell_experiment(sweep, base, cells[record.cell]).model_dump(mode="json"))
        if changed:
            raise ConfigError(f"{sweep_dir}: cell {record.cell} ran another experiment than sweep.yaml gives it now "
                              f"({'; '.join(changed[:3])}{'; ...' if len(changed) > 3 else ''}): the sweep.yaml was "
                              "changed after its cells ran; restore it, or sweep the change under another name")


def missing_metric(records: list[RunRecord], metric: str) -> list[str]:
    """A finished cell without the compared metric counts as finished yet adds nothing to the
    table: it is named, not dropped in silence."""
    lacking = [str(r.cell or r.name) for r in records if r.status == "finished" and r.value(metric) is None]
    if not lacking:
        return []
    shown = ", ".join(lacking[:5]) + (f" and {len(lacking) - 5} more" if len(lacking) > 5 else "")
    return [f"{len(lacking)} finished cell(s) logged no final {metric!r} and are left out of the comparison: {shown}"]


def grid_progress(cells: int, statuses: list[str]) -> str:
    """`12 of 16 cells finished; 1 failed, 3 missing`: what the comparison rests on."""
    counts = {status: statuses.count(status) for status in ("finished", "diverged", "failed", "running", "interrupted")}
    counts["missing"] = cells - len(statuses)
    rest = [f"{n} {'running or killed' if s == 'running' else s}" for s, n in counts.items() if n and s != "finished"]
    return f"{counts['finished']} of {cells} cells finished" + (f"; {', '.join(rest)}" if rest else "")
