"""Deterministic initialization, the same for every variant that shares a parameter.

Each canonical parameter is drawn from its own generator, seeded by the model seed and the
parameter's canonical name. So `post` and `pre`, or `fused` and `per_head`, built with one seed
start from identical weights wherever they have the same parameters: an ablation compares
architectures, not initial draws.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn

from zoo.errors import ConfigError
from zoo.model.canonical import canonical_entries, load_canonical_state
from zoo.parts import Site
from zoo.roles import TABLES, HoldsWeights, Role


def parameter_seed(seed: int, name: str) -> int:
    digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def draw_seed() -> int:
    """One draw from torch's global generator, so torch.manual_seed makes builds reproducible."""
    return int(torch.randint(0, 2**62, (), dtype=torch.int64))


class Placed(NamedTuple):
    """What initialization knows of a weight: its role (None where its part declares none), the
    std of a table, and the site of its stack (None outside the stacks)."""

    role: Role | None
    std: float
    site: Site | None


def placements(model: nn.Module, entries: list[tuple[str, Tensor, nn.Module]], sites: dict[str, Site]) -> dict[str, Placed]:
    """Each canonical weight's role, from the innermost part that holds it and declares roles
    (zoo.roles.HoldsWeights). A declaring part must give every matrix it holds a role, and each
    role it declares must name a weight it holds: a renamed attribute fails here, loudly."""
    parts = {f"{prefix}." if prefix else "": module for prefix, module in model.named_modules()
             if isinstance(module, HoldsWeights)}
    owned: dict[str, list[str]] = {prefix: [] for prefix in parts}
    out = {}
    for name, tensor, _ in entries:
        prefix = max((p for p in parts if name.startswith(p)), key=len, default=None)
        site = sites.get(name.split(".", 1)[0])
        if prefix is None:
            out[name] = Placed(None, 1.0, site)
            continue
        part, local = parts[prefix], name[len(prefix):]
        owned[prefix].append(local)
        role = part.weight_roles.get(local)
        if role is None and tensor.dim() >= 2 and part.weight_roles:
            raise ConfigError(f"{type(part).__name__} at {prefix[:-1]} holds {local} but declares no role for it "
                              f"(weight_roles: {sorted(part.weight_roles)})")
        out[name] = Placed(role, part.init_std, site)
    for prefix, part in parts.items():
        missing = sorted(set(part.weight_roles) - set(owned[prefix]))
        if missing:
            raise ConfigError(f"{type(part).__name__} at {prefix[:-1] or 'the model'} declares roles for {missing}, "
                              f"which it does not hold (its weights: {sorted(owned[prefix])})")
    return out


def _fill(name: str, tensor: Tensor, owner: nn.Module, placed: Placed, generator: torch.Generator,
          gain: Callable[[Role | None, Site | None], float]) -> None:
    if placed.role in TABLES or (placed.role is None and isinstance(owner, nn.Embedding)):
        nn.init.normal_(tensor, 0.0, placed.std, generator=generator)
    elif tensor.dim() >= 2:
        nn.init.xavier_uniform_(tensor, gain=gain(placed.role, placed.site), generator=generator)
    elif name.endswith("bias"):
        nn.init.zeros_(tensor)
    # other vectors (LayerNorm gains and the like) keep the value their module gave them


@torch.no_grad()
def initialize(model: nn.Module, seed: int, sites: dict[str, Site],
               gain: Callable[[Role | None, Site | None], float] = lambda role, site: 1.0) -> None:
    """Draw every canonical parameter: tables from a normal of their part's init_std, matrices
    Xavier-uniform scaled by `gain(role, site)`, biases at zero."""
    entries, seen = list(canonical_entries(model)), set()
    placed = placements(model, entries, sites)
    for name, tensor, owner in entries:
        if id(tensor) in seen:  # tied weights are drawn once, under their first name
            continue
        seen.add(id(tensor))
        generator = torch.Generator().manual_seed(parameter_seed(seed, name))
        _fill(name, tensor, owner, placed[name], generator, gain)
    load_canonical_state(model, {name: tensor for name, tensor, _ in entries})
