"""Gemma (Gemma team 2024), Gemma 2 and Gemma 3's text model as transformers' GemmaForCausalLM,
Gemma2ForCausalLM and Gemma3ForCausalLM hold them: Llama's layout with embeddings scaled by
sqrt(d_model), a tanh-GELU gated feed-forward, RMSNorm gains stored as w and applied as 1 + w
(`unit_offset`) and tied output embeddings. Gemma 2 and 3 put a norm before and after each
sublayer (`sandwich`), scale scores by query_pre_attn_scalar (`scale_width`) and attend within a
sliding window in most layers: Gemma 2 in alternate layers, Gemma 3 in five of six, whose global
layers rotate at their own base. Both are one per-layer rule (zoo.specs.layer_rules). Gemma 2
soft-caps scores and logits; Gemma 3 RMS-normalizes queries and keys per head."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import register
from zoo.interop.llama import LLAMA, QK_NORMS, RENAMES, WEIGHTS
from zoo.interop.rotary import rope_base, rotary_buffers, rotary_buffers_by_layer_type
from zoo.interop.tables import writes
from zoo.interop.unread import refuse_unfit
from zoo.interop.windows import layer_types, sliding_window, window_fields
from zoo.specs.model_spec import ModelSpec

ACTIVATIONS = {"gelu_pytorch_tanh": "geglu_tanh", "gelu": "geglu"}
"""transformers' hidden_activation -> the zoo's gated feed-forward."""


def gemma_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    act = getattr(c, "hidden_activation", None) or c.hidden_act
    bias = getattr(c, "attention_bias", False)
    refuse_unfit(type(model).__name__, (act in ACTIVATIONS, "hidden_activation", act, ", ".join(ACTIVATIONS)),
                 (not bias, "attention_bias", bias, "false"))
    if getattr(c, "use_bidirectional_attention", False):
        raise InteropError(f"{type(model).__name__} with use_bidirectional_attention has no zoo spec")
    return RENAMES.read(c) | {
        "kind": "decoder", "head_width": c.head_dim, "norm": "pre",
        "position": {"name": "rope", "base": rope_base(c)}, "attention": "fused",
        "ffn": ACTIVATIONS[act], "norm_type": {"name": "rmsnorm", "eps": float(c.rms_norm_eps), "unit_offset": True},
        "final_norm": True, "scale_embeddings": True, "embedding_norm": False,
        "tie_embeddings": model.lm_head.weight is model.model.embed_tokens.weight, "output_bias": "none", "bias": False,
    }


def gemma2_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    return gemma_fields(model) | window_fields(c) | {
        "norm": "sandwich", "scale_width": float(c.query_pre_attn_scalar),
        "attn_softcap": c.attn_logit_softcapping, "logit_softcap": c.final_logit_softcapping}


def gemma3_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    rope = {kind: rope_base(c, c.rope_parameters[kind]) for kind in ("sliding_attention", "full_attention")}
    # transformers' Gemma 3 holds attn_logit_softcapping but never applies it (its attention takes no
    # softcap): the function it computes has none, whatever the configuration says
    fields = gemma2_fields(model) | {"qk_norm": "rmsnorm", "position": {"name": "rope", "base": rope["sliding_attention"]},
                                     "attn_softcap": None}
    if "layers" in fields:
        fields["layers"]["full"]["set"]["position"] = {"base": rope["full_attention"]}
    elif fields["window"] is None:
        fields["position"]["base"] = rope["full_attention"]
    return fields


def common_config(spec: ModelSpec) -> dict[str, Any]:
    activation = {zoo: hf for hf, zoo in ACTIVATIONS.items()}.get(spec.ffn.name)
    if activation is None or not spec.norm_type.name == "rmsnorm" or not spec.norm_type.unit_offset:
        raise InteropError("Gemma holds a geglu or geglu_tanh feed-forward and RMSNorm with unit_offset")
    return RENAMES.write(spec) | dict(
        head_dim=spec.d_head, rms_norm_eps=spec.norm_type.eps,
        hidden_activation=activation, tie_word_embeddings=spec.embeddings.tie)


def rope_of(spec: ModelSpec) -> dict[str, Any]:
    return {"rope_parameters": {"rope_type": "default", "rope_theta": base_of(spec, 0)}}


def base_of(spec: ModelSpec, index: int) -> float:
    position = spec.at_layer("decoder", index).position
    return position.base if position.name == "rope" else 10000.0


def windows_config(spec: ModelSpec, also: tuple[str, ...] = ()) -> dict[str, Any]:
    """What Gemma 2 and 3 add: windows by layer type, the scores' scale and soft caps."""
    return dict(sliding_window=sliding_window(spec), layer_types=layer_types(spec, also),
                query_pre_attn_scalar=integral(spec.attn.scale_width or spec.d_head),
                attn_logit_softcapping=spec.attn.softcap, final_logit_softcapping=spec.output.softcap)


def integral(width: float) -> int | float:
    """transformers' configurations hold query_pre_attn_scalar as an int where it is one."""
    return int(width) if float(width).is_integer() else width


def gemma3_config(spec: ModelSpec) -> dict[str, Any]:
    types = layer_types(spec, also=("position",))
    bases = {kind: {base_of(spec, i) for i, t in enumerate(types) if t == kind} for kind in set(types)}
    if any(len(values) > 1 for values in bases.values()):
        raise InteropError("Gemma 3 rotates its sliding and its full layers at one base each")
    rope = {kind: {"rope_type": "default", "rope_theta": next(iter(bases.get(kind, {10000.0})))}
            for kind in ("sliding_attention", "full_attention")}
    return windows_config(spec, also=("position",)) | {"rope_parameters": rope}


def computed(spec: ModelSpec) -> dict[str, Tensor]:
    scale = {"model.embed_tokens.embed_scale": torch.tensor(math.sqrt(spec.d_model))}
    return scale | rotary_buffers(spec, "model.rotary_emb")


def gemma3_computed(spec: ModelSpec) -> dict[str, Tensor]:
    return {"model.embed_tokens.embed_scale": torch.tensor(math.sqrt(spec.d_model))} | rotary_buffers_by_layer_type(
        spec, "decoder", "model.rotary_emb")


SANDWICH = WEIGHTS.derive(layer={
    "self_attn_residual.norm.*": "input_layernorm.*", "self_attn_residual.out_norm.*": "post_attention_layernorm.*",
    "ffn_residual.norm.*": "pre_feedforward_layernorm.*", "ffn_residual.out_norm.*": "post_feedforward_layernorm.*"})
"""Gemma 2 and 3's norms before and after each sublayer."""

GEMMA = register(LLAMA.derive("gemma", "GemmaForCausalLM", spec_fields=gemma_fields,
                              config=writes("GemmaConfig", common_config, rope_of), computed=computed))
GEMMA2 = register(LLAMA.derive("gemma2", "Gemma2ForCausalLM", spec_fields=gemma2_fields,
                               config=writes("Gemma2Config", common_config, rope_of, windows_config), names=SANDWICH,
                               computed=computed))
GEMMA3 = register(LLAMA.derive("gemma3", "Gemma3ForCausalLM", spec_fields=gemma3_fields,
                               config=writes("Gemma3TextConfig", common_config, gemma3_config),
                               names=SANDWICH.derive(layer=QK_NORMS), computed=gemma3_computed))
