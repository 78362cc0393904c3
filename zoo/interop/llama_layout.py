"""Mistral (Jiang et al. 2023), Qwen3 (Qwen team 2025) and OLMo 2 (OLMo team 2024) as transformers'
MistralForCausalLM, Qwen3ForCausalLM and Olmo2ForCausalLM hold them: Llama's layout
(zoo.interop.llama), Mistral's with sliding-window attention in every layer, Qwen3's with its
queries and keys RMS-normalized per head before the rotation (`qk_norm: rmsnorm`, one gain of head
width shared by the heads), OLMo 2's normalized over the whole projection (`qk_norm_scope:
projection`) and its norms on each sublayer's output (`res_post`: x + RMSNorm(F(x)))."""

from __future__ import annotations

from typing import Any

from torch import nn

from zoo.errors import InteropError
from zoo.interop.hf import Family, register
from zoo.interop.llama import computed, layout_config, layout_fields, names
from zoo.specs.layer_rules import selecting
from zoo.specs.model_spec import ModelSpec


def mistral() -> type:
    from transformers import MistralForCausalLM

    return MistralForCausalLM


def qwen3() -> type:
    from transformers import Qwen3ForCausalLM

    return Qwen3ForCausalLM


def mistral_fields(model: nn.Module) -> dict[str, Any]:
    return layout_fields(model) | {"window": model.config.sliding_window}


def mistral_config(spec: ModelSpec):
    from transformers import MistralConfig

    return layout_config(spec, MistralConfig, sliding_window=spec.attn.window)


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


def qwen3_fields(model: nn.Module) -> dict[str, Any]:
    return layout_fields(model) | window_fields(model.config) | {"qk_norm": "rmsnorm"}


def qwen3_config(spec: ModelSpec):
    from transformers import Qwen3Config

    window = sliding_window(spec)
    return layout_config(spec, Qwen3Config, attention_bias=False, sliding_window=window,
                         use_sliding_window=window is not None, max_window_layers=0, layer_types=layer_types(spec))


def qwen2() -> type:
    from transformers import Qwen2ForCausalLM

    return Qwen2ForCausalLM


def qwen2_fields(model: nn.Module) -> dict[str, Any]:
    return layout_fields(model) | window_fields(model.config) | {"qkv_bias": True}


def qwen2_config(spec: ModelSpec):
    from transformers import Qwen2Config

    if not spec.qkv_bias or spec.out_bias:
        raise InteropError("Qwen2 holds biases on its query, key and value projections and none on the output's")
    window = sliding_window(spec)
    return layout_config(spec, Qwen2Config, sliding_window=window, use_sliding_window=window is not None,
                         max_window_layers=0, layer_types=layer_types(spec))


def qwen2_names(spec: ModelSpec) -> dict[str, str]:
    return names(spec) | {f"decoder.layers.{i}.self_attn.{p}.bias": f"model.layers.{i}.self_attn.{p}_proj.bias"
                          for i in range(spec.n_decoder_layers) for p in "qkv"}


def qwen3_names(spec: ModelSpec) -> dict[str, str]:
    table = names(spec)
    for i in range(spec.n_decoder_layers):
        table |= {f"decoder.layers.{i}.self_attn.{p}_norm.weight": f"model.layers.{i}.self_attn.{p}_norm.weight"
                  for p in "qk"}
    return table


def olmo2() -> type:
    from transformers import Olmo2ForCausalLM

    return Olmo2ForCausalLM


def olmo2_fields(model: nn.Module) -> dict[str, Any]:
    return layout_fields(model) | {"norm": "res_post", "qk_norm": "rmsnorm", "qk_norm_scope": "projection"}


def olmo2_config(spec: ModelSpec):
    from transformers import Olmo2Config

    return layout_config(spec, Olmo2Config, attention_bias=False)


def olmo2_names(spec: ModelSpec) -> dict[str, str]:
    """OLMo 2's norms follow their sublayers: post_attention_layernorm is the attention's output norm."""
    table = qwen3_names(spec)
    for i in range(spec.n_decoder_layers):
        zoo, ref = f"decoder.layers.{i}", f"model.layers.{i}"
        del table[f"{zoo}.self_attn_residual.norm.weight"]
        table |= {f"{zoo}.self_attn_residual.norm.weight": f"{ref}.post_attention_layernorm.weight",
                  f"{zoo}.ffn_residual.norm.weight": f"{ref}.post_feedforward_layernorm.weight"}
    return table


FREE = ("attention", "pad_id")
MISTRAL = register(Family("mistral", mistral, mistral_fields, mistral_config, names, computed, free=FREE))
OLMO2 = register(Family("olmo2", olmo2, olmo2_fields, olmo2_config, olmo2_names, computed, free=FREE))
QWEN2 = register(Family("qwen2", qwen2, qwen2_fields, qwen2_config, qwen2_names, computed, free=FREE))
QWEN3 = register(Family("qwen3", qwen3, qwen3_fields, qwen3_config, qwen3_names, computed, free=FREE))
