"""Mistral (Jiang et al. 2023) and Qwen3 (Qwen team 2025) as transformers' MistralForCausalLM and
Qwen3ForCausalLM hold them: Llama's layout (zoo.interop.llama), Mistral's with sliding-window
attention in every layer, Qwen3's with its queries and keys RMS-normalized per head before the
rotation (`qk_norm: rmsnorm`, one gain of head width shared by the heads)."""

from __future__ import annotations

from typing import Any

from torch import nn

from zoo.interop.hf import Family, register
from zoo.interop.llama import computed, layout_config, layout_fields, names
from zoo.specs.model_spec import ModelSpec

QK_NORM_EPS = 1e-6
"""The eps of the zoo's qk-norm (an RMSNorm part at its default)."""


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


def qwen3_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    windowed = set(c.layer_types or ["full_attention"])
    if windowed == {"full_attention"}:
        window = None
    elif windowed == {"sliding_attention"}:
        window = c.sliding_window
    else:
        raise ValueError("Qwen3 with sliding-window attention in some layers only (layer_types) has no zoo spec")
    if c.rms_norm_eps != QK_NORM_EPS:
        raise ValueError(f"Qwen3 rms_norm_eps {c.rms_norm_eps}: its qk-norm's eps is the zoo's {QK_NORM_EPS} only")
    return layout_fields(model) | {"window": window, "qk_norm": "rmsnorm"}


def qwen3_config(spec: ModelSpec):
    from transformers import Qwen3Config

    window = spec.attn.window
    return layout_config(spec, Qwen3Config, attention_bias=False, sliding_window=window,
                         use_sliding_window=window is not None, max_window_layers=0,
                         layer_types=["sliding_attention" if window else "full_attention"] * spec.n_decoder_layers)


def qwen3_names(spec: ModelSpec) -> dict[str, str]:
    table = names(spec)
    for i in range(spec.n_decoder_layers):
        table |= {f"decoder.layers.{i}.self_attn.{p}_norm.weight": f"model.layers.{i}.self_attn.{p}_norm.weight"
                  for p in "qk"}
    return table


FREE = ("attention", "pad_id", "dropout")
MISTRAL = register(Family("mistral", mistral, mistral_fields, mistral_config, names, computed, free=FREE))
QWEN3 = register(Family("qwen3", qwen3, qwen3_fields, qwen3_config, qwen3_names, computed, free=FREE))
