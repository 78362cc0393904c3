"""What each weight of a part is for. Initialization rules that treat weights differently
(DeepNorm's beta, Fixup's zeroed last layers, T5's query scale, the std of a table) are written
against these roles, which the parts declare, never against attribute names: renaming a weight
of a part that declares roles is an error at build time, not a silent change of its draw."""

from __future__ import annotations

from typing import Literal

Role = Literal[
    "attention.query", "attention.key", "attention.value", "attention.output", "attention.position_bias",
    "ffn.input", "ffn.gate", "ffn.output", "ffn.router",
    "embedding.tokens", "embedding.projection", "embedding.positions", "embedding.types",
    "output.projection", "output.transform",
]

TABLES: frozenset[str] = frozenset({"embedding.tokens", "embedding.positions", "embedding.types",
                                    "attention.position_bias"})
"""Roles of lookup tables, drawn from a normal of the declaring part's `init_std`; every other
matrix is drawn Xavier-uniform with the gain of its role."""


class HoldsWeights:
    """A part that declares the role of each matrix and table it holds (a mixin of nn.Modules).

    `weight_roles` maps the weight's canonical name within the part (`linear1.weight`, or `q.weight`
    for attention, whose canonical state is per projection) to its role; a part may set it in
    its class or, where its weights depend on the spec, in __init__. Every matrix the part holds
    (outside parts of its own) must have a role, and every role must name a weight it holds. A
    part that declares none (a plugin written against the Protocols) has its matrices drawn
    with gain 1 and its tables with std 1."""

    weight_roles: dict[str, Role] = {}  # noqa: RUF012 (never mutated: a part replaces it whole)
    init_std: float = 1.0
    """The std of the normal initial draw of the part's tables."""
