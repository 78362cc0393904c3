"""Held-out metrics: teacher-forced loss and token accuracy, greedy exact match, corpus BLEU; of the
target (a decoder-only model's continuation), framed by the model's kind (zoo.model.zoo_model)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.model.generate import default_new_tokens
from zoo.model.kinds import ZooModel
from zoo.tasks.base import Task


def until_eos(row: list[int], eos_id: int) -> list[int]:
    return row[: row.index(eos_id) + 1] if eos_id in row else row


@torch.no_grad()
def evaluate(model: ZooModel, task: Task, batches: list[tuple[Tensor, Tensor]], device,
             references: list[str] | None = None, prefix: str = "eval", num_beams: int = 1,
             length_penalty: float = 1.0) -> dict[str, float]:
    """Metrics of one held-out split; BLEU scores against `references` (raw text) when given,
    else against the decoded target ids. Decoding (greedy, or beam search with `num_beams`) never
    looks at the target, not even for its length."""
    was_training = model.training
    model.eval()
    spec, kind = model.spec, type(model)
    loss_sum = correct = tokens = exact = rows = 0
    hypotheses, decoded_refs = [], []
    for src, tgt in batches:
        src, tgt = src.to(device), tgt.to(device)
        inputs, labels = kind.frame(spec, src, tgt)
        logits = model(*inputs).float()
        real = labels != spec.pad_id
        loss_sum += F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=spec.pad_id, reduction="sum").item()
        correct += ((logits.argmax(-1) == labels) & real).sum().item()
        tokens += real.sum().item()
        rows += src.size(0)
        if not task.generates:
            continue
        decoded = model.generate(kind.prompts(spec, src), max_new_tokens=default_new_tokens(model, src),
                                 num_beams=num_beams, length_penalty=length_penalty)
        for out, ref in zip(kind.continuations(spec, src, decoded), tgt.tolist(), strict=True):
            hyp, ref = until_eos(out, spec.eos_id), until_eos(ref[1:], spec.eos_id)
            exact += hyp == ref
            hypotheses.append(task.tgt_vocab.decode(hyp))
            decoded_refs.append(task.tgt_vocab.decode(ref))
    model.train(was_training)
    loss = loss_sum / max(tokens, 1)
    metrics = {f"{prefix}/loss": loss, f"{prefix}/token_acc": correct / max(tokens, 1)}
    if "perplexity" in task.METRICS:
        metrics[f"{prefix}/perplexity"] = math.exp(min(loss, 700.0))  # past e^700 a float overflows
    if task.generates:
        metrics[f"{prefix}/exact_match"] = exact / max(rows, 1)
    if task.text_metric:
        import sacrebleu

        refs = decoded_refs if references is None else references
        metrics[f"{prefix}/bleu"] = sacrebleu.corpus_bleu(hypotheses, [refs]).score
    return metrics


def evaluate_split(model: ZooModel, task: Task, split: str, size: int, rows: int, device,
                   num_beams: int = 1, length_penalty: float = 1.0) -> dict[str, float]:
    """Metrics of `size` pairs of one held-out split in batches of `rows`, under its metric prefix."""
    from zoo.tasks.base import metric_prefix

    return evaluate(model, task, task.eval_batches(size, rows, split), device, task.references(size, split),
                    metric_prefix(split), num_beams, length_penalty)


EVAL_SETS = ("train.eval_size", "train.batch_size")
"""What `zoo eval --set` may change besides task.*: how much of a split is scored, in batches of what size."""


def evaluate_checkpoint(path, split: str = "valid", num_beams: int = 1, length_penalty: float = 1.0,
                        sets: tuple[str, ...] = (), device: str = "cpu") -> dict[str, float]:
    """Metrics of a trained checkpoint on one held-out split, decoded as asked, so greedy and beam
    search are compared on the same weights. `sets` change the saved experiment's task (a corpus
    that moved: `task.data_dir=...`), train.eval_size or train.batch_size; any other key is refused."""
    from zoo.errors import ConfigError
    from zoo.specs.experiment import parse_sets, validate_experiment, with_sets
    from zoo.tasks import build_task
    from zoo.trainer.checkpoint import load, read_checkpoint
    from zoo.trainer.lengths import check_lengths

    ignored = [key for key, _ in parse_sets(sets) if not (key.startswith("task.") or key in EVAL_SETS)]
    if ignored:
        raise ConfigError(f"zoo eval --set {', '.join(ignored)}: an evaluation takes the checkpoint's model and "
                          f"training as they are; only task.* and {' and '.join(EVAL_SETS)} may change")
    state = read_checkpoint(path, need=("experiment", "spec", "model", "task"))
    experiment = validate_experiment(with_sets(state["experiment"], sets), f"{path}'s experiment")
    model, _ = load(path, device)
    task = build_task(experiment.task, experiment.train.seed, state["task"])
    try:
        task.check_split(split)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    check_lengths(model, task, experiment.train.eval_size, experiment.train.batch_size, device, num_beams)
    return evaluate_split(model, task, split, experiment.train.eval_size, experiment.train.batch_size, device,
                          num_beams, length_penalty)
