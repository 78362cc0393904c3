"""`convert`: the same weights under a spec that differs only in weight-compatible fields.

A change is weight-compatible when the new model's canonical state (see zoo.model.canonical) has exactly
the keys and shapes of the old one, so every weight carries over and none is dropped: attention
per_head <-> fused (which keeps the function exactly), but also e.g. post <-> pre norm or relu <->
gelu (which keep the weights and change the function: useful for probing a trained model).
"""

from __future__ import annotations

from typing import Any

from zoo.errors import ConfigError
from zoo.model.canonical import canonical_state, load_canonical_state
from zoo.model.kinds import ZooModel, build
from zoo.specs.catalog import resolve
from zoo.specs.switches import flat_fields


def convert(model: ZooModel, **changes: Any) -> ZooModel:
    """A new model with `changes` applied to the spec and every weight of `model` carried over."""
    old_spec = model.spec
    new_spec = resolve(old_spec, **changes)
    old_fields, new_fields = flat_fields(old_spec.model_dump()), flat_fields(new_spec.model_dump())
    changed = {field: (old, new_fields[field]) for field, old in old_fields.items() if old != new_fields[field]}
    described = ", ".join(f"{field} {old!r} -> {new!r}" for field, (old, new) in changed.items()) or "nothing"
    for tying in ("tie_embeddings", "share_embeddings"):
        if tying in changed:
            raise ConfigError(f"cannot convert ({described}): tying or untying embeddings ({tying}) drops or invents weights")
    new = build(new_spec, seed=0)
    old_state, new_state = canonical_state(model), canonical_state(new)
    problems = [f"{name} is missing from the new model" for name in old_state.keys() - new_state.keys()]
    problems += [f"{name} has no weight in the original model" for name in new_state.keys() - old_state.keys()]
    problems += [
        f"{name} changes shape {tuple(old_state[name].shape)} -> {tuple(tensor.shape)}"
        for name, tensor in new_state.items()
        if name in old_state and old_state[name].shape != tensor.shape
    ]
    if problems:
        shown = "; ".join(sorted(problems)[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        raise ConfigError(f"cannot convert ({described}): the change is not weight-compatible: {shown}")
    reference = next(model.parameters())
    new = new.to(device=reference.device, dtype=reference.dtype)
    load_canonical_state(new, old_state)
    return new.train(model.training)
