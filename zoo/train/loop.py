"""The one trainer every variant shares, so a difference between runs comes from the architecture."""

from __future__ import annotations

import json
import math
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.experiment import ExperimentSpec
from zoo.model import EncoderDecoder
from zoo.tasks import build_task
from zoo.train.checkpoint import read_checkpoint, save_checkpoint
from zoo.train.distributed import Distributed
from zoo.train.evaluate import evaluate
from zoo.train.optim import make_optimizer, make_schedule
from zoo.train.picture import cross_attention_png
from zoo.train.progress import Progress
from zoo.train.tracking import Tracker


class Diverged(RuntimeError):
    """The loss or the gradient stopped being finite."""


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


def pick_device(choice: str, dist: Distributed) -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise ValueError("train.device is 'cuda' but CUDA is not available; choices: auto, cpu, cuda")
    if choice == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    torch.cuda.set_device(dist.local_rank)
    return torch.device("cuda", dist.local_rank)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    if precision == "fp16" and device.type != "cuda":
        raise ValueError("train.precision 'fp16' needs CUDA; on CPU choose fp32, bf16 or auto")
    if precision == "auto":
        return torch.bfloat16 if device.type == "cuda" else None
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def better(metric: str, new: float, old: float | None) -> bool:
    return old is None or (new < old if metric.endswith("loss") else new > old)


