"""The one trainer every variant shares, so a difference between runs comes from the architecture."""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from pathlib import Path
from signal import SIGINT
from typing import Any

import torch

from zoo.errors import CheckpointError, Diverged, Interrupted
from zoo.metrics import better, curve_means
from zoo.model.kinds import build, model_class
from zoo.model.size_checks import check_fits
from zoo.provenance import environment
from zoo.records import CheckpointProgress, RunRecord
from zoo.specs.experiment import ExperimentSpec, validate_experiment
from zoo.specs.model_spec import ModelSpec
from zoo.tasks import build_task
from zoo.trainer.checkpoint import restore_training, save_checkpoint, training_state
from zoo.trainer.compiled import CompileClock, compiled
from zoo.trainer.devices import autocast_dtype, pick_device
from zoo.trainer.distributed import Distributed
from zoo.trainer.evaluate import evaluate, evaluate_split
from zoo.trainer.feed import Batch, BatchFeed
from zoo.trainer.framing import check_kind_fits_task
from zoo.trainer.guards import LossWatch, StopSignals, finite_weights, signals_to
from zoo.trainer.init_from import initial_weights
from zoo.trainer.lengths import check_lengths
from zoo.trainer.log_window import Window
from zoo.trainer.objective import auxiliary_loss, auxiliary_losses, batch_loss_sum
from zoo.trainer.optim import make_optimizer, make_schedule
from zoo.trainer.picture import try_cross_attention_png
from zoo.trainer.progress import ProgressBar
from zoo.trainer.run_folder import RunFolder, TrainResult
from zoo.trainer.tracking import Tracker


