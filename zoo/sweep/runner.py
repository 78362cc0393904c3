"""Running a sweep: each cell is `zoo train` in a worker process of the sweep's (zoo.sweep.worker),
which trains cell after cell without a process start each, so one crashing cell cannot take the
others down; a rerun skips what the ledger says is done and resumes the rest.

One sweep process a shard holds the shard's lock, each training holds its run folder's lock, and
SIGTERM or SIGINT to the sweep is passed on to every training child, which checkpoints and stops.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from zoo.children import ended
from zoo.errors import ConfigError, Interrupted, RunConflict, ZooError
from zoo.files import FolderLock, atomic_write, inside_its_folder, lock_holder
from zoo.metrics import impossible_values
from zoo.records import DONE, RunRecord, read_result
from zoo.records.ledger import Ledger
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.identity import changes_between, flatten
from zoo.specs.yamlio import dump_yaml, read_mapping
from zoo.sweep.loading import check_distinct
from zoo.sweep.names import safe_text
from zoo.sweep.pool import Workers, threads_per_worker
from zoo.sweep.question import declaration
from zoo.sweep.spec import NAMED, Cell, SweepSpec, cell_experiment, expand, read_saved_sweep, shard
from zoo.sweep.torchrun_cell import cell_processes
from zoo.tasks import data_digests
from zoo.trainer.guards import signals_to
from zoo.trainer.parallelism import check_fsdp_world
from zoo.trainer.progress import duration
from zoo.trainer.resume_checks import changed_fields, data_changes


def identity_record(cell: Cell, declared: dict[str, Any] | None = None) -> dict[str, Any]:
    """What every ledger line of a cell carries: which cell, and the question its sweep declared."""
    return {"cell": cell.name, "variant": cell.variant, "seed": cell.seed,
            "assignment": {key: value for key, value in cell.assignment}, "declared": declared}


def run_cell(experiment: ExperimentSpec, cell: Cell, ledger: Ledger, workers: Workers,
             declared: dict[str, Any] | None = None) -> RunRecord | None:
    """Train one cell (its experiment given) in a child process, resuming its checkpoint if a
    killed sweep left one; None when the sweep is stopping or another process (another shard)
    holds the cell."""
    run_dir = Path(experiment.train.out_dir) / cell.name
    if lock_holder(run_dir) is not None or workers.stopping is not None:
        return None
    try:
        lock = FolderLock(run_dir, ".cell.lock", "this cell").acquire()
    except RunConflict:
        return None
    try:
        return train_cell(experiment, run_dir, cell, ledger, workers, declared)
    finally:
        lock.release()


def train_cell(experiment: ExperimentSpec, run_dir: Path, cell: Cell, ledger: Ledger,
               workers: Workers, declared: dict[str, Any] | None = None) -> RunRecord | None:
    identity = identity_record(cell, declared)
    file, result_file = run_dir / "experiment.yaml", run_dir / "result.json"
    other = foreign_run(file, experiment)
    if other:
        record = RunRecord(status="failed", error=other, **identity)
        ledger.append(record)
        return record
    if result_file.exists():
        previous = read_result(result_file)
        impossible = impossible_values(previous)
        if previous.status in DONE and impossible:  # an edit or a bug, never a measurement: not adopted
            record = RunRecord(status="failed", error=f"{result_file}: {'; '.join(impossible)}; not adopted into the "
                               "ledger (no model computes such a value): remove the file to train the cell again",
                               **identity)
            ledger.append(record)
            return record
        if previous.status in DONE:  # trained before the ledger heard of it: record, don't retrain
            record = previous.model_copy(update=identity)
            ledger.append(record)
            return record
        result_file.unlink()
    atomic_write(file, experiment.to_yaml())
    unwritable = log_problem(run_dir / "log.txt")
    if unwritable:
        record = RunRecord(status="failed", error=unwritable, **identity)
        ledger.append(record)
        return record
    ledger.append(RunRecord(status="running", **identity))
    code = workers.train(file, run_dir / "log.txt", cell_processes(experiment, workers.processes_per_cell))
    if code is None:
        return None
    if result_file.exists():
        record = read_result(result_file).model_copy(update=identity)
    else:
        record = RunRecord(status="failed", exit_code=code, error=log_tail(run_dir / "log.txt", code), **identity)
    ledger.append(record)
    return record


def log_problem(log: Path) -> str | None:
    """Why the cell's log cannot be written (a folder in its place, a full disk, no permission), said
    before the cell is handed to a worker, or None."""
    try:
        with open(log, "a", encoding="utf-8"):
            return None
    except OSError as err:
        return f"{log}: cannot open the cell's log ({err.strerror or err}); the cell did not run"


def log_tail(log: Path, code: int) -> str:
    """The last lines of a failed cell's log, then the signal that killed its worker, if one did;
    a worker that ended before the cell wrote anything is said so. Where the zoo explained the
    failure (its `zoo: ` line, near the end), that line alone: under torchrun the log ends in
    torchrun's own report of a rank's failure, which says nothing of why."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except FileNotFoundError:
        lines = []
    except OSError as err:
        return f"{log}: the cell's log cannot be read ({err.strerror or err}); its worker ended ({ended(code)})"
    if not lines:
        return f"its worker ended ({ended(code)}) before the cell wrote anything"
    explained = [line for line in lines[-EXPLAINED_WITHIN:] if line.startswith("zoo: ")]
    tail = explained[-1:] or lines[-5:]
    return "\n".join([*tail, *([f"its worker was {ended(code)}"] if code < 0 else [])])


