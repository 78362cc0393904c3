"""Run by torchrun (2 CPU processes, gloo) from tests/test_fsdp.py: every variant of the test grid
(every pair of parts of every axis, and kinds, at the tiny size) trains one step sharded
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
from torch.distributed.tensor import DTensor, distribute_tensor

import zoo
from zoo.model.kinds import model_class
from zoo.specs.experiment import TrainSpec
from zoo.trainer.feed import Batch
from zoo.trainer.objective import batch_loss_sum
from zoo.trainer.recompute import recompute_blocks
from zoo.trainer.sharding import shard


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
    at once would be another computation). Each rank compares its own shards with the same slices
    of the whole model's tensors; differences (gradients relative to the largest) are the largest
    over the ranks."""
    spec = tiny(name)
    whole, sharded = zoo.build(spec, seed=0), zoo.build(spec, seed=0)
    recompute_blocks(sharded, "blocks", 2)
    shard(sharded, None)
    for share in range(world):
        step(whole, batch_of(spec, slice(share, None, world)), spec, 1.0)
    step(sharded, batch_of(spec, slice(rank, None, world)), spec, float(world))  # FSDP averages over ranks
    mine, theirs = dict(sharded.named_parameters()), dict(whole.named_parameters())
    expected = {n: p.grad for n, p in theirs.items() if p.grad is not None}
    scale = max(g.abs().max().item() for g in expected.values())
    gap = max(shard_gap(mine[n].grad, g) for n, g in expected.items() if mine[n].grad is not None) / scale
    for model in (whole, sharded):
        torch.optim.SGD(model.parameters(), lr=0.1).step()
    weights = max(shard_gap(mine[n].detach(), p.detach()) for n, p in theirs.items())
    gaps = torch.tensor([gap, weights])
    dist.all_reduce(gaps, op=dist.ReduceOp.MAX)
    missing = sorted(n for n in expected if mine[n].grad is None)
    return {"gradient": gaps[0].item(), "weights": gaps[1].item(), "missing": missing}


def shard_gap(local: DTensor, whole: torch.Tensor) -> float:
    """The largest difference between this rank's shard and the same slice of the whole tensor
    (laid out as the shard is, without communication)."""
    expected = distribute_tensor(whole, local.device_mesh, local.placements, src_data_rank=None).to_local()
    mine = local.to_local()
    return (mine - expected).abs().max().item() if mine.numel() else 0.0


def parts_of(name: str) -> set[tuple[str, str]]:
    spec = tiny(name)
    return {(axis, choice.name) for axis, choice in spec.axes().items()} | {("kind", spec.kind)}


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    results = {}
    for name in GRID:
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
