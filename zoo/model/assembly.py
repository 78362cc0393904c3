"""How a model is put together from its parts: the site each of its stacks is, and how a block's
sublayers combine. zoo.parts declares what parts are; this is where the model uses them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import Tensor

from zoo.parts import Site, Step
from zoo.specs.model_spec import ModelSpec


def stack_sites(spec: ModelSpec) -> dict[str, Site]:
    """The site of each stack of the spec's model, by the stack's name in the model."""
    encoder, decoder = spec.depths
    sites = {"encoder": Site(False, encoder, decoder), "decoder": Site(True, encoder, decoder)}
    return {name: site for name, site in sites.items() if site.layers}


def compose_sublayers(x: Tensor, steps: Sequence[Step], compose: Callable | None = None) -> Tensor:
    """A block's sublayers as its placement's `compose` combines them (Composes), or in turn."""
    if compose is not None:
        return compose(x, steps)
    for part, sublayer in steps:
        x = part(x, sublayer)
    return x