EXPLAINED_WITHIN = 40
"""How far from the end of a failed cell's log its `zoo: ` line is looked for: past torchrun's
report of the failure (about 20 lines), not as far back as an earlier attempt's line."""


def foreign_run(file: Path, experiment: ExperimentSpec) -> str | None:
    """Why the cell's folder cannot be this cell's (it holds a run of another experiment), or None."""
    if not file.exists():
        return None
    try:
        changed = changed_fields(read_mapping(file, "cell experiment"), experiment, str(file))
    except ZooError as err:
        return f"{file.parent}: its experiment.yaml is unreadable ({err}); remove the folder to train this cell"
    if not changed:
        return None
    return (f"{file.parent} holds a run of another experiment ({'; '.join(changed)}); remove the folder, or give "
            "the sweep another name or out_dir")


def check_folder(folder: Path, sweep: SweepSpec, base: dict[str, Any]) -> None:
    """A sweep folder holds one base experiment, and a grid label names one key in it for good: a
    rerun may grow the grid or the seeds, but a changed base, or a label that named another key
    before (`eps` for train.optimizer.eps, then for model.norm_type.eps), would give an old result
    the new experiment's cell."""
    saved_file = folder / "sweep.yaml"
    if not saved_file.exists():
        return
    saved_sweep, saved = read_saved_sweep(folder)

    def fields(data: dict[str, Any]) -> dict[str, Any]:
        dumped = ExperimentSpec.model_validate(data).model_dump(mode="json")
        return {k: v for k, v in flatten(dumped).items() if not k.startswith("wandb.")}

    way_out = "give this sweep another name or out_dir (--set name=NEW or out_dir=DIR), or remove the folder"
    changed = changes_between(fields(saved), fields(base), "before")
    if changed:
        raise ConfigError(f"{folder} holds a sweep of another base experiment ({'; '.join(changed)}); {way_out}")
    redefined = [f"{key} {name!r} was {saved_sweep.named(key)[name]} when its cells ran and is {changes} now"
                 for key in NAMED for name, changes in sweep.named(key).items()
                 if name in saved_sweep.named(key) and as_json(saved_sweep.named(key)[name]) != as_json(changes)]
    if redefined:
        raise ConfigError(f"{folder}: {'; '.join(redefined)}, so its name would stand for another experiment; give "
                          f"the changed one a new name (its old cells stay), or {way_out}")
    before = {label: key for key, label in saved_sweep.labels().items()}
    relabeled = [f"{label!r} named {before[label]} there and names {key} now"
                 for key, label in sweep.labels().items() if before.get(label, key) != key]
    if relabeled:
        raise ConfigError(f"{folder}: the grid label {'; '.join(relabeled)}, so a cell's name would stand for "
                          f"another experiment; {way_out}")


def as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def check_cells_unchanged(experiments: dict[str, ExperimentSpec], done: list[tuple[Cell, RunRecord]]) -> None:
    """A cell the ledger lists as done counts only for the experiment its folder trained: a cell
    name that now stands for another experiment (a value or row redefined) is refused, not skipped."""
    for cell, _ in done:
        experiment = experiments[cell.name]
        other = foreign_run(Path(experiment.train.out_dir) / cell.name / "experiment.yaml", experiment)
        if other:
            raise ConfigError(f"cell {cell.name} is done, but {other}")


def check_data_unchanged(sweep: SweepSpec, experiments: dict[str, ExperimentSpec],
                         done: list[tuple[Cell, RunRecord]]) -> None:
    """Refuse to add cells trained on changed data to cells trained on the data as it was."""
    for cell, record in done:
        if record.data is None:
            continue
        changed = data_changes(record.data, data_digests(experiments[cell.name].task))
        if changed:
            raise ConfigError(f"{sweep.directory()}: the task's data changed since cell {cell.name} was trained "
                              f"({'; '.join(changed)}); a comparison would mix runs on two data sets: restore the "
                              "files, or give this sweep another name or out_dir")


def by_processes(per_cell: int) -> str:
    return f", each cell by {per_cell} processes under torchrun" if per_cell > 1 else ""


