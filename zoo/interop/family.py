"""What a family of transformers' models is to the zoo: a record of data (its reference class by
name, its configuration's fields, its weight table) with functions only where a family does more
than rename, registered in FAMILIES. `derive` makes a family that differs from another in a few rows
(Mistral, Qwen, OLMo 2, Gemma and Phi-3 from Llama's layout)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from zoo.errors import ConfigError
from zoo.specs.model_spec import ModelSpec


@dataclass(frozen=True)
class Family:
    name: str
    transformers: str
    """The reference's class in transformers, by name: imported only when asked, so transformers
    stays optional (`reference()`)."""
    spec_fields: Callable[[nn.Module], dict[str, Any]]
    """The spec of a reference model (its configuration, and which of its weights are one tensor)."""
    config: Callable[[ModelSpec], Any]
    """The reference configuration of a spec, taking what the family can express."""
    names: Callable[[ModelSpec], dict[str, str]]
    """Zoo canonical name -> reference parameter or buffer name (a zoo.interop.tables.Weights)."""
    computed: Callable[[ModelSpec], dict[str, Tensor]] = lambda spec: {}
    """Reference tensors that are not trained but computed, with the values the zoo computes."""
    free: tuple[str, ...] = field(default=("attention",))
    """Spec fields the family leaves open (any attention layout computes the same function)."""
    views: Callable[[ModelSpec, dict[str, Tensor]], dict[str, tuple[Tensor, str]]] = lambda spec, tensors: {}
    """Named views of reference tensors (a slice, a transpose) -> (view, the tensor's name), which
    the table may name: reading and writing them reads and writes the reference's own tensor."""
    preset: str = ""
    """The zoo preset that is this family's architecture at a published size; "" for the family's
    own name (gpt_neox's is pythia, t5's t5-v1_1: the layout T5 and mT5 share today)."""

    @property
    def preset_name(self) -> str:
        return self.preset or self.name

    def reference(self) -> type:
        """The reference class: the one loader of every family."""
        try:
            import transformers
        except ImportError as err:
            raise ConfigError(f"{self.name} needs transformers ({err}): pip install 'zoo[hf]'") from err
        try:
            return getattr(transformers, self.transformers)
        except AttributeError as err:
            raise ConfigError(f"{self.name} needs transformers' {self.transformers}, which transformers "
                              f"{transformers.__version__} lacks: pip install -U 'zoo[hf]'") from err

    def derive(self, name: str, transformers: str, **changes: Any) -> Family:
        """A family that is this one but for `changes` (its preset is its own name unless given)."""
        return dataclasses.replace(self, name=name, transformers=transformers, **{"preset": "", **changes})


FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Add a family by its name; a second family of a name is refused, as a second part of a name
    is: replacing the first in silence changed what from_hf and to_hf did for every model of it."""
    taken = FAMILIES.get(family.name)
    if taken is not None:
        raise ConfigError(f"family {family.name!r} is already registered (transformers' {taken.transformers}); "
                          "pick another name, or derive the family under a name of its own")
    FAMILIES[family.name] = family
    return family


def family_of(model: nn.Module) -> Family:
    classes = {cls.__name__ for cls in type(model).__mro__}
    for family in FAMILIES.values():
        if family.transformers in classes:
            return family
    supported = ", ".join(sorted(family.transformers for family in FAMILIES.values()))
    raise ConfigError(f"from_hf takes {supported}; got {type(model).__name__}")
