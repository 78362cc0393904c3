"""How a model is put together from its parts: the site each of its stacks is. zoo.parts declares
what parts are; this is where the model uses them."""

from __future__ import annotations

from zoo.parts import Site
from zoo.specs.model_spec import ModelSpec


def stack_sites(spec: ModelSpec) -> dict[str, Site]:
    """The site of each stack of the spec's model, by the stack's name in the model."""
    encoder, decoder = spec.depths
    sites = {"encoder": Site(False, encoder, decoder), "decoder": Site(True, encoder, decoder)}
    return {name: site for name, site in sites.items() if site.layers}

