"""Held-out metrics: teacher-forced loss and token accuracy, greedy exact match, corpus BLEU."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.model import EncoderDecoder
from zoo.tasks.base import Task


def until_eos(row: list[int], eos_id: int) -> list[int]:
    return row[: row.index(eos_id) + 1] if eos_id in row else row


@torch.no_grad()
def evaluate(model: EncoderDecoder, task: Task, batches: list[tuple[Tensor, Tensor]], device) -> dict[str, float]:
    was_training = model.training
    model.eval()
    spec = model.spec
    loss_sum = correct = tokens = exact = rows = 0
    hypotheses, references = [], []
    for src, tgt in batches:
        src, tgt = src.to(device), tgt.to(device)
        logits = model(src, tgt[:, :-1]).float()
        labels = tgt[:, 1:]
        real = labels != spec.pad_id
        loss_sum += F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=spec.pad_id, reduction="sum").item()
        correct += ((logits.argmax(-1) == labels) & real).sum().item()
        tokens += real.sum().item()
        decoded = model.generate(src, max_new_tokens=tgt.size(1) + 4).tolist()
        for out, ref in zip(decoded, tgt.tolist()):
            hyp, ref = until_eos(out[1:], spec.eos_id), until_eos(ref[1:], spec.eos_id)
            exact += hyp == ref
            hypotheses.append(task.tgt_vocab.decode(hyp))
            references.append(task.tgt_vocab.decode(ref))
        rows += src.size(0)
    model.train(was_training)
    metrics = {
        "eval/loss": loss_sum / max(tokens, 1),
        "eval/token_acc": correct / max(tokens, 1),
        "eval/exact_match": exact / max(rows, 1),
    }
    if task.text_metric:
        import sacrebleu

        metrics["eval/bleu"] = sacrebleu.corpus_bleu(hypotheses, [references]).score
    return metrics
