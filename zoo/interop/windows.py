"""Sliding windows as transformers' configurations hold them: one `sliding_window` for every layer
(Mistral, Phi-3), or `layer_types` naming each layer's attention (Qwen 2/3, Gemma 2/3), which the
zoo holds as a window and a per-layer rule naming the layers of full attention."""

from __future__ import annotations

from typing import Any

from zoo.errors import InteropError
from zoo.specs.layer_rules import selecting
from zoo.specs.model_spec import ModelSpec


def window_fields(c) -> dict[str, Any]:
    """A configuration's sliding windows (`layer_types`, `sliding_window`) as the zoo holds them: one
    window for every layer, or a window and a per-layer rule naming the layers of full attention."""
    types = list(getattr(c, "layer_types", None) or ["full_attention"] * c.num_hidden_layers)
    unknown = sorted(set(types) - {"full_attention", "sliding_attention"})
    if unknown:
        raise InteropError(f"layer_types {unknown} have no zoo spec; the zoo reads full_attention and sliding_attention")
    full = [i for i, kind in enumerate(types) if kind == "full_attention"]
    if len(full) == len(types):
        return {"window": None}
    rule = {**selecting(full, len(types)), "set": {"window": None}}
    return {"window": c.sliding_window} | ({"layers": {"full": rule}} if full else {})


def layer_types(spec: ModelSpec, also: tuple[str, ...] = ()) -> list[str]:
    """The layer_types of a spec whose layers differ in their window alone (one window where they
    have one), or in the fields `also` names too (Gemma 3's rope base)."""
    layers = [spec.at_layer("decoder", i) for i in range(spec.n_decoder_layers)]
    distinct = list({id(layer): layer for layer in layers}.values())  # at_layer gives one spec per kind of layer
    windows = {layer.attn.window for layer in distinct} - {None}
    same = {"window": spec.attn.window, "layers": {}} | {field: getattr(spec, field) for field in also}
    plain = spec.replace(layers={})
    if len(windows) > 1 or any(layer.replace(**same) != plain for layer in distinct):
        raise InteropError(f"a model whose layers differ in more than {' and '.join(('having a window or none', *also))} "
                           "has no layer_types")
    return ["sliding_attention" if layer.attn.window else "full_attention" for layer in layers]


def sliding_window(spec: ModelSpec) -> int | None:
    windows = {spec.at_layer("decoder", i).attn.window for i in range(spec.n_decoder_layers)} - {None}
    return next(iter(windows), None)
