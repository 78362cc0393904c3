"""Run by torchrun (2 CPU processes, gloo) from tests/test_fsdp.py: variants of the grid that cover
every registered part of every axis and every kind, at the tiny size, train one step sharded
(train.parallel fsdp's units, activation checkpointing on every block) and one step whole on the
same global batch; rank 0 writes each variant's largest gradient and weight differences, or its
error, as JSON to the path it is given."""

import json
import sys
import traceback
from contextlib import nullcontext

import torch
import torch.distributed as dist
from conftest import GRID, padded_batch, tiny

import zoo
from zoo.model.kinds import model_class
from zoo.specs.experiment import TrainSpec
from zoo.trainer.feed import Batch
from zoo.trainer.objective import batch_loss_sum
from zoo.trainer.recompute import recompute_blocks
from zoo.trainer.sharding import shard, whole_weights


def batch_of(spec: zoo.ModelSpec, rows: slice | None = None) -> Batch:
    """Four rows of different lengths (the same on every rank); `rows`: a rank's share of them."""
    kind = model_class(spec)
    src = padded_batch([9, 12, 7, 10], spec.src_vocab_size, spec=spec)
    tgt = padded_batch([9, 12, 7, 10] if kind.trains_on == "positions" else [5, 8, 8, 6], spec.tgt_vocab_size,
                       seed=1, spec=spec)
    inputs, labels = kind.frame(spec, src, tgt)
    tokens = int((labels != spec.pad_id).sum())
    if rows is not None:
        inputs, labels = tuple(t[rows] for t in inputs), labels[rows]
    return Batch(inputs, kind.input_masks(spec, inputs), labels, tokens)


def step(model, batch: Batch, spec: zoo.ModelSpec, scale: float) -> None:
    loss = batch_loss_sum(model, model.generator, batch, spec.pad_id, TrainSpec(), nullcontext())
    (loss * scale / batch.tokens).backward()


def compare(name: str, rank: int, world: int) -> dict[str, float]:
    """The sharded step against data parallelism done by hand: each rank's rows' gradients, averaged
    (a mixture of experts routes each rank's tokens within that rank's capacity, so a whole batch
    at once would be another computation). Differences are relative to the largest gradient."""
    spec = tiny(name)
    whole, sharded = zoo.build(spec, seed=0), zoo.build(spec, seed=0)
    recompute_blocks(sharded, "blocks", 2)
    shard(sharded, None)
    for share in range(world):
        step(whole, batch_of(spec, slice(share, None, world)), spec, 1.0)
    step(sharded, batch_of(spec, slice(rank, None, world)), spec, float(world))  # FSDP averages over ranks
    gradients = {n: p.grad.full_tensor() for n, p in sharded.named_parameters() if p.grad is not None}
    expected = {n: p.grad for n, p in whole.named_parameters() if p.grad is not None}
    scale = max(g.abs().max().item() for g in expected.values())
    gap = max((gradients[n] - g).abs().max().item() for n, g in expected.items() if n in gradients) / scale
    for model in (whole, sharded):
        torch.optim.SGD(model.parameters(), lr=0.1).step()
    after = whole_weights(sharded)
    weights = max((after[n] - p.detach()).abs().max().item() for n, p in whole.named_parameters()) if rank == 0 else 0.0
    return {"gradient": gap, "weights": weights, "missing": sorted(set(expected) - set(gradients))}


def parts_of(name: str) -> set[tuple[str, str]]:
    spec = tiny(name)
    return {(axis, choice.name) for axis, choice in spec.axes().items()} | {("kind", spec.kind)}


def holds_a_scalar(name: str) -> bool:
    return any(p.dim() == 0 for p in zoo.build(tiny(name), seed=0).parameters())


def covering() -> list[str]:
    """Variants of the grid, each kept where it brings a part (or kind) no variant kept before it
    has: first those FSDP can shard, then those that hold a scalar (refused) for what is left.
    Every registered part meets FSDP at least once, in a fraction of the whole grid's time."""
    kept, seen = [], set()
    shardable = {name: not holds_a_scalar(name) for name in GRID}
    for name in [*(n for n in GRID if shardable[n]), *(n for n in GRID if not shardable[n])]:
        new = parts_of(name) - seen
        if new:
            kept.append(name)
            seen |= new
    return kept


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    results = {}
    for name in covering():
        try:
            results[name] = compare(name, rank, world)
        except Exception:
            results[name] = {"error": traceback.format_exc(limit=-3)}
    if rank == 0:
        with open(out, "w") as handle:
            json.dump(results, handle, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
