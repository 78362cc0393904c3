"""Rotary positions as transformers' configurations hold them (rope_parameters, or rope_theta in
older ones) and the frequency tables its models keep as buffers, which the zoo computes, never trains."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from zoo.errors import InteropError
from zoo.specs.model_spec import ModelSpec


def rope_base(c, parameters: dict[str, Any] | None = None) -> float:
    """The rotary base of configuration `c`, or of `parameters` (one layer type's, Gemma 3, ModernBERT)."""
    parameters = parameters if parameters is not None else getattr(c, "rope_parameters", None) or {}
    if parameters.get("rope_type", "default") != "default":
        raise InteropError(f"rope_type {parameters['rope_type']!r} (scaled rotary positions) has no zoo spec")
    return float(parameters.get("rope_theta", getattr(c, "rope_theta", 10000.0)))


def rope_fields(c, **settings: Any) -> dict[str, Any]:
    """The spec's `position` of configuration `c`: its base, the fraction of each head it rotates
    (partial_rotary_factor) and the family's own `settings` (a layout)."""
    fraction = float((getattr(c, "rope_parameters", None) or {}).get("partial_rotary_factor", 1.0))
    return {"position": {"name": "rope", "base": rope_base(c), "fraction": fraction, **settings}}


def rope_config(spec: ModelSpec, fraction: bool = True) -> dict[str, Any]:
    """The rope_parameters of a spec (their defaults where it has no rotary positions), with the
    fraction rotated where the family's configuration has one."""
    rope = spec.position.name == "rope"
    parameters = {"rope_type": "default", "rope_theta": spec.position.base if rope else 10000.0}
    if fraction:
        parameters["partial_rotary_factor"] = spec.position.fraction if rope else 1.0
    return {"rope_parameters": parameters}


def rotary_buffers(spec: ModelSpec, module: str) -> dict[str, Tensor]:
    """The rotary frequencies a reference keeps as buffers of `module` (over the rotated width); the
    zoo computes the same ones."""
    rope = spec.position.name == "rope"
    width = int(spec.d_head * spec.position.fraction) if rope else spec.d_head
    base = spec.position.base if rope else 10000.0
    frequency = (1.0 / base ** (torch.arange(0, width, 2, dtype=torch.float64) / width)).float()
    return {f"{module}.inv_freq": frequency, f"{module}.original_inv_freq": frequency}


def rotary_buffers_by_layer_type(spec: ModelSpec, stack: str, module: str) -> dict[str, Tensor]:
    """The rotary frequencies a reference keeps per layer type (Gemma 3, ModernBERT): those of a
    global layer as `full_attention_*`, of a windowed one as `sliding_attention_*` (the first layer's
    where the stack has no layer of that type)."""
    layers = [spec.at_layer(stack, i) for i in range(spec.depths[stack == "decoder"])]
    out = {}
    for kind, windowed in (("full_attention", False), ("sliding_attention", True)):
        layer = next((layer for layer in layers if (layer.attn.window is not None) == windowed), layers[0])
        out |= {name.replace(f"{module}.", f"{module}.{kind}_"): tensor
                for name, tensor in rotary_buffers(layer, module).items()}
    return out
