"""The one trainer every variant shares, so a difference between runs comes from the architecture."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from signal import SIGINT
from typing import Any

import torch

from zoo.errors import Diverged, Interrupted
from zoo.optim.schedules import schedule_problems
from zoo.provenance import environment
from zoo.records import CheckpointProgress, RunRecord
from zoo.specs.experiment import ExperimentSpec, validate_experiment
from zoo.tasks import Task, build_task
from zoo.tasks.summary import summary_line, warn_unknown
from zoo.trainer.busy import BusyCores, usable_threads
from zoo.trainer.checkpoint import Checkpointer
from zoo.trainer.compute import ComputeCounter
from zoo.trainer.devices import autocast_dtype, pick_device
from zoo.trainer.evaluate import Evaluator
from zoo.trainer.feed import BatchFeed
from zoo.trainer.freed_memory import freed_memory_kept
from zoo.trainer.guards import LossWatch, StopSignals, signals_to
from zoo.trainer.parallelism import Parallelism
from zoo.trainer.progress import ProgressBar
from zoo.trainer.run_folder import RunFolder, TrainResult
from zoo.trainer.run_model import run_model, run_spec
from zoo.trainer.selection import EarlyStop, KeptWeights, kept_results
from zoo.trainer.sharded_checkpoint import check_world_size
from zoo.trainer.sharding import gathered
from zoo.trainer.step import TrainStep
from zoo.trainer.tracking import Tracker


class Trainer:
    """A run assembled from its helpers: the run folder (zoo.trainer.run_folder), the feed of
    batches (feed), the model (run_model), the optimizer step (step), evaluation (evaluate),
    checkpointing (checkpoint) and tracking (tracking). The trainer owns the loop, the progress
    and what a run's end writes."""

    def __init__(self, experiment: ExperimentSpec, resume: bool = False, folder: RunFolder | None = None,
                 task: Task | None = None, reshard: bool = False):
        """`task`: the experiment's task already built (a replay of recorded batches, zoo.sweep.replay);
        `reshard`: a sharded checkpoint of another world size may be resumed."""
        self.experiment, t = experiment, experiment.train
        self.device = pick_device(t.device)
        self.dist = Parallelism.from_env(self.device, t)
        self.amp_dtype = autocast_dtype(t.precision, self.device)
        self.folder = folder or RunFolder(experiment)  # the one `train` checked for a finished result, if any
        self.folder.is_main = self.dist.is_main
        self.name, self.run_dir, self.checkpoint_path = self.folder.name, self.folder.path, self.folder.checkpoint
        saved = self.folder.claim(experiment, resume)
        self.resumed, self.resumed_world = saved is not None, (saved or {}).get("world_size")
        """Whether the run resumes a checkpoint, and the processes that wrote it (a sharded one says)."""
        try:
            check_world_size(saved, self.dist.world, reshard)
            self._assemble(saved, task)
        except BaseException:
            self.folder.abandon()
            raise

    def _assemble(self, saved: dict[str, Any] | None, task: Task | None) -> None:
        """Each helper in the order a run has always made them (a resume's random state is restored
        with the training state, before W&B starts and the held-out batches are made)."""
        experiment, t = self.experiment, self.experiment.train
        self.task = task or build_task(experiment.task, t.seed, saved and saved["task"])
        self.spec = run_spec(experiment, self.task, saved, self.folder)
        self.feed = BatchFeed(self.task, t.batch_size, self.spec, self.dist, self.device, t.batch_tokens, t.compile,
                              t.accumulate)
        self.model, self.memory_line = run_model(self.spec, experiment, self.task, self.feed, self.folder, self.device,
                                                 self.dist, saved)
        self.progress = CheckpointProgress(step=0, flops=0.0, tokens=0) if saved is None else saved["progress"]
        self.run_id = None if saved is None else saved.get("wandb_id")
        self.train_step = TrainStep(self.model, t, self.device, self.dist, self.amp_dtype, saved)
        self.compute = ComputeCounter(self.spec, list(self.feed.kind.reads), self.progress, t.budget, self.dist, self.device)
        self.watch = LossWatch(t.explosion, self.progress.first_loss, self.progress.high_logs)
        self.start = time.perf_counter() - self.progress.wall_s  # wall time counts on across a resume
        self.working_on = 0
        self.tracker = Tracker(experiment, self.spec, self.name, self.dist.is_main, self.run_id)
        self.evaluator = Evaluator(self.task, t, self.device, self.dist, self.progress)
        self.data_summary = self.task.summary(t.eval_size) if self.dist.is_main else {}
        self._say_passes(saved is not None)
        if t.downstream is not None and self.dist.is_main and saved is None:  # a name it lacks, before any step
            from zoo.trainer.harness import task_manager

            task_manager(t.downstream.tasks, t.downstream.include_path)
        self.tracker.config({"scorers": self.evaluator.scorers, "data": self.data_summary, "world_size": self.dist.world})
        self.checkpointer = Checkpointer(self.checkpoint_path, lambda: self.folder.data, experiment, self.spec, self.task,
                                         self.dist)
        self.early_stop, self.kept = EarlyStop(t), KeptWeights(t, self.run_dir)
        for name, piece in self.pieces().items():
            if saved is not None and name in saved.get("pieces", {}):
                piece.load_state_dict(saved["pieces"][name])

    def _say_passes(self, resumed: bool) -> None:
        """How many passes the run makes over a training set that says (a token store's rows),
        in the data summary; a warning before the first step when they are more than one."""
        t = self.experiment.train
        passes = self.task.passes(t.steps, t.batch_size * t.accumulate)
        if passes is None or not self.dist.is_main:
            return
        self.data_summary["passes"] = passes
        if passes > 1 and not resumed:
            warnings.warn(f"train.steps {t.steps} at {t.batch_size * t.accumulate} rows a step reads the training set "
                          f"{passes:.2f} times: its data repeats (each pass in a new order); a larger corpus, or fewer "
                          "steps, sees each row once", stacklevel=2)

    def pieces(self) -> dict[str, EarlyStop | KeptWeights]:
        """The trainer's pieces that keep a state of their own, which the checkpoint holds by name."""
        return {"early_stop": self.early_stop, "kept_weights": self.kept}

    @property
    def step(self) -> int:
        return self.progress.step

    @property
    def best(self) -> dict[str, float]:
        return self.progress.best

    @property
    def history(self) -> list[dict[str, float]]:
        return self.progress.history

    def _checkpoint(self, path: Path | None = None) -> None:
        self.progress.wall_s = time.perf_counter() - self.start
        self.progress.first_loss, self.progress.high_logs = self.watch.first_loss, self.watch.high_logs
        pieces = {name: piece.state_dict() for name, piece in self.pieces().items()}
        training = self.train_step.state_dict() if self.dist.is_main or self.train_step.sharded else {}
        self.checkpointer.save(self.model, training, self.progress, self.tracker.run_id or self.run_id, pieces, path,
                               self.train_step.optimizer)
        snapshot = None if path else self.kept.snapshot_path(self.step)
        if snapshot is not None:
            self.checkpointer.snapshot(self.model, snapshot)
            if self.dist.is_main:
                self.kept.prune(self.step)

    def _train_step(self, step: int) -> None:
        """One optimizer step on the global batch of `step`; then the next batch is prepared while
        the device works."""
        micro = self.feed.take(step)
        with self.train_step.clock.step():
            self.train_step(step, micro)
        self.compute.add(micro)
        if step < self.experiment.train.steps:
            self.feed.prepare(step + 1)

    def _log(self, metrics: dict[str, float], step: int) -> None:
        self.history.append({"train/step": step, "train/wall_s": time.perf_counter() - self.start, **metrics})
        self.tracker.log(metrics, step)

    def _stop_requested(self, stop: StopSignals, step: int, logged: bool) -> bool:
        """Single process: at once. Under torchrun, ranks agree at logging steps."""
        if self.dist.world == 1:
            return stop.received is not None
        if not logged:
            return False
        return self.dist.sum(torch.tensor(float(stop.received is not None), device=self.device)).item() > 0

    def _loop(self, bar: ProgressBar, stop: StopSignals, last: int | None = None) -> None:
        """Train to train.steps (or to step `last`, for a benchmark of the loop itself), or until
        early stopping ends the run or its budget (train.budget) is spent."""
        t = self.experiment.train
        if self.early_stop.stopped_at is not None or self.compute.spent():
            if self.compute.spent() and self.dist.is_main:  # said, not a silent resume that trains nothing
                bar.write(f"train.budget: {self.compute.spent()} at step {self.step}: nothing left to train; raise "
                          "train.budget to train on")
            return  # a resume of a run that had stopped early or spent its budget: only its end is left to do
        busy = BusyCores(torch.get_num_threads()) if self.device.type == "cpu" and self.dist.is_main else None
        for step in range(self.step + 1, (last or t.steps) + 1):
            self.working_on = step
            began = time.perf_counter()
            self._train_step(step)
            if busy is not None:
                busy.add(time.perf_counter() - began)
            self.progress.step = step
            if step == 1:
                self.watch.first_step(self.train_step.window.mean_loss())
            due = any(step % every == 0 for every in (t.log_every, t.eval_every, t.checkpoint_every))
            settled = self.dist.world == 1 or due or step == t.steps  # under torchrun: a collective, at shared steps
            if settled:
                self.compute.settle()
            spent = self.compute.spent() if settled else None
            end = step == t.steps or spent is not None
            logged = step % t.log_every == 0 or end
            evaluating = step % t.eval_every == 0 or end
            stopping = self._stop_requested(stop, step, logged)
            saving = step % t.checkpoint_every == 0 or end or stopping
            if logged:
                row = {**self.train_step.window.read(), "train/lr": self.train_step.lr,
                       "train/wall_s": time.perf_counter() - self.start, **self.train_step.clock.metrics(),
                       **self.compute.metrics()}
                self._log(row, step)
                bar.update(step, row)
                said = busy.read() if busy is not None else None
                if said:
                    bar.write(said)
                self.watch.observe(row["train/loss"], step)
                if end:
                    self.watch.at_end(row["train/loss"], step)
            elif evaluating or saving:
                self.train_step.window.settle()
            if evaluating and self._evaluate(bar, step):
                self.early_stop.stopped_at, saving = step, True
            if saving:
                if not self.watch.suspect:
                    self._checkpoint()
                self.dist.barrier()
            if stopping:
                raise Interrupted(f"stopped by {stop.name or 'a signal'} after step {step}", stop.received)
            if self.early_stop.stopped_at is not None:
                if self.dist.is_main:
                    bar.write(self.early_stop.note())
                return
            if spent is not None:
                if self.dist.is_main:
                    bar.write(f"train.budget: {spent} after step {step} of {t.steps}")
                return
        unspent = self.compute.unspent(t.steps) if last is None else None
        if unspent and self.dist.is_main:
            warnings.warn(f"train.budget: {unspent}", RuntimeWarning, stacklevel=2)

    def _evaluate(self, bar: ProgressBar, step: int) -> bool:
        """Evaluate, log, keep the best checkpoint; whether early stopping ends the run here (every
        rank learns it from rank 0)."""
        metrics = self.evaluator(self.model, step)
        if self.dist.is_main:
            self._log(metrics, step)
            bar.update(step, metrics)
        if not self.watch.suspect and self.kept.improved(metrics, step):  # a suspect model is never kept
            self._checkpoint(self.kept.best_path)
        stops = self.early_stop.observe(metrics, step)
        if self.dist.world > 1:
            stops = self.dist.sum(torch.tensor(float(stops), device=self.device)).item() > 0
        return stops

    def _picture(self) -> Path | None:
        png = self.run_dir / "cross_attention.png"
        caption = self.evaluator.picture(self.model, png)
        if caption is None or not self.dist.is_main:
            return None
        self.tracker.image("eval/cross_attention", png, caption, self.step)
        return png

    def _finish(self) -> tuple[dict[str, float], Path | None, dict[str, Any]]:
        """On rank 0: the final metrics (zoo.trainer.evaluate.Evaluator), the picture, the summary,
        result.json. Every rank of a sharded run computes the metrics and the picture with rank 0."""
        final = self.evaluator.final(self.model, self.step)
        downstream = self._downstream(final)
        png = self._picture()
        if not self.dist.is_main:  # rank 0 alone reports (and holds the history the curve means read)
            return {}, None, {}
        kept = kept_results(self.early_stop, self.kept, self.model, self.evaluator, self.step)
        self.tracker.summary({**final, **{f"best/{k}": v for k, v in self.best.items()},
                              "wall_time_s": time.perf_counter() - self.start, "steps": self.step,
                              **{f"{group}/{k}": v for group in ("best_checkpoint", "averaged") if kept.get(group)
                                 for k, v in kept[group]["metrics"].items()}})
        self._write_result("finished", final, **kept, downstream=downstream)
        return final, png, kept

    def _downstream(self, final: dict[str, float]) -> dict[str, Any] | None:
        """train.downstream's scores of the last model, added to `final`; the harness's results.
        Rank 0 scores (every rank of a sharded model, whose weights it gathers with them)."""
        downstream = self.experiment.train.downstream
        if downstream is None or not (self.dist.is_main or self.evaluator.everyone):
            return None
        from zoo.trainer.harness import score_downstream

        with gathered(self.model):
            metrics, results = score_downstream(self.model, self.task, downstream, self.experiment.train.seed)
        final.update(metrics)
        return results

    def _write_result(self, status: str, final: dict[str, float], **extra: Any) -> str:
        """result.json in the run directory: what a sweep's ledger and `zoo compare` read. Returns a
        note for the user where a finished result of an earlier run was kept instead."""
        if not self.dist.is_main:
            return ""
        record = RunRecord(status=status, name=self.name, metrics=final, best=self.best, steps=self.step,
                           wall_time_s=time.perf_counter() - self.start, parameters=self.model.num_parameters(),
                           model_name=self.spec.name, threads=torch.get_num_threads(), data=self.folder.data or None,
                           environment=environment(self.device), history=self.history, **self.tracker.where,
                           experiment=self.experiment.model_dump(mode="json"), first_loss=self.watch.first_loss,
                           scorers=self.evaluator.scorers, data_summary=self.data_summary or None,
                           flops=self.progress.flops, tokens=self.progress.tokens,
                           budget_spent_at=self.step if self.compute.spent() else None,
                           world_size=self.dist.world if self.dist.world > 1 else None, **extra)
        if not self.folder.write_result(record):
            return f"; the finished result of the earlier run stays in {self.run_dir / 'result.json'}"
        return ""

    def first_steps(self, last: int) -> list[dict[str, float]]:
        """Train steps 1 to `last` exactly as a whole run trains them (its schedule, evaluations and
        logs) and give what was logged: `zoo reproduce --early` holds it to a record."""
        bar = ProgressBar(self.experiment.train.steps, self.step, enabled=False)
        failed = True
        try:
            stop = StopSignals()
            with signals_to(stop.handle):
                self._loop(bar, stop, min(last, self.experiment.train.steps))
            failed = False
        finally:
            self.tracker.finish(failed=failed)
            bar.close()
            self.dist.close()
            self.folder.abandon()
        return self.history

    def start_line(self) -> str:
        """Where and how the run trains (its device, threads, precision, processes), and where a
        resume picked it up: said before the first step, as Lightning does."""
        t = self.experiment.train
        precision = "fp32" if self.amp_dtype is None else f"{str(self.amp_dtype).removeprefix('torch.')} autocast"
        said = (f"run {self.name}: device {self.device}, {torch.get_num_threads()} threads, precision {precision} "
                f"(train.precision {t.precision}), {self.dist.world} process{'es' if self.dist.world > 1 else ''}")
        if self.resumed:
            said += f"; resumed at step {self.step} of {t.steps} from {self.checkpoint_path}"
            if self.resumed_world is not None:
                said += f", written by {self.resumed_world} process{'es' if int(self.resumed_world) > 1 else ''}"
        return said

    def run(self) -> TrainResult:
        bar = ProgressBar(self.experiment.train.steps, self.step, enabled=self.dist.is_main)
        if self.dist.is_main:
            bar.write(summary_line(self.data_summary))
            bar.write(self.start_line())
            if self.memory_line:
                bar.write(self.memory_line)
            warn_unknown(self.data_summary)
            t = self.experiment.train
            for problem in schedule_problems(t.schedule, t.warmup_steps, t.steps):
                warnings.warn(problem, RuntimeWarning, stacklevel=2)
        self.tracker.summary({"parameters": self.model.num_parameters(), "model_name": self.spec.name})
        final, png, kept_models, failed = {}, None, {}, True
        wandb_dir = self.tracker.files_dir
        stop = StopSignals()
        try:
            with signals_to(stop.handle), stopped_by(stop, self):
                self._loop(bar, stop)
                if self.dist.is_main or self.train_step.sharded:
                    final, png, kept_models = self._finish()
            failed = False
        except Diverged as err:
            at = err.step or self.working_on
            self.tracker.summary({"diverged": True, "diverged_at": at})
            note = self._write_result("diverged", {}, diverged_at=at, error=str(err))
            kept = (f"the last good checkpoint is {self.checkpoint_path}" if self.checkpoint_path.exists()
                    else "no checkpoint was written yet")
            raise Diverged(f"training diverged at {err}; {kept}{note}") from None
        except (Interrupted, KeyboardInterrupt) as err:  # a second Ctrl-C raises KeyboardInterrupt mid-step
            told = str(err) if isinstance(err, Interrupted) else f"stopped at once by a second SIGINT at step {self.working_on}"
            note = self._write_result("interrupted", {}, error=told)
            kept = f"its last checkpoint is {self.checkpoint_path}" if self.checkpoint_path.exists() else "no checkpoint yet"
            raise Interrupted(f"{told}; {kept}: continue with --resume{note}", getattr(err, "signum", SIGINT)) from None
        finally:
            late = StopSignals()
            with signals_to(late.handle):  # W&B's finish and the folder's release are not cut short by one signal
                self.tracker.finish(failed=failed)
                bar.close()
                self.dist.close()
                self.folder.abandon()  # a run that wrote nothing leaves no folder
        if late.received:
            raise Interrupted(f"{late.name} arrived while W&B finished; the run is complete: its result is "
                              f"{self.run_dir / 'result.json'}", late.received)
        return TrainResult(final, self.checkpoint_path, self.run_dir, png, wandb_dir, dict(self.best), self.history,
                           kept=kept_models)


