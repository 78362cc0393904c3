"""The training memory of one rank, estimated from the spec before anything is built: the weights,
gradients and Adam's two moments it holds (all of them under DDP, a 1/world share under FSDP), the
weights FSDP holds whole while they compute (the root unit, and a block and the next one fetched
ahead, with the block's whole gradient before it is reduced), and the activations its rows keep
for the backward pass (a recomputed block keeps its input alone, and one recomputes at a time)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from zoo.files import human_bytes
from zoo.model.size_checks import FLOAT_BYTES, layer_activation_floats, rough_layer
from zoo.specs.layer_rules import distinct_layers
from zoo.specs.model_spec import ModelSpec

STATE_COPIES = 4
"""Weights, gradients and Adam's two moments, in float32."""


@dataclass(frozen=True)
class TrainingMemory:
    state: int
    gathered: int
    activations: int

    @property
    def total(self) -> int:
        return self.state + self.gathered + self.activations

    def text(self) -> str:
        parts = [f"weights, gradients and Adam state {human_bytes(self.state)}"]
        parts += [f"weights gathered whole {human_bytes(self.gathered)}"] if self.gathered else []
        return f"about {human_bytes(self.total)} ({', '.join(parts)}, activations {human_bytes(self.activations)})"


def block_parameters(spec: ModelSpec) -> list[int]:
    """Each block's big matrices (zoo.model.size_checks.rough_layer), in every stack; none where a
    stack shares one block over its depth (FSDP then keeps it in the root unit)."""
    if spec.share_layers:
        return []
    enc, dec = spec.depths
    return [rough_layer(spec.at_layer(stack, index), cross=stack == "decoder" and bool(enc))
            for stack, depth in (("encoder", enc), ("decoder", dec)) if depth
            for index, count in distinct_layers(spec.layers, stack, depth).items() for _ in range(count)]


def recomputed(depth: int, checkpointing: str, k: int) -> int:
    """How many of a stack's blocks train.activation_checkpointing recomputes (zoo.trainer.recompute)."""
    return {"none": 0, "blocks": depth, "every_k": math.ceil(depth / k)}[checkpointing]


def activation_bytes(spec: ModelSpec, rows: int, src_len: int, tgt_len: int, checkpointing: str = "none",
                     k: int = 2) -> int:
    encoder, decoder, head = layer_activation_floats(spec, rows, src_len, tgt_len)
    floats, largest = head, 0
    for depth, layer, length in zip(spec.depths, (encoder, decoder), (src_len, tgt_len), strict=True):
        again = recomputed(depth, checkpointing, k) if depth else 0
        floats += (depth - again) * layer + again * rows * length * spec.d_model
        largest = max(largest, layer if again else 0)
    return (floats + largest) * FLOAT_BYTES


def training_memory(spec: ModelSpec, parameters: int, rows: int, src_len: int, tgt_len: int, world: int = 1,
                    sharded: bool = False, checkpointing: str = "none", k: int = 2) -> TrainingMemory:
    """One rank's estimate for `rows` rows of up to src_len and tgt_len tokens (`parameters`: the
    model's exact count, zoo.model.size_checks.exact_parameters)."""
    activations = activation_bytes(spec, rows, src_len, tgt_len, checkpointing, k)
    if not sharded:
        return TrainingMemory(STATE_COPIES * parameters * FLOAT_BYTES, 0, activations)
    blocks = block_parameters(spec)
    root = max(parameters - sum(blocks), 0)
    largest = max(blocks, default=0)
    gathered = (root + 3 * largest) * FLOAT_BYTES if world > 1 else 0  # one rank holds every shard already
    return TrainingMemory(STATE_COPIES * math.ceil(parameters / world) * FLOAT_BYTES, gathered, activations)
