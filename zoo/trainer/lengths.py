"""Sequences a model cannot place, found when the data is loaded: a `learned` position table of
max_len rows cannot embed a longer training pair, held-out pair or test sentence, and meeting
one after hours of training would lose them."""

from __future__ import annotations

from zoo.errors import ConfigError
from zoo.tasks import Task
from zoo.trainer.framing import sequence_lengths


def check_lengths(model, task: Task, eval_size: int, batch_size: int) -> None:
    """Every split's longest source and target against the positions of the stacks that read them
    (an encoder-decoder's decoder reads a target without its last token; a decoder-only model
    reads source and target as one sequence)."""
    longest = {"training": task.longest_training()}
    for split in task.eval_splits:
        batches = task.eval_batches(eval_size, batch_size, split)
        longest[split] = (max(src.size(1) for src, _ in batches), max(tgt.size(1) for _, tgt in batches))
    for split, lengths in longest.items():
        if lengths is None:
            continue
        encoder, decoder = sequence_lengths(model.spec, *lengths)
        read = ([("source", model.encoder, encoder)] if encoder else []) + (
            [("target" if encoder else "source and target", model.decoder, decoder)] if decoder else [])
        for side, stack, length in read:
            table = stack.embed.position.max_length
            if table is not None and length > table:
                raise ConfigError(f"the task's {split} data holds a {side} of {length} positions, more than the "
                                  f"model.max_len {table} of its '{model.spec.position.name}' positions; raise "
                                  f"model.max_len to {length} or more, or use shorter sequences (found before any "
                                  "training step)")
