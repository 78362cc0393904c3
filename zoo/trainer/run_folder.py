"""Claiming a run's folder: locked against a second process, never overwriting another run, and
resumed only from a checkpoint of the same experiment."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from zoo.errors import ConfigError, RunConflict
from zoo.files import FolderLock, check_writable_folder
from zoo.metric_names import KEPT
from zoo.records import RunRecord, read_result, write_result
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.identity import RESUMABLE, run_name
from zoo.tasks import data_digests
from zoo.trainer.checkpoint import read_checkpoint
from zoo.trainer.resume_checks import changed_fields, check_resumable, check_same_data
from zoo.trainer.sharded_checkpoint import recover

CHECKPOINT, SHARDED, RESULT = "checkpoint.pt", "checkpoint.dcp", "result.json"
"""The run's checkpoint (a folder of shards under train.parallel fsdp) and its result."""


def checkpoint_name(experiment: ExperimentSpec) -> str:
    return SHARDED if experiment.train.sharded else CHECKPOINT


@dataclass
class TrainResult:
    metrics: dict[str, float]
    checkpoint: Path
    run_dir: Path
    attention_png: Path | None = None
    wandb_dir: str | None = None
    best: dict[str, float] = field(default_factory=dict)
    history: list[dict[str, float]] = field(default_factory=list)
    """Every logged row of this process's run (train and eval metrics, each with train/step)."""
    already_finished: bool = False
    """`--resume` of a run that had finished all its steps: nothing was trained or logged again."""
    kept: dict[str, Any] = field(default_factory=dict)
    """What result.json says of early stopping and the models kept beside the last (best_checkpoint, averaged)."""


def missing_folders(folder: Path) -> list[Path]:
    """`folder` and those above it that do not exist yet, deepest first: what creating it makes."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def already_there(run_dir: Path, steps: int, checkpoint: str = CHECKPOINT) -> str:
    """What the folder holds, and the way on for a run of `steps`: the step count is not part of a
    run's identity (more steps continue the same run), so say which way fits this one."""
    done, held = None, "a checkpoint"
    if (run_dir / RESULT).exists():
        try:
            record = read_result(run_dir / RESULT)
            done, held = record.steps, f"a {record.status} run of {record.steps} steps"
        except ConfigError:
            held = "a run (its result.json is unreadable)"
    anew = "to train anew, name a new run with --set wandb.name=NAME or remove the folder"
    if done is not None and steps < done:
        way = (f"its {done} steps are more than the {steps} asked, so it cannot be continued to them: its result "
               f"stands (zoo eval {run_dir / checkpoint} scores its checkpoint again); {anew}")
    elif done is not None and steps == done:
        way = f"it trained the {steps} steps asked: its result stands (--resume prints it); {anew}"
    else:
        way = f"continue it to {steps} steps with --resume (the same run, trained on); {anew}"
    return f"{run_dir} already holds {held}; {way}"


