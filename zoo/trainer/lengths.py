"""Sequences a model cannot place, found when the data is loaded: a `learned` position table of
max_len rows cannot embed a longer training pair, held-out pair or test sentence, and meeting
one after hours of training would lose them."""

from __future__ import annotations

from zoo.errors import ConfigError
from zoo.files import human_bytes
from zoo.kernels.masks import document_positions
from zoo.model.size_checks import available_bytes, check_evaluation_fits
from zoo.tasks import Task
from zoo.tasks.packing import offsets_of

SAMPLE = 256
"""Held-out examples drawn to measure a split's lengths before all of them are made."""


def check_held_out_fits(task: Task, eval_size: int, batch_size: int) -> None:
    """A split's held-out examples are made at once on the host: a generated task makes as many
    as train.eval_size asks, so a huge one is refused with its size before any is made."""
    for split in task.eval_splits:
        rows = task.held_out_rows(eval_size, split)
        if rows <= SAMPLE:
            continue
        batches = task.eval_batches(SAMPLE, batch_size, split)
        width = max(src.size(1) for src, _ in batches) + max(tgt.size(1) for _, tgt in batches)
        need, free = 3 * rows * width * 8, available_bytes("cpu")  # int64 ids, with the copies batching makes
        if need > free:
            raise ConfigError(f"train.eval_size {eval_size}: the {split} split's {rows:,} held-out examples of about "
                              f"{width} tokens each need about {human_bytes(need)} on the host, but only "
                              f"{human_bytes(free)} is available; use a smaller train.eval_size")


def check_lengths(model, task: Task, eval_size: int, batch_size: int, device="cpu", beams: int = 1) -> None:
    """Every split's longest source and target against the positions of the stacks that read them
    (an encoder-decoder's decoder reads a target without its last token; a decoder-only model
    reads source and target as one sequence); then each split's largest batch against the
    device's memory, for the forward pass and for decoding, so that a long held-out line is
    found before training, not at the first evaluation."""
    check_held_out_fits(task, eval_size, batch_size)
    longest, held_out = {"training": task.longest_training()}, {}
    for split in task.eval_splits:
        batches = held_out[split] = task.eval_batches(eval_size, batch_size, split)
        longest[split] = (max(src.size(1) for src, _ in batches), max(tgt.size(1) for _, tgt in batches))
        decoded = beams if task.generates else 0
        start = type(model).start_columns(model.spec, longest[split][0]) if decoded else 0
        check_evaluation_fits(model.spec, device, split, max(src.size(0) for src, _ in batches), *longest[split],
                              decoded, start)
    for split, lengths in longest.items():
        if lengths is None:
            continue
        read = dict(zip(("encoder", "decoder"), type(model).sequence_lengths(model.spec, *lengths), strict=True))
        for stack, table in model.position_limits().items():
            side, length = type(model).reads[stack], read[stack]
            if table is not None and length > table:
                raise ConfigError(f"the task's {split} data holds a {side} of {length} positions, more than the "
                                  f"model.max_len {table} of its '{model.spec.position.name}' positions; raise "
                                  f"model.max_len to {length} or more, or use shorter sequences (found before any "
                                  "training step)")
    check_continued_positions(model, task, held_out)


def check_continued_positions(model, task: Task, held_out: dict[str, list]) -> None:
    """Where a document cut across packed rows continues its positions (ZooModel.continues_positions),
    its longest document against the position table: a training document of L tokens may take
    positions 0 .. L - 1 (its last is read wherever a row goes on after it); the held-out rows, the
    positions their inputs take."""
    longest, kind, spec = task.longest_document(), type(model), model.spec
    if not kind.continues_positions(spec) or longest is None:
        return
    table = model.position_limits()["decoder"]

    def furthest(batch) -> int:
        ids = kind.frame(spec, *batch)[0][0]
        return int(document_positions(ids, spec, offsets_of(batch)).max()) + 1

    needs = {"training": longest, **{split: max(map(furthest, batches)) for split, batches in held_out.items()}}
    for split, length in needs.items():
        if table is not None and length > table:
            raise ConfigError(f"the task's {split} data holds a document of {length} positions, more than the "
                              f"model.max_len {table} of its '{model.spec.position.name}' positions: under "
                              "model.documents separate a document cut across packed rows continues its positions; "
                              f"raise model.max_len to {length} or more, or use model.documents masked (positions "
                              "run along the row) or a relative position scheme (rope, alibi, t5) (found before any "
                              "training step)")
