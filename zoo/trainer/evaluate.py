"""Held-out metrics: teacher-forced loss and token accuracy, greedy exact match, corpus BLEU; of the
target (a decoder-only model's continuation), framed by the model's kind (zoo.model.zoo_model).
During training, the Evaluator scores the same held-out batches each time (made once, on rank 0),
keeps the best values in the run's progress, and gives the final metrics and the picture."""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.errors import Diverged
from zoo.kernels.probes import mechanism_metrics
from zoo.metrics import Tally, better, chosen, curve_means, decodes, metric_settings, scored
from zoo.model.generate import default_new_tokens
from zoo.model.kinds import ZooModel, model_class
from zoo.records import CheckpointProgress
from zoo.specs.experiment import TrainSpec
from zoo.specs.registries import registry
from zoo.tasks.base import Task
from zoo.tasks.packing import offsets_of
from zoo.trainer.parallelism import Parallelism
from zoo.trainer.picture import try_cross_attention_png
from zoo.trainer.sharding import gathered


def position_inputs(kind: type[ZooModel], spec, batch: tuple[Tensor, Tensor]) -> dict[str, Tensor]:
    """What forward takes beside a held-out batch's ids: its rows' offsets, where the model
    continues a document's positions across packed rows (as the feed's Batch.model_inputs)."""
    offsets = offsets_of(batch) if kind.continues_positions(spec) else None
    return {} if offsets is None else {"offsets": offsets}


def until_eos(row: list[int], eos_id: int) -> list[int]:
    return row[: row.index(eos_id) + 1] if eos_id in row else row


@torch.no_grad()
def evaluate(model: ZooModel, task: Task, batches: list[tuple[Tensor, Tensor]], device,
             references: list[str] | None = None, prefix: str = "eval", num_beams: int = 1,
             length_penalty: float = 1.0, metrics: dict[str, dict] | None = None, text_bytes: int = 0
             ) -> dict[str, float]:
    """The task's registered metrics (zoo.metrics) that `metrics` (train.metrics) leaves scored, on
    one held-out split, each with its settings there or its defaults; text metrics score against
    `references` (raw text) when given, else against the decoded target ids; bits per byte divides
    by `text_bytes`, the UTF-8 bytes of the text the batches hold (Task.held_out_bytes). Decoding (greedy, or
    beam search with `num_beams`) never looks at the target, not even for its length, and is skipped
    where no scored metric reads it."""
    names = chosen(task.metrics(), metrics or {})
    generating = task.generates and decodes(names)
    was_training = model.training
    model.eval()
    spec, kind = model.spec, type(model)
    tally = Tally(text_bytes=text_bytes)
    for batch in batches:
        src, tgt = (t.to(device) for t in batch)
        inputs, labels = kind.frame(spec, src, tgt)
        logits = model(*inputs, **position_inputs(kind, spec, batch)).float()
        real = labels != spec.pad_id
        tally.loss_sum += F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=spec.pad_id,
                                          reduction="sum").item()
        tally.correct += ((logits.argmax(-1) == labels) & real).sum().item()
        tally.tokens += real.sum().item()
        tally.rows += src.size(0)
        if not generating:
            continue
        decoded = model.generate(kind.prompts(spec, src), max_new_tokens=default_new_tokens(model, src),
                                 num_beams=num_beams, length_penalty=length_penalty)
        for out, ref in zip(kind.continuations(spec, src, decoded), tgt.tolist(), strict=True):
            hyp, ref = until_eos(out, spec.eos_id), until_eos(ref[1:], spec.eos_id)
            tally.exact += hyp == ref
            tally.hypotheses.append(task.tgt_vocab.decode(hyp))
            tally.references.append(task.tgt_vocab.decode(ref))
    model.train(was_training)
    if references is not None:
        tally.references = list(references)
    scoring = {name: metric_settings(name, metrics or {}) for name in names}
    return scored(names, tally, scoring, prefix)


def evaluate_split(model: ZooModel, task: Task, split: str, size: int, rows: int, device,
                   num_beams: int = 1, length_penalty: float = 1.0, metrics: dict[str, dict] | None = None
                   ) -> dict[str, float]:
    """Metrics of `size` pairs of one held-out split in batches of `rows`, under its metric prefix."""
    from zoo.tasks.base import metric_prefix

    return evaluate(model, task, task.eval_batches(size, rows, split), device, task.references(size, split),
                    metric_prefix(split), num_beams, length_penalty, metrics, text_bytes_of(task, size, split))


def text_bytes_of(task: Task, size: int, split: str = "valid") -> int:
    """The bytes of held-out text bits per byte divides by; 0 for a task that does not score text."""
    return task.held_out_bytes(size, split) if task.scores_text else 0


