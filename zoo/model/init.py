"""Deterministic initialization, the same for every variant that shares a parameter.

Each canonical parameter is drawn from its own generator, seeded by the model seed and the
parameter's canonical name. So `post` and `pre`, or `fused` and `per_head`, built with one seed
start from identical weights wherever they have the same parameters: an ablation compares
architectures, not initial draws.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import torch
from torch import Tensor, nn

from zoo.model.canonical import canonical_entries, load_canonical_state


def parameter_seed(seed: int, name: str) -> int:
    digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def draw_seed() -> int:
    """One draw from torch's global generator, so torch.manual_seed makes builds reproducible."""
    return int(torch.randint(0, 2**62, (), dtype=torch.int64))


def _fill(name: str, tensor: Tensor, owner: nn.Module, generator: torch.Generator, gain: float) -> None:
    if isinstance(owner, nn.Embedding):
        nn.init.normal_(tensor, 0.0, getattr(owner, "init_std", 1.0), generator=generator)
    elif tensor.dim() >= 2:
        nn.init.xavier_uniform_(tensor, gain=gain, generator=generator)
    elif name.endswith("bias"):
        nn.init.zeros_(tensor)
    # other vectors (LayerNorm gains and the like) keep the value their module gave them


@torch.no_grad()
def initialize(model: nn.Module, seed: int, gain: Callable[[str], float] = lambda name: 1.0) -> None:
    """Draw every canonical parameter; matrices are Xavier-uniform scaled by `gain(name)`."""
    entries, seen = list(canonical_entries(model)), set()
    for name, tensor, owner in entries:
        if id(tensor) in seen:  # tied weights are drawn once, under their first name
            continue
        seen.add(id(tensor))
        _fill(name, tensor, owner, torch.Generator().manual_seed(parameter_seed(seed, name)), gain(name))
    load_canonical_state(model, {name: tensor for name, tensor, _ in entries})
