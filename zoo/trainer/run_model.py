"""The model a run trains: its spec sized by the task's vocabularies (and held to a resumed
checkpoint's), checked against the device's memory and the disk before anything is built, then
built from its seed (or `train.init_from`'s weights) on the device."""

from __future__ import annotations

from typing import Any

import torch

from zoo.errors import CheckpointError, ConfigError
from zoo.files import human_bytes
from zoo.metrics import chosen, decodes
from zoo.model.kinds import ZooModel, build, model_class
from zoo.model.memory import training_memory
from zoo.model.size_checks import available_bytes, check_fits
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.model_spec import ModelSpec
from zoo.tasks.base import Task
from zoo.trainer.feed import BatchFeed
from zoo.trainer.framing import check_kind_fits_task
from zoo.trainer.init_from import initial_weights
from zoo.trainer.lengths import check_lengths
from zoo.trainer.parallelism import Parallelism
from zoo.trainer.run_folder import RunFolder


def run_spec(experiment: ExperimentSpec, task: Task, saved: dict[str, Any] | None, folder: RunFolder) -> ModelSpec:
    """The experiment's recipe with the task's vocabulary sizes; a resumed checkpoint must hold it."""
    check_kind_fits_task(experiment.model.kind, task)  # before sizing: a one-stack kind needs one vocabulary
    spec = experiment.model_spec(len(task.src_vocab), len(task.tgt_vocab))
    if saved is not None and ModelSpec.model_validate(saved["spec"]) != spec:
        raise CheckpointError(f"{folder.checkpoint}: its model spec differs from the experiment's "
                              f"({ModelSpec.model_validate(saved['spec']).name} against {spec.name})")
    return spec


def check_step_rows_fit(train, width: int) -> None:
    """A step's rows (batch_size x accumulate, made at once on the host and split into micro-batches)
    must fit the host's memory as ids, a few copies of them: accumulate 10^12 is refused here, not
    by the allocator at the first step."""
    if train.batch_tokens is not None:
        return
    need = train.batch_size * train.accumulate * width * 8 * 4  # int64 ids of both sides; the task's own copies
    free = available_bytes("cpu")
    if need > free:
        raise ConfigError(f"train.accumulate {train.accumulate} x batch_size {train.batch_size}: a step's "
                          f"{train.batch_size * train.accumulate:,} rows of about {width} ids are made at once on the "
                          f"host and need about {human_bytes(need)}, but only {human_bytes(free)} is available; lower "
                          "accumulate or batch_size")


def run_model(spec: ModelSpec, experiment: ExperimentSpec, task: Task, feed: BatchFeed, folder: RunFolder,
              device: torch.device, dist: Parallelism, saved: dict[str, Any] | None) -> tuple[ZooModel, str | None]:
    """The model on its device, after its training memory (at the first batch's shape) and its
    checkpoint's disk space were found to fit; a resume's own weights are restored later, with the
    rest of its training state (zoo.trainer.step). With sharding or activation checkpointing, also
    the estimate of one rank's memory, for the run to print."""
    t = experiment.train
    sample_src, sample_tgt = feed.global_batch(0) if t.batch_tokens else task.train_batch(0, min(t.batch_size, 8))
    rows = max(1, (sample_src.size(0) if t.batch_tokens else t.batch_size) // dist.world)
    lengths = model_class(spec).sequence_lengths(spec, sample_src.size(1), sample_tgt.size(1))
    check_step_rows_fit(t, sample_src.size(1) + sample_tgt.size(1))
    shares = dist.memory_shares()
    per_rank = None if shares is None else (lambda count: training_memory(spec, count, rows, *lengths, **shares).total)
    params = check_fits(spec, device, training=True, batch=(rows, *lengths), per_rank=per_rank)
    folder.check_space(3 * 4 * params + (1 << 20))  # weights and Adam's two moments, in float32
    torch.manual_seed(t.seed)
    model = build(spec, seed=t.seed)
    if t.init_from is not None and saved is None:  # a resume's own checkpoint wins over where it started
        model.load_state_dict(initial_weights(t.init_from, spec, task))
    model = model.to(device)
    beams = t.eval_beams if decodes(chosen(task.metrics(), t.metrics)) else 0  # no scored metric decodes: none
    check_lengths(model, task, t.eval_size, t.batch_size, device, beams)
    if shares is None:
        return model, None
    estimate = training_memory(spec, params, rows, *lengths, **shares)
    return model, (f"memory per rank: {estimate.text()} at the first batch, {rows} rows on each of {dist.world} "
                   f"ranks (train.parallel {dist.name}, activation_checkpointing {dist.checkpointing})")