class Trainer:
    def __init__(self, experiment: ExperimentSpec, resume: bool = False):
        self.experiment, t = experiment, experiment.train
        self.dist = Distributed.from_env()
        self.device = pick_device(t.device, self.dist)
        self.amp_dtype = autocast_dtype(t.precision, self.device)
        self.name = experiment.wandb.name or f"{experiment.model_spec(1, 1).name}-seed{t.seed}"
        self.run_dir = Path(t.out_dir) / self.name
        self.checkpoint_path = self.run_dir / "checkpoint.pt"
        saved = read_checkpoint(self.checkpoint_path, self.device) if resume and self.checkpoint_path.exists() else None
        self.task = build_task(experiment.task, t.seed, saved and saved["task"])
        self.spec = experiment.model_spec(len(self.task.src_vocab), len(self.task.tgt_vocab))
        torch.manual_seed(t.seed)
        self.model = EncoderDecoder(self.spec, seed=t.seed).to(self.device)
        self.optimizer = make_optimizer(self.model, t)
        self.schedule = make_schedule(self.optimizer, t)
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None
        self.step, self.best, self.last_eval, self.run_id, self.history = 0, {}, {}, None, []
        self.start = time.perf_counter()
        if saved is not None:
            self._restore(saved)
        self.forward = self.model
        if self.dist.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.forward = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        if t.compile:
            self.forward = torch.compile(self.forward)
        self.tracker = Tracker(experiment, self.spec, self.name, self.dist.is_main, self.run_id)
        self.eval_batches = self.task.eval_batches(t.eval_size, t.batch_size) if self.dist.is_main else []
        self.eval_references = self.task.references(t.eval_size) if self.dist.is_main else None

    def _restore(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["rng"]["torch"])
        if torch.cuda.is_available() and state["rng"].get("cuda") is not None:
            torch.cuda.set_rng_state(state["rng"]["cuda"])
        self.step, self.best, self.last_eval = state["step"], state["best"], state["last_eval"]
        self.history = state["history"]
        self.start = time.perf_counter() - state["wall_s"]  # wall time counts on across a resume
        self.run_id = state.get("wandb_id")

    def _checkpoint(self) -> None:
        if not self.dist.is_main:
            return
        save_checkpoint(self.checkpoint_path, {
            "experiment": self.experiment.model_dump(mode="json"),
            "spec": self.spec.model_dump(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "rng": {"torch": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None},
            "step": self.step, "best": self.best, "last_eval": self.last_eval, "history": self.history,
            "wall_s": time.perf_counter() - self.start,
            "task": self.task.state(), "wandb_id": self.tracker.run_id or self.run_id,
        })

    def _train_step(self, step: int) -> tuple[Tensor, Tensor, Tensor]:
        """One optimizer step on the global batch of `step`; returns (loss sum, tokens, grad norm)."""
        t, pad = self.experiment.train, self.spec.pad_id
        src, tgt = self.task.train_batch(step, t.batch_size)
        tokens = (tgt[:, 1:] != pad).sum()
        src, tgt = self.dist.shard(src).to(self.device), self.dist.shard(tgt).to(self.device)
        autocast = torch.autocast(self.device.type, self.amp_dtype) if self.amp_dtype else nullcontext()
        with autocast:
            logits = self.forward(src, tgt[:, :-1])
        loss_sum = F.cross_entropy(logits.float().flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=pad,
                                   label_smoothing=t.label_smoothing, reduction="sum")
        total = self.dist.sum(loss_sum.detach())
        if not torch.isfinite(total):
            raise Diverged(f"step {step}: the loss is {total.item()}")
        # DDP averages gradients over ranks, so each rank scales its sum to give the global mean.
        loss = loss_sum * self.dist.world / tokens.to(self.device)
        self.optimizer.zero_grad(set_to_none=True)
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.grad_clip or math.inf)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        elif not torch.isfinite(grad_norm):
            raise Diverged(f"step {step}: the gradient norm is {grad_norm.item()}")
        else:
            self.optimizer.step()
        self.schedule.step()
        return total, tokens, grad_norm

    def _log(self, metrics: dict[str, float], step: int) -> None:
        self.history.append({"train/step": step, "train/wall_s": time.perf_counter() - self.start, **metrics})
        self.tracker.log(metrics, step)

    def _evaluate(self) -> dict[str, float]:
        metrics = evaluate(self.model, self.task, self.eval_batches, self.device, self.eval_references)
        for name, value in metrics.items():
            if better(name, value, self.best.get(name)):
                self.best[name] = value
        self.last_eval = metrics
        return metrics

    def _loop(self, progress: Progress) -> None:
        t = self.experiment.train
        window_start, window_loss, window_tokens = time.perf_counter(), 0.0, 0.0
        for step in range(self.step + 1, t.steps + 1):
            loss_sum, tokens, grad_norm = self._train_step(step)
            self.step = step
            window_loss, window_tokens = window_loss + loss_sum.item(), window_tokens + tokens.item()
            if step % t.log_every == 0 or step == t.steps:
                now = time.perf_counter()
                logged = {"train/loss": window_loss / max(window_tokens, 1), "train/lr": self.schedule.get_last_lr()[0],
                          "train/grad_norm": grad_norm.item(), "train/tokens_per_s": window_tokens / (now - window_start),
                          "train/wall_s": now - self.start}
                self._log(logged, step)
                progress.update(step, logged)
                window_start, window_loss, window_tokens = now, 0.0, 0.0
            if self.dist.is_main and (step % t.eval_every == 0 or step == t.steps):
                metrics = self._evaluate()
                self._log(metrics, step)
                progress.update(step, metrics)
            if step % t.checkpoint_every == 0 or step == t.steps:
                self._checkpoint()
            self.dist.barrier()

    def _finish(self) -> tuple[dict[str, float], Path]:
        """On rank 0: the attention picture, the test split if the task has one, the summary."""
        t = self.experiment.train
        if not self.last_eval:
            self._evaluate()
        final = dict(self.last_eval)
        for split in self.task.eval_splits[1:]:
            batches = self.task.eval_batches(t.eval_size, t.batch_size, split)
            final.update(evaluate(self.model, self.task, batches, self.device, self.task.references(t.eval_size, split), split))
        png = self.run_dir / "cross_attention.png"
        caption = cross_attention_png(self.model, self.task, self.eval_batches[0][0], png)
        self.tracker.image("eval/cross_attention", png, caption, self.step)
        self.tracker.summary({**final, **{f"best/{k}": v for k, v in self.best.items()},
                              "wall_time_s": time.perf_counter() - self.start, "steps": self.step})
        self._write_result("finished", final)
        return final, png

    def _write_result(self, status: str, final: dict[str, float], **extra: Any) -> None:
        """result.json in the run directory: what a sweep's ledger and `zoo compare` read."""
        if not self.dist.is_main:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        result = {"status": status, "name": self.name, "metrics": final, "best": self.best, "steps": self.step,
                  "wall_time_s": time.perf_counter() - self.start, "parameters": self.model.num_parameters(),
                  "model_name": self.spec.name, "threads": torch.get_num_threads(), "history": self.history, **extra}
        tmp = self.run_dir / "result.json.tmp"
        tmp.write_text(json.dumps(result, indent=1))
        os.replace(tmp, self.run_dir / "result.json")

    def run(self) -> TrainResult:
        progress = Progress(self.experiment.train.steps, self.step, enabled=self.dist.is_main)
        self.tracker.summary({"parameters": self.model.num_parameters(), "model_name": self.spec.name})
        final, png, failed = {}, None, True
        wandb_dir = self.tracker.files_dir
        try:
            self._loop(progress)
            if self.dist.is_main:
                final, png = self._finish()
            failed = False
        except Diverged as err:
            self.tracker.summary({"diverged": True, "diverged_at": self.step + 1})
            self._write_result("diverged", {}, diverged_at=self.step + 1)
            kept = f"the last good checkpoint is {self.checkpoint_path}" if self.checkpoint_path.exists() else "no checkpoint was written yet"
            raise Diverged(f"training diverged at {err}; {kept}") from None
        finally:
            self.tracker.finish(failed=failed)
            progress.close()
            self.dist.close()
        return TrainResult(final, self.checkpoint_path, self.run_dir, png, wandb_dir, dict(self.best), self.history)


def train(experiment: ExperimentSpec | dict, resume: bool = False) -> TrainResult:
    """Train one experiment; returns the final metrics and where the checkpoint is."""
    if not isinstance(experiment, ExperimentSpec):
        experiment = ExperimentSpec.model_validate(experiment)
    return Trainer(experiment, resume).run()