class Evaluator:
    def __init__(self, task: Task, train: TrainSpec, device: torch.device, dist: Parallelism,
                 progress: CheckpointProgress):
        self.task, self.train, self.device, self.dist, self.progress = task, train, device, dist, progress
        self.everyone = dist.sharded
        """A sharded model computes only with every rank (each gathers the weights in turn): every rank
        evaluates the same batches, and rank 0 reports."""
        evaluates = dist.is_main or self.everyone
        self.batches = task.eval_batches(train.eval_size, train.batch_size) if evaluates else []
        self.references = task.references(train.eval_size) if evaluates else None
        self.decoding = {"num_beams": train.eval_beams, "length_penalty": train.length_penalty,
                         "metrics": train.metrics}
        self.text_bytes = text_bytes_of(task, train.eval_size) if evaluates else 0
        self.scorers = {name: registry("metric").get(name).scorer(metric_settings(name, train.metrics)) or "zoo"
                        for name in chosen(task.metrics(), train.metrics)}
        """Each metric the run reports and how it is scored (result.json and the W&B config hold it)."""

    def __call__(self, model: ZooModel, step: int, collective: bool = True) -> dict[str, float]:
        """Rank 0 evaluates; with `collective`, every rank learns whether the loss was finite, and
        all stop together (every rank must then call it)."""
        metrics = {}
        if self.dist.is_main or self.everyone:
            with gathered(model):
                metrics = evaluate(model, self.task, self.batches, self.device, self.references, **self.decoding,
                                   text_bytes=self.text_bytes)
        bad = torch.tensor(float(not math.isfinite(metrics.get("eval/loss", 0.0))), device=self.device)
        if (self.dist.sum(bad) if collective else bad).item() > 0:
            raise Diverged(f"step {step}: the evaluation loss is {metrics.get('eval/loss', 'not finite')}")
        for name, value in metrics.items():
            if better(name, value, self.progress.best.get(name)):
                self.progress.best[name] = value
        self.progress.last_eval = metrics
        if self.train.probes and (self.dist.is_main or self.everyone):  # logged, never a best nor a score
            with gathered(model):
                return {**metrics, **self.mechanism(model)}
        return metrics

    def mechanism(self, model: ZooModel) -> dict[str, float]:
        """Mechanism statistics of the first held-out batch (zoo.kernels.probes), in evaluation mode."""
        spec, kind = model.spec, model_class(model.spec)
        src, tgt = self.batches[0]
        inputs, labels = kind.frame(spec, src, tgt)
        padding = tuple(None if m is None else m.to(self.device) for m in kind.input_masks(spec, inputs))
        inputs = tuple(t.to(self.device) for t in inputs)
        was_training = model.training
        model.eval()
        try:
            return mechanism_metrics(model, inputs, padding, (labels != spec.pad_id).to(self.device),
                                     **position_inputs(kind, spec, self.batches[0]))
        finally:
            model.train(was_training)

    def final(self, model: ZooModel, step: int) -> dict[str, float]:
        """On rank 0 (every rank of a sharded run): the last evaluation (made now if the run had none),
        the means over the run's curves, and every further split the task has (its test set)."""
        if not self.progress.last_eval:
            self(model, step, collective=self.everyone)
        final = dict(self.progress.last_eval)
        final.update(curve_means(self.progress.history) or curve_means([final]))
        with gathered(model):
            for split in self.task.eval_splits[1:]:
                final.update(evaluate_split(model, self.task, split, self.train.eval_size, self.train.batch_size,
                                            self.device, **self.decoding))
        broken = {k: v for k, v in final.items() if not math.isfinite(v)}
        if broken:
            raise Diverged(f"step {step}: the final evaluation is not finite ({broken})")
        return final

    def every_split(self, model: ZooModel) -> dict[str, float]:
        """On rank 0: metrics of another model (the best checkpoint's, the average's) on every held-out split."""
        metrics = {}
        for split in self.task.eval_splits:
            metrics.update(evaluate_split(model, self.task, split, self.train.eval_size, self.train.batch_size,
                                          self.device, **self.decoding))
        return metrics

    def picture(self, model: ZooModel, path: Path) -> str | None:
        """The cross-attention of the first held-out source, drawn into `path` by rank 0; its caption,
        or None where the model has no cross-attention or the drawing failed (a warning). The other
        ranks of a sharded run compute it with rank 0, and draw nothing."""
        with gathered(model):
            return try_cross_attention_png(model, self.task, self.batches[0][0], path if self.dist.is_main else None)


EVAL_SETS = ("train.eval_size", "train.batch_size")
"""What `zoo eval --set` may change besides task.*: how much of a split is scored, in batches of what size."""


def saved_run(path, sets: tuple[str, ...] = (), device: str = "cpu"):
    """(experiment, model, task) of a trained checkpoint, the experiment changed by `sets`: its
    task (a corpus that moved: `task.data_dir=...`), train.eval_size or train.batch_size; any other
    key is refused, as an evaluation takes the model and its training as they are."""
    from zoo.errors import ConfigError
    from zoo.specs.experiment import parse_sets, validate_experiment, with_sets
    from zoo.tasks import build_task
    from zoo.trainer.checkpoint import load, read_checkpoint

    ignored = [key for key, _ in parse_sets(sets) if not (key.startswith("task.") or key in EVAL_SETS)]
    if ignored:
        raise ConfigError(f"zoo eval --set {', '.join(ignored)}: an evaluation takes the checkpoint's model and "
                          f"training as they are; only task.* and {' and '.join(EVAL_SETS)} may change")
    state = read_checkpoint(path, need=("experiment", "spec", "model", "task"))
    experiment = validate_experiment(with_sets(state["experiment"], sets), f"{path}'s experiment")
    model, _ = load(path, device)
    return experiment, model, build_task(experiment.task, experiment.train.seed, state["task"])


def evaluate_checkpoint(path, split: str = "valid", num_beams: int = 1, length_penalty: float = 1.0,
                        sets: tuple[str, ...] = (), device: str = "cpu") -> dict[str, float]:
    """Metrics of a trained checkpoint on one held-out split, decoded as asked, so greedy and beam
    search are compared on the same weights (`sets`: as saved_run takes them)."""
    from zoo.trainer.lengths import check_lengths

    experiment, model, task = saved_run(path, sets, device)
    task.check_split(split)
    check_lengths(model, task, experiment.train.eval_size, experiment.train.batch_size, device, num_beams)
    return evaluate_split(model, task, split, experiment.train.eval_size, experiment.train.batch_size, device,
                          num_beams, length_penalty, experiment.train.metrics)