@contextmanager
def stopped_by(stop: StopSignals, trainer: Trainer) -> Iterator[None]:
    """An error raised once a stop signal has arrived is that signal's doing (torch.compile's
    workers die of the same SIGTERM, and the build fails with an InductorError): it stops the run
    as the signal would, saying so, instead of a traceback."""
    try:
        yield
    except Exception as err:
        if stop.received is None or isinstance(err, (Diverged, Interrupted)):
            raise
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise Interrupted(f"stopped by {stop.name} during step {trainer.working_on} (it ended what was running: "
                          f"{type(err).__name__}: {first})", stop.received) from None


def train(experiment: ExperimentSpec | dict, resume: bool = False, reshard: bool = False) -> TrainResult:
    """Train one experiment; returns the final metrics and where the checkpoint is. `reshard`: with
    `resume`, a sharded checkpoint of another world size is read at this one."""
    if not isinstance(experiment, ExperimentSpec):
        experiment = validate_experiment(experiment)
    folder = RunFolder(experiment)
    if resume:
        done = folder.finished_result(experiment)
        if done is not None:
            return done
    before = torch.get_num_threads()
    torch.set_num_threads(experiment.train.threads or usable_threads())
    try:
        with freed_memory_kept():
            return Trainer(experiment, resume, folder, reshard=reshard).run()
    finally:  # a caller's own setting is its own again (zoo.train in a notebook, a sweep's worker)
        torch.set_num_threads(before)