class SweepClock:
    """The time a sweep has taken and, from the pace of the cells done so far, about how long the
    cells left will take."""

    def __init__(self, cells: int, clock: Callable[[], float] = time.monotonic):
        self.cells, self.done, self.clock = cells, 0, clock
        self.start = clock()
        self.lock = threading.Lock()

    def tick(self) -> str:
        with self.lock:
            self.done += 1
            spent = self.clock() - self.start
            left = self.cells - self.done
        if not left:
            return f"{duration(spent)} in all"
        return f"{duration(spent)} so far, about {duration(spent / self.done * left)} left"


def run_sweep(sweep: SweepSpec, base: dict[str, Any], workers: int = 1, shard_of: tuple[int, int] = (0, 1),
              echo: Callable[[str], None] = print, cells_per_process: int | None = None,
              only: Cell | None = None, cells: list[Cell] | None = None, processes_per_cell: int = 1) -> dict[str, str]:
    """Run the shard's cells (or the one cell `only`, as W&B's agent asks, or the `cells` given: a
    confirmation's) that the ledger does not list as done, `workers` at once, each by
    `processes_per_cell` processes under torchrun where that is over 1 (or the cell is sharded);
    returns each cell's status ("skipped" where another process holds the cell, "stopped" where a
    signal came first)."""
    if workers < 1:
        raise ConfigError(f"--workers {workers}: give at least 1")
    if processes_per_cell < 1:
        raise ConfigError(f"--procs-per-cell {processes_per_cell}: give at least 1")
    cells = [only] if only is not None else cells if cells is not None else shard(expand(sweep), *shard_of)
    experiments = {cell.name: cell_experiment(sweep, base, cell) for cell in cells}  # all valid before any trains
    for experiment in experiments.values():
        check_fsdp_world(experiment.train, processes_per_cell)
    check_distinct(sweep, [(cell, experiments[cell.name]) for cell in cells])
    folder = sweep.directory()
    check_folder(folder, sweep, base)
    lock, holder = f".sweep-{shard_of[0]}of{shard_of[1]}.lock", f"shard {shard_of[0]}/{shard_of[1]} of this sweep"
    if only is not None:
        lock, holder = f".cell-{safe_text(only.name)}.lock", f"cell {only.name} of this sweep"
    with FolderLock(folder, lock, holder):
        saved = inside_its_folder(folder / "sweep.yaml", "a sweep's saved sweep.yaml")
        atomic_write(saved, dump_yaml({**sweep.model_dump(mode="json"), "base": base}))
        ledger = Ledger(folder / "ledger.jsonl")
        read = ledger.read()
        for warning in [*read.warnings(ledger.path), *read.repeated_results(ledger.path)]:
            echo(warning)
        latest, _ = read.of_cells(cells)
        done = [(c, latest[c.name]) for c in cells if c.name in latest and latest[c.name].status in DONE]
        check_cells_unchanged(experiments, done)
        check_data_unchanged(sweep, experiments, done)
        statuses = {c.name: record.status for c, record in done}
        todo = [cell for cell in cells if cell.name not in statuses]
        echo(f"sweep {sweep.name}: {len(cells)} cells in this shard, {len(statuses)} already done, "
             f"{len(todo)} to run with {workers} worker(s){by_processes(processes_per_cell)}; each cell logs to "
             f"{folder / 'runs'}/CELL/log.txt")
        clock, declared = SweepClock(len(todo)), declaration(sweep)
        processes = Workers(threads_per_worker(workers), cells_per_process, processes_per_cell)

        def one(cell: Cell) -> None:
            record = run_cell(experiments[cell.name], cell, ledger, processes, declared)
            if record is None:
                statuses[cell.name] = "stopped" if processes.stopping is not None else "skipped"
                if processes.stopping is None:
                    echo(f"{cell.name}: skipped, another process is training it")
                return
            statuses[cell.name] = record.status
            value = record.value(sweep.metric)
            shown = f"{sweep.metric}={value:.4g}" if value is not None else (record.error or "")[-200:]
            log = "" if record.status == "finished" else f" (log: {folder / 'runs' / cell.name / 'log.txt'})"
            echo(f"[{len(statuses)}/{len(cells)}] {cell.name}: {record.status} {shown}{log}; {clock.tick()}")

        with signals_to(processes.forward), ThreadPoolExecutor(max_workers=workers) as pool:
            try:
                list(pool.map(one, todo))
            finally:
                processes.close()
    if processes.stopping is not None:
        done = sum(status in DONE for status in statuses.values())
        raise Interrupted(f"sweep {sweep.name} stopped by {signal.Signals(processes.stopping).name}: {done} of "
                          f"{len(cells)} cells done, the others keep their checkpoints; run the same command to "
                          "finish them", signum=processes.stopping)
    return statuses
