"""train.activation_checkpointing: which blocks keep only their inputs and compute again in the
backward pass (zoo.model.blocks.Block.recompute), trading compute for activation memory."""

from __future__ import annotations

from torch import nn

from zoo.model.blocks import Block
from zoo.model.stacks import Stack


def stack_blocks(model: nn.Module) -> list[list[Block]]:
    """Each stack's distinct blocks, in order (a stack that shares its layers holds one)."""
    return [list(module.layers) for module in model.modules() if isinstance(module, Stack)]


def chosen_blocks(blocks: list[Block], choice: str, k: int) -> list[Block]:
    """none: no block; blocks: every one; every_k: the first of every k (indices 0, k, 2k, ...)."""
    if choice == "none":
        return []
    return blocks if choice == "blocks" else blocks[::k]


def recompute_blocks(model: nn.Module, choice: str, k: int) -> int:
    """Mark the chosen blocks of every stack for recomputation; how many were marked."""
    marked = 0
    for blocks in stack_blocks(model):
        for block in blocks:
            block.recompute = block in chosen_blocks(blocks, choice, k)
            marked += block.recompute
    return marked
