"""`convert`: the same weights under a spec that differs only in weight-compatible fields.

A change is weight-compatible when the new model's canonical state (see zoo.model.canonical) has exactly
the keys and shapes of the old one, so every weight carries over and none is dropped: attention
per_head <-> fused (which keeps the function exactly), but also e.g. post <-> pre norm or relu <->
gelu (which keep the weights and change the function: useful for probing a trained model).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

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
        raise ConfigError(f"cannot convert ({described}): the change is not weight-compatible: {shown}"
                          f"{bias_way_out(changes, new_state.keys() - old_state.keys())}")
    reference = next(model.parameters())
    new = new.to(device=reference.device, dtype=reference.dtype)
    load_canonical_state(new, old_state)
    new.train(model.training)
    moved = function_change(model, new)
    if moved > FUNCTION_TOLERANCE:
        warnings.warn(f"convert ({described}) keeps every weight but changes the model's function: its logits move by "
                      f"up to {moved:.3g} on a probe batch (per_head <-> fused keeps it; a norm, position or "
                      "feed-forward change does not), so the converted model, and a to_hf export of it, is another "
                      "model until it is trained again", UserWarning, stacklevel=2)
    return new


FUNCTION_TOLERANCE = 1e-4
"""Logits that move by more than this on the probe batch are another function (float rounding of
a layout change stays below 1e-5)."""


def bias_way_out(changes: dict[str, Any], added: set[str]) -> str:
    """Where the new model's only extra weights are biases of a part named by its name alone (Llama
    has no bias, LayerNorm does by default): the setting that converts."""
    if not added or not all(name.endswith(".bias") for name in added):
        return ""
    named = [(field, value) for field, value in changes.items() if isinstance(value, str)]
    if not named:
        return ""
    ways = ", ".join(f"{field}={{'name': {value!r}, 'bias': False}}" for field, value in named)
    return f"; the added weights are biases the model lacks: {ways} converts without them"


@torch.no_grad()
def function_change(old: ZooModel, new: ZooModel) -> float:
    """The largest difference of the two models' logits on one seeded probe batch of ordinary ids,
    framed as the model's kind frames a task's batch."""
    spec = old.spec
    generator = torch.Generator().manual_seed(0)
    device = next(old.parameters()).device

    def probe(vocab: int, length: int) -> torch.Tensor:
        return torch.randint(min(3, vocab - 1), vocab, (2, length), generator=generator).to(device)

    was = old.training, new.training
    old.eval(), new.eval()
    try:
        inputs, _ = old.frame(spec, probe(spec.src_vocab_size, 6), probe(spec.tgt_vocab_size, 5))
        return float((old(*inputs) - new(*inputs)).abs().max())
    finally:
        old.train(was[0]), new.train(was[1])
