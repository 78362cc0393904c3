"""Families of Llama's layout (zoo.interop.llama), each Llama's record but for a few rows:

- Mistral (Jiang et al. 2023): sliding-window attention in every layer.
- Qwen2 and Qwen3 (Qwen team 2024, 2025): windows by `layer_types`; Qwen2 biases its query, key and
  value projections, Qwen3 RMS-normalizes queries and keys per head before the rotation (`qk_norm:
  rmsnorm`, one gain of head width shared by the heads).
- OLMo 2 (OLMo team 2024): queries and keys normalized over the whole projection (`qk_norm_scope:
  projection`) and its norms on each sublayer's output (`res_post`: x + RMSNorm(F(x))).
- Phi-3 (Abdin et al. 2024): q, k and v packed in one projection (split by head counts), the gate
  and up projections in another, rotary positions on part of each head where it says so."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import register
from zoo.interop.llama import LLAMA, QK_NORMS, RENAMES, WEIGHTS, layout_config, layout_fields
from zoo.interop.rotary import rope_config, rope_fields
from zoo.interop.tables import reads, split_views, writes
from zoo.interop.windows import layer_types, sliding_window, window_fields
from zoo.specs.model_spec import ModelSpec


def one_window(model: nn.Module) -> dict[str, Any]:
    return {"window": model.config.sliding_window}


def one_window_config(spec: ModelSpec) -> dict[str, Any]:
    return {"sliding_window": spec.attn.window}


def windows_by_layer(model: nn.Module) -> dict[str, Any]:
    return window_fields(model.config)


def windows_by_layer_config(spec: ModelSpec) -> dict[str, Any]:
    window = sliding_window(spec)
    return dict(sliding_window=window, use_sliding_window=window is not None, max_window_layers=0,
                layer_types=layer_types(spec))


def qkv_biases(spec: ModelSpec) -> dict[str, Any]:
    """Qwen2's configuration has no switch for its biases: a spec without them is refused at once."""
    if not spec.qkv_bias or spec.out_bias:
        raise InteropError("Qwen2 holds biases on its query, key and value projections and none on the output's")
    return {}


MISTRAL = register(LLAMA.derive(
    "mistral", "MistralForCausalLM", spec_fields=reads(layout_fields, one_window),
    config=writes("MistralConfig", layout_config, one_window_config)))

QWEN2 = register(LLAMA.derive(
    "qwen2", "Qwen2ForCausalLM", spec_fields=reads(layout_fields, windows_by_layer, qkv_bias=True),
    config=writes("Qwen2Config", qkv_biases, layout_config, windows_by_layer_config),
    names=WEIGHTS.derive(layer={"self_attn.{p}.bias": "self_attn.{p}_proj.bias"})))

QWEN3 = register(LLAMA.derive(
    "qwen3", "Qwen3ForCausalLM", spec_fields=reads(layout_fields, windows_by_layer, qk_norm="rmsnorm"),
    config=writes("Qwen3Config", layout_config, windows_by_layer_config, attention_bias=False),
    names=WEIGHTS.derive(layer=QK_NORMS)))

OLMO2 = register(LLAMA.derive(
    "olmo2", "Olmo2ForCausalLM",
    spec_fields=reads(layout_fields, norm="res_post", qk_norm="rmsnorm", qk_norm_scope="projection"),
    config=writes("Olmo2Config", layout_config, attention_bias=False),
    names=WEIGHTS.derive(layer={**QK_NORMS, "self_attn_residual.norm.*": "post_attention_layernorm.*",
                                "ffn_residual.norm.*": "post_feedforward_layernorm.*"})))


PHI3_RENAMES = RENAMES.derive(dropouts={"residual": "resid_pdrop", "attention": "attention_dropout"})
"""Phi-3 drops sublayer outputs too; its embd_pdrop it never applies."""


def phi3_fields(model: nn.Module) -> dict[str, Any]:
    return PHI3_RENAMES.read(model.config) | rope_fields(model.config) | one_window(model)


def phi3_config(spec: ModelSpec) -> dict[str, Any]:
    return PHI3_RENAMES.write(spec) | rope_config(spec) | one_window_config(spec)


def phi3_views(spec: ModelSpec, tensors: dict[str, Tensor]) -> dict[str, tuple[Tensor, str]]:
    """Each layer's packed projections: q, k, v by their head counts, and the gate before the up."""
    q, kv, width = spec.n_heads * spec.d_head, spec.kv_heads * spec.d_head, spec.ffn_width
    views = {}
    for i in range(spec.n_decoder_layers):
        views |= split_views(tensors, f"model.layers.{i}.self_attn.qkv_proj.weight", {"q": q, "k": kv, "v": kv})
        views |= split_views(tensors, f"model.layers.{i}.mlp.gate_up_proj.weight", {"gate": width, "up": width})
    return views


PHI3 = register(LLAMA.derive(
    "phi3", "Phi3ForCausalLM", spec_fields=reads(layout_fields, phi3_fields),
    config=writes("Phi3Config", lambda spec: layout_config(spec, head_dim=False), phi3_config),
    names=WEIGHTS.derive(layer={"self_attn.{p}.*": "self_attn.qkv_proj.*:{p}", "ffn.gate.*": "mlp.gate_up_proj.*:gate",
                                "ffn.linear1.*": "mlp.gate_up_proj.*:up"}), views=phi3_views))
