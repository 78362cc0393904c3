"""muP's per-parameter learning rates for Adam (Yang et al. 2022, Table 3 with the output
multiplier of zoo.specs.parametrization): a matrix whose fan-in grows with width trains at the
base rate times 1/m; tables, the output projection (whose logits the output multiplier scales),
vectors and scalars train at the base rate. Roles (zoo.roles) say which matrix is which, so a
renamed weight cannot slip into another class."""

from __future__ import annotations

from torch import nn

from zoo.roles import TABLES, HoldsWeights
from zoo.specs.parametrization import is_mup, width_multiplier

BASE_RATE_ROLES = TABLES | {"output.projection"}
"""Matrices trained at the base rate under muP: lookup tables (input weights) and the output projection."""


def declared_roles(model: nn.Module) -> dict[int, str]:
    """The role of each parameter a part declares one for, by the parameter's id (per-head layouts
    declare canonical names that are not parameters: those are hidden matrices, as undeclared ones)."""
    roles = {}
    for module in model.modules():
        if isinstance(module, HoldsWeights):
            for local, role in module.weight_roles.items():
                try:
                    roles.setdefault(id(module.get_parameter(local)), role)
                except AttributeError:
                    continue
    return roles


def rate_multipliers(model: nn.Module) -> list[float]:
    """Each of model.parameters()'s learning-rate multipliers: 1 everywhere under the standard
    parametrization; under muP 1/m for matrices outside BASE_RATE_ROLES."""
    parameters = list(model.parameters())
    if not is_mup(model.spec):
        return [1.0] * len(parameters)
    roles, hidden = declared_roles(model), 1.0 / width_multiplier(model.spec)
    tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    return [1.0 if p.dim() < 2 or id(p) in tables or roles.get(id(p)) in BASE_RATE_ROLES else hidden
            for p in parameters]
