"""A model's weights in canonical form: the state dict that every variant of an axis shares.

Parts that hold their weights in a layout of their own (attention: packed or per head) expose
`canonical_state()` / `load_canonical_state()`; every other parameter is taken as it is. Two
models whose canonical states have the same keys and shapes can exchange weights exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from zoo.specs.hooks import implements


@runtime_checkable
class CanonicalLayout(Protocol):
    """A part that holds its weights in a layout of its own and gives and takes them in the
    canonical one (attention: packed or per head, canonical q, k, v, out)."""

    def canonical_state(self) -> dict[str, Tensor]: ...
    def load_canonical_state(self, state: dict[str, Tensor]) -> None: ...


def canonical_entries(model: nn.Module, prefix: str = "") -> Iterator[tuple[str, Tensor, nn.Module]]:
    """(name, tensor, owning module) in module order. Canonical parts give fresh tensors."""
    if implements(model, CanonicalLayout):
        for name, tensor in model.canonical_state().items():
            yield prefix + name, tensor, model
        return
    for name, param in model.named_parameters(recurse=False):
        yield prefix + name, param, model
    for name, child in model.named_children():
        yield from canonical_entries(child, f"{prefix}{name}.")


def canonical_state(model: nn.Module) -> dict[str, Tensor]:
    return {name: tensor for name, tensor, _ in canonical_entries(model)}


@torch.no_grad()
def load_canonical_state(model: nn.Module, state: dict[str, Tensor], prefix: str = "") -> None:
    """Copy a canonical state into the model; every key of the model must be in `state`."""
    if implements(model, CanonicalLayout):
        own = {name[len(prefix):]: t for name, t in state.items() if name.startswith(prefix)}
        model.load_canonical_state(own)
        return
    for name, param in model.named_parameters(recurse=False):
        source = state[prefix + name]
        if source is not param:
            param.copy_(source)
    for name, child in model.named_children():
        load_canonical_state(child, state, f"{prefix}{name}.")