class RunFolder:
    """The folder `train.out_dir/<run name>` and, while training, its lock."""

    def __init__(self, experiment: ExperimentSpec, is_main: bool = True):
        self.task = experiment.task
        self.name = run_name(experiment)
        self.path = Path(experiment.train.out_dir) / self.name
        self.checkpoint = self.path / checkpoint_name(experiment)
        self.result = self.path / RESULT
        self.is_main = is_main
        self._lock: FolderLock | None = None
        self._made: list[Path] = []

    @cached_property
    def data(self) -> dict[str, str]:
        """{file: content digest} of the task's data, read once per folder: the resume check and
        the record share it."""
        return data_digests(self.task)

    def claim(self, experiment: ExperimentSpec, resume: bool) -> dict[str, Any] | None:
        """Lock the folder (rank 0), check it may hold this run, and return the checkpoint's state
        to resume from, if any, read onto the host: loading it into the model and the optimizer
        moves each tensor where its parameter lives (an optimizer's step counters stay on the host,
        where a non-capturable Adam wants them)."""
        if self.is_main:
            self._made = missing_folders(Path(experiment.train.out_dir))
            check_writable_folder(experiment.train.out_dir, "train.out_dir")
            self._lock = FolderLock(self.path, what="this run").acquire()
            for partial in self.path.glob(".*.tmp"):  # a write killed midway; nobody else writes here now
                partial.unlink(missing_ok=True)
            if self.checkpoint.name == SHARDED:
                recover(self.checkpoint)
        try:
            return self._check(experiment, resume)
        except BaseException:
            self.abandon()
            raise

    def abandon(self) -> None:
        """Release the folder, and remove it where it holds nothing but the lock, with the folders
        above it this run made (train.out_dir): a refused or failed start leaves nothing behind."""
        if self.is_main and self._lock is not None and [p.name for p in self.path.iterdir()] == [".lock"]:
            self.release()  # the lock file goes while still held (zoo.files.FolderLock)
            with contextlib.suppress(OSError):
                for folder in (self.path, *self._made):
                    folder.rmdir()
        self.release()

    def finished_result(self, experiment: ExperimentSpec) -> TrainResult | None:
        """The recorded result of this very experiment (same fields, same data) when it finished
        every step it asks for or stopped early (train.early_stop): a resume then has nothing to do,
        and reopens nothing. (A spent train.budget may be raised, so that run is not done.)"""
        try:
            record = read_result(self.result) if self.result.exists() and self.checkpoint.exists() else None
        except ConfigError:
            return None
        if record is None or record.status != "finished" or (record.steps < experiment.train.steps
                                                             and record.stopped_early_at is None):
            return None
        self.claim(experiment, True)  # refuses another experiment or changed data
        self.release()
        png = self.path / "cross_attention.png"
        kept = record.model_dump(include={"stopped_early_at", *KEPT}, exclude_none=True)
        return TrainResult(record.metrics, self.checkpoint, self.path, png if png.exists() else None, None,
                           record.best, record.history, already_finished=True, kept=kept)

    def _check(self, experiment: ExperimentSpec, resume: bool) -> dict[str, Any] | None:
        has_checkpoint = self.checkpoint.exists()
        if not resume:
            if has_checkpoint or self.result.exists():
                raise RunConflict(already_there(self.path, experiment.train.steps, self.checkpoint.name))
            return None
        if not has_checkpoint:
            self._refuse_a_sibling(experiment)
            return None
        saved = read_checkpoint(self.checkpoint)
        check_resumable(saved["experiment"], experiment, saved["progress"].step, str(self.checkpoint),
                        saved.get("pieces", {}).get("early_stop", {}).get("stopped_at"))
        check_same_data(saved.get("data"), self.data, str(self.checkpoint))
        return saved

    def _refuse_a_sibling(self, experiment: ExperimentSpec) -> None:
        """`--resume` of an experiment that has no checkpoint yet, beside checkpoints of the same
        variant and seed from other experiments: the user most likely edited the experiment, so
        name what changed instead of quietly starting a new run."""
        if experiment.wandb.name is not None:
            return  # a named run (a sweep's cell): no checkpoint simply means a first start
        prefix = self.name.rsplit("-", 1)[0] + "-"
        siblings = sorted(p for p in self.path.parent.glob(f"{prefix}*/{self.checkpoint.name}") if p.parent != self.path)
        if not siblings:
            return
        changes = {p: changed_fields(read_checkpoint(p, need=("experiment",))["experiment"], experiment, str(p))
                   for p in siblings}
        closest = min(changes, key=lambda p: len(changes[p]))
        raise ConfigError(f"--resume refused: this experiment has no checkpoint yet, and {closest} is of another "
                          f"experiment ({'; '.join(changes[closest])}). Only {', '.join(RESUMABLE)} and wandb.* may "
                          "change on a resume; run without --resume to start this experiment in a folder of its own")

    def write_result(self, record: RunRecord) -> bool:
        """Write result.json, unless the record is not finished and the folder holds a finished
        result: a resume that diverges or is stopped never replaces a result it did not improve on."""
        if record.status != "finished" and self.result.exists():
            try:
                if read_result(self.result).status == "finished":
                    return False
            except ConfigError:
                pass  # an unreadable result.json holds nothing to keep
        write_result(self.result, record)
        return True

    def check_space(self, need_bytes: int) -> None:
        if self.is_main:
            check_writable_folder(self.path, "train.out_dir", need_bytes)

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
