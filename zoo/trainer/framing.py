"""How a task's (source, target) pairs become a model's inputs and labels, by the model's kind.

- encoder_decoder: the source is encoded; the target, shifted right, is teacher-forced.
- decoder: each pair is one sequence, the source (bos ... eos) as the prompt, then the target
  without its bos as the continuation; the loss and the metrics count the continuation only, so a
  decoder-only model is scored on the same tokens as an encoder-decoder on the same task.
- encoder: reads the source and predicts the target at the same positions (padding where nothing
  is predicted): the masked-language-model task's shape; the sequence tasks have no such target.
"""

from __future__ import annotations

import torch
from torch import Tensor

from zoo.errors import ConfigError
from zoo.model.masks import real_tokens
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import registry


def check_kind_fits_task(kind: str, task) -> None:
    """The task trains the kind, and a decoder-only model reads source and target in one
    vocabulary. Checked before the model's spec takes the task's vocabularies."""
    tasks = registry("task")
    name = next((n for n in tasks.names() if tasks.get(n) is type(task)), type(task).__name__)
    if kind not in task.kinds:
        raise ConfigError(f"model.kind {kind}: task {name} trains model.kind {' or '.join(task.kinds)}")
    if kind == "decoder" and task.src_vocab is not task.tgt_vocab:
        from zoo.tasks.pretrained_tokenizer import PretrainedCodec

        if isinstance(task.tgt_vocab, PretrainedCodec):
            fix = "a pretrained tokenizer (task.tokenizer_dir) frames encoder-decoder models only; leave it out"
        elif "shared_vocab" in type(task.params).model_fields:
            fix = "set task.shared_vocab: true"
        else:
            fix = "use a task with one vocabulary"
        raise ConfigError(f"model.kind decoder reads source and target as one sequence in one vocabulary, but task "
                          f"{name} has a vocabulary per side; {fix}, or use kind encoder_decoder")


def prompt_lengths(spec: ModelSpec, src: Tensor) -> Tensor:
    """Tokens of each right-padded prompt, counted as the model's decoding counts them."""
    return real_tokens(src, spec).sum(1)


def sequences(spec: ModelSpec, src: Tensor, tgt: Tensor) -> Tensor:
    """Each row's source tokens, then its target's tokens after the bos, right-padded."""
    pad_id = spec.pad_id
    src_len, tgt_len = prompt_lengths(spec, src), (tgt[:, 1:] != pad_id).sum(1)
    width = int((src_len + tgt_len).max())
    out = torch.full((src.size(0), src.size(1) + tgt.size(1)), pad_id, dtype=src.dtype, device=src.device)
    out[:, : src.size(1)] = src
    after = src_len[:, None] + torch.arange(tgt.size(1) - 1, device=src.device)
    body = tgt[:, 1:]
    out.scatter_(1, after, torch.where(body != pad_id, body, out.gather(1, after)))
    return out[:, :width]


def frame(spec: ModelSpec, src: Tensor, tgt: Tensor) -> tuple[tuple[Tensor, ...], Tensor]:
    """The model's inputs and the labels of each input position (the pad id where nothing is
    predicted: padding, and a decoder-only model's prompt)."""
    if spec.kind == "encoder_decoder":
        return (src, tgt[:, :-1]), tgt[:, 1:]
    if spec.kind == "encoder":
        return (src,), tgt
    sequence = sequences(spec, src, tgt)
    labels = sequence[:, 1:].clone()
    prompt = torch.arange(labels.size(1), device=src.device)[None] < (prompt_lengths(spec, src) - 1)[:, None]
    return (sequence[:, :-1],), labels.masked_fill(prompt, spec.pad_id)


def continuations(spec: ModelSpec, src: Tensor, generated: Tensor) -> list[list[int]]:
    """The generated ids after the start (encoder-decoder) or after each prompt (decoder-only)."""
    rows = generated.tolist()
    if spec.kind == "encoder_decoder":
        return [row[1:] for row in rows]
    return [row[n:] for row, n in zip(rows, prompt_lengths(spec, src).tolist(), strict=True)]


def sequence_lengths(spec: ModelSpec, src_len: int, tgt_len: int) -> tuple[int, int]:
    """(encoder, decoder) input lengths of a pair whose source and target have these lengths."""
    if spec.kind == "decoder":
        return 0, src_len + tgt_len - 2
    if spec.kind == "encoder":
        return src_len, 0
    return src_len, tgt_len - 1