class Trainer:
    def __init__(self, experiment: ExperimentSpec, resume: bool = False, folder: RunFolder | None = None):
        self.experiment, t = experiment, experiment.train
        self.device = pick_device(t.device)
        self.dist = Distributed.from_env(self.device)
        self.amp_dtype = autocast_dtype(t.precision, self.device)
        self.folder = folder or RunFolder(experiment)  # the one `train` checked for a finished result, if any
        self.folder.is_main = self.dist.is_main
        self.name, self.run_dir, self.checkpoint_path = self.folder.name, self.folder.path, self.folder.checkpoint
        saved = self.folder.claim(experiment, resume)
        try:
            self._setup(saved)
        except BaseException:
            self.folder.abandon()
            raise

    def _setup(self, saved: dict[str, Any] | None) -> None:
        experiment, t = self.experiment, self.experiment.train
        self.task = build_task(experiment.task, t.seed, saved and saved["task"])
        self.data = self.folder.data
        sizes = len(self.task.src_vocab), len(self.task.tgt_vocab)
        check_kind_fits_task(experiment.model.kind, self.task)  # before sizing: a one-stack kind needs one vocabulary
        self.spec = experiment.model_spec(*sizes)
        if saved is not None and ModelSpec.model_validate(saved["spec"]) != self.spec:
            raise CheckpointError(f"{self.checkpoint_path}: its model spec differs from the experiment's "
                                  f"({ModelSpec.model_validate(saved['spec']).name} against {self.spec.name})")
        self.feed = BatchFeed(self.task, t.batch_size, self.spec, self.dist, self.device, t.batch_tokens, t.compile)
        sample_src, sample_tgt = self.feed.global_batch(0) if t.batch_tokens else self.task.train_batch(0, min(t.batch_size, 8))
        rows = max(1, (sample_src.size(0) if t.batch_tokens else t.batch_size) // self.dist.world)
        lengths = model_class(self.spec).sequence_lengths(self.spec, sample_src.size(1), sample_tgt.size(1))
        params = check_fits(self.spec, self.device, training=True, batch=(rows, *lengths))
        self.folder.check_space(3 * 4 * params + (1 << 20))  # weights and Adam's two moments, in float32
        torch.manual_seed(t.seed)
        self.model = build(self.spec, seed=t.seed)
        if t.init_from is not None and saved is None:  # a resume's own checkpoint wins over where it started
            self.model.load_state_dict(initial_weights(t.init_from, self.spec, self.task))
        self.model = self.model.to(self.device)
        self.aux_parts = auxiliary_losses(self.model)
        check_lengths(self.model, self.task, t.eval_size, t.batch_size, self.device, t.eval_beams)
        self.optimizer = make_optimizer(self.model, t)
        self.schedule = make_schedule(self.optimizer, t)
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None
        self.progress = CheckpointProgress(step=0)
        self.working_on = 0
        self.run_id = None
        if saved is not None:
            self._restore(saved)
        self.watch = LossWatch(t.explosion, self.progress.first_loss, self.progress.high_logs)
        self.start = time.perf_counter() - self.progress.wall_s  # wall time counts on across a resume
        self.forward = self.model
        if self.dist.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.forward = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        if t.compile:
            self.forward = compiled(self.forward)
        self.clock = CompileClock(enabled=t.compile)
        self.tracker = Tracker(experiment, self.spec, self.name, self.dist.is_main, self.run_id)
        self.window = Window(self.device, self.dist)
        self.eval_batches = self.task.eval_batches(t.eval_size, t.batch_size) if self.dist.is_main else []
        self.eval_references = self.task.references(t.eval_size) if self.dist.is_main else None
        self.decoding = {"num_beams": t.eval_beams, "length_penalty": t.length_penalty}

    @property
    def step(self) -> int:
        return self.progress.step

    @property
    def best(self) -> dict[str, float]:
        return self.progress.best

    @property
    def history(self) -> list[dict[str, float]]:
        return self.progress.history

    def _restore(self, state: dict[str, Any]) -> None:
        restore_training(state, self.model, self.optimizer, self.schedule, self.scaler, self.device)
        self.progress = state["progress"]
        self.run_id = state.get("wandb_id")

    def _checkpoint(self) -> None:
        """Only finite weights are written (checked on every rank, whose weights are the same)."""
        if not finite_weights(self.model):
            raise Diverged(f"step {self.step}: the weights are no longer finite")
        if not self.dist.is_main:
            return
        self.progress.wall_s = time.perf_counter() - self.start
        self.progress.first_loss, self.progress.high_logs = self.watch.first_loss, self.watch.high_logs
        save_checkpoint(self.checkpoint_path, {
            "experiment": self.experiment.model_dump(mode="json"), "spec": self.spec.model_dump(),
            **training_state(self.model, self.optimizer, self.schedule, self.scaler, self.device),
            "progress": self.progress.model_dump(), "task": self.task.state(),
            "wandb_id": self.tracker.run_id or self.run_id, "data": self.data,
        })

    def _train_step(self, step: int) -> None:
        """One optimizer step on the global batch of `step`; then the next batch is prepared while
        the device works."""
        with self.clock.step():
            self._device_step(step, self.feed.take(step))
        if step < self.experiment.train.steps:
            self.feed.prepare(step + 1)

    def _device_step(self, step: int, batch: Batch) -> None:
        """Forward, loss, backward, optimizer step: nothing is read back from the device, so the
        host runs ahead to the next batch (see zoo.trainer.log_window)."""
        t, pad = self.experiment.train, self.spec.pad_id
        autocast = torch.autocast(self.device.type, self.amp_dtype) if self.amp_dtype else nullcontext()
        loss_sum = batch_loss_sum(self.forward, self.model.generator, batch, pad, t, autocast)
        aux = auxiliary_loss(self.aux_parts)  # a mean over this rank's tokens, which DDP's averaging keeps
        # DDP averages gradients over ranks, so each rank scales its sum to give the global mean.
        loss = loss_sum * self.dist.world / batch.tokens + (0.0 if aux is None else aux)
        self.optimizer.zero_grad(set_to_none=True)
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.grad_clip or math.inf)
        if self.scaler:  # skips a step whose gradient is not finite (and reads that back: fp16 only)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.lr = self.optimizer.param_groups[0]["lr"]  # the rate this step used, before the schedule moves on
        self.schedule.step()
        self.window.add(step, loss_sum, batch.tokens, grad_norm, grad_must_be_finite=self.scaler is None, aux=aux)

    def _log(self, metrics: dict[str, float], step: int) -> None:
        self.history.append({"train/step": step, "train/wall_s": time.perf_counter() - self.start, **metrics})
        self.tracker.log(metrics, step)

    def _evaluate(self, collective: bool = True) -> dict[str, float]:
        """Rank 0 evaluates; with `collective`, every rank learns whether the loss was finite, and
        all stop together (every rank must then call it)."""
        metrics = {}
        if self.dist.is_main:
            metrics = evaluate(self.model, self.task, self.eval_batches, self.device, self.eval_references,
                               **self.decoding)
        bad = torch.tensor(float(not math.isfinite(metrics.get("eval/loss", 0.0))), device=self.device)
        if (self.dist.sum(bad) if collective else bad).item() > 0:
            raise Diverged(f"step {self.step}: the evaluation loss is {metrics.get('eval/loss', 'not finite')}")
        for name, value in metrics.items():
            if better(name, value, self.best.get(name)):
                self.best[name] = value
        self.progress.last_eval = metrics
        return metrics

    def _stop_requested(self, stop: StopSignals, step: int, logged: bool) -> bool:
        """Single process: at once. Under torchrun, ranks agree at logging steps."""
        if self.dist.world == 1:
            return stop.received is not None
        if not logged:
            return False
        return self.dist.sum(torch.tensor(float(stop.received is not None), device=self.device)).item() > 0

    def _loop(self, bar: ProgressBar, stop: StopSignals, last: int | None = None) -> None:
        """Train to train.steps (or to step `last`, for a benchmark of the loop itself)."""
        t = self.experiment.train
        for step in range(self.step + 1, (last or t.steps) + 1):
            self.working_on = step
            self._train_step(step)
            self.progress.step = step
            if step == 1:
                self.watch.first_step(self.window.mean_loss())
            logged = step % t.log_every == 0 or step == t.steps
            evaluating = step % t.eval_every == 0 or step == t.steps
            stopping = self._stop_requested(stop, step, logged)
            saving = step % t.checkpoint_every == 0 or step == t.steps or stopping
            if logged:
                row = {**self.window.read(), "train/lr": self.lr, "train/wall_s": time.perf_counter() - self.start,
                       **self.clock.metrics()}
                self._log(row, step)
                bar.update(step, row)
                self.watch.observe(row["train/loss"], step)
                if step == t.steps:
                    self.watch.at_end(row["train/loss"], step)
            elif evaluating or saving:
                self.window.settle()
            if evaluating:
                metrics = self._evaluate()
                if self.dist.is_main:
                    self._log(metrics, step)
                    bar.update(step, metrics)
            if saving:
                if not self.watch.suspect:
                    self._checkpoint()
                self.dist.barrier()
            if stopping:
                raise Interrupted(f"stopped by {stop.name or 'a signal'} after step {step}", stop.received)

    def _picture(self) -> Path | None:
        png = self.run_dir / "cross_attention.png"
        caption = try_cross_attention_png(self.model, self.task, self.eval_batches[0][0], png)
        if caption is None:
            return None
        self.tracker.image("eval/cross_attention", png, caption, self.step)
        return png

    def _finish(self) -> tuple[dict[str, float], Path | None]:
        """On rank 0: the test split if the task has one, the picture, the summary, result.json."""
        t = self.experiment.train
        if not self.progress.last_eval:
            self._evaluate(collective=False)
        final = dict(self.progress.last_eval)
        final.update(curve_means(self.history) or curve_means([final]))
        for split in self.task.eval_splits[1:]:
            final.update(evaluate_split(self.model, self.task, split, t.eval_size, t.batch_size, self.device,
                                        **self.decoding))
        broken = {k: v for k, v in final.items() if not math.isfinite(v)}
        if broken:
            raise Diverged(f"step {self.step}: the final evaluation is not finite ({broken})")
        png = self._picture()
        self.tracker.summary({**final, **{f"best/{k}": v for k, v in self.best.items()},
                              "wall_time_s": time.perf_counter() - self.start, "steps": self.step})
        self._write_result("finished", final)
        return final, png

    def _write_result(self, status: str, final: dict[str, float], **extra: Any) -> str:
        """result.json in the run directory: what a sweep's ledger and `zoo compare` read. Returns a
        note for the user where a finished result of an earlier run was kept instead."""
        if not self.dist.is_main:
            return ""
        record = RunRecord(status=status, name=self.name, metrics=final, best=self.best, steps=self.step,
                           wall_time_s=time.perf_counter() - self.start, parameters=self.model.num_parameters(),
                           model_name=self.spec.name, threads=torch.get_num_threads(), data=self.data or None,
                           environment=environment(self.device), history=self.history, **self.tracker.where,
                           **extra)
        if not self.folder.write_result(record):
            return f"; the finished result of the earlier run stays in {self.run_dir / 'result.json'}"
        return ""

    def run(self) -> TrainResult:
        bar = ProgressBar(self.experiment.train.steps, self.step, enabled=self.dist.is_main)
        self.tracker.summary({"parameters": self.model.num_parameters(), "model_name": self.spec.name})
        final, png, failed = {}, None, True
        wandb_dir = self.tracker.files_dir
        try:
            stop = StopSignals()
            with signals_to(stop.handle):
                self._loop(bar, stop)
                if self.dist.is_main:
                    final, png = self._finish()
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
        return TrainResult(final, self.checkpoint_path, self.run_dir, png, wandb_dir, dict(self.best), self.history)


def train(experiment: ExperimentSpec | dict, resume: bool = False) -> TrainResult:
    """Train one experiment; returns the final metrics and where the checkpoint is."""
    if not isinstance(experiment, ExperimentSpec):
        experiment = validate_experiment(experiment)
    folder = RunFolder(experiment)
    if resume:
        done = folder.finished_result(experiment)
        if done is not None:
            return done
    return Trainer(experiment, resume, folder).run()
