"""Llama (Touvron et al. 2023) as transformers' LlamaForCausalLM holds it: a decoder-only pre-norm
stack with RMSNorm, rotary positions (the half-split pairing, rope_theta), SwiGLU (or the gated
feed-forward its hidden_act names: gelu is GEGLU), grouped-query attention and no biases. Like
GPT-2 it has no pad token: give `from_hf(model, pad_id=...)` or set the configuration's pad_token_id."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.hf import ACTIVATIONS, Family, dropout_fields, register
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec


def reference() -> type:
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM


GATED = {"swish": "swiglu", "gelu": "geglu", "gelu_tanh": "geglu_tanh", "relu": "reglu"}
"""The zoo's activation (zoo.interop.hf.ACTIVATIONS of hidden_act) -> the gated feed-forward of
Llama's MLP, down(act(gate(x)) * up(x)), with that activation on the gate."""
GATED_ACT = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_pytorch_tanh", "reglu": "relu"}
"""The hidden_act that to_hf writes for each gated feed-forward."""


def rope_base(c, parameters: dict[str, Any] | None = None) -> float:
    """The rotary base of configuration `c`, or of `parameters` (one layer type's, Gemma 3, ModernBERT)."""
    parameters = parameters if parameters is not None else getattr(c, "rope_parameters", None) or {}
    if parameters.get("rope_type", "default") != "default":
        raise InteropError(f"rope_type {parameters['rope_type']!r} (scaled rotary positions) has no zoo spec")
    return float(parameters.get("rope_theta", getattr(c, "rope_theta", 10000.0)))


def layout_fields(model: nn.Module) -> dict[str, Any]:
    """The spec of a model of Llama's layout (Llama, Mistral, Qwen3): what their configurations share."""
    c = model.config
    ffn = GATED.get(ACTIVATIONS.get(c.hidden_act, ""))
    refuse_unfit(type(model).__name__, *((not getattr(c, name, False), name, getattr(c, name, False), "false")
                                         for name in ("attention_bias", "mlp_bias")),
                 (ffn is not None, "hidden_act", c.hidden_act, f"{', '.join(GATED_ACT.values())}: the gate's activation"))
    fields = {
        "kind": "decoder", "vocab_size": c.vocab_size, "d_model": c.hidden_size, "n_heads": c.num_attention_heads,
        "n_kv_heads": c.num_key_value_heads, "head_width": getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        "d_ff": c.intermediate_size, "n_decoder_layers": c.num_hidden_layers,
        **dropout_fields(0.0, c.attention_dropout),
        "max_len": c.max_position_embeddings, "bos_id": c.bos_token_id, "eos_id": c.eos_token_id,
        "norm": "pre", "position": {"name": "rope", "base": rope_base(c)}, "attention": "fused", "ffn": ffn,
        "norm_type": {"name": "rmsnorm", "eps": float(c.rms_norm_eps)}, "final_norm": True,
        "scale_embeddings": False, "embedding_norm": False, "tie_embeddings": model.lm_head.weight is
        model.model.embed_tokens.weight, "output_bias": "none", "bias": False,
    }
    return fields | {"pad_id": c.pad_token_id}  # None: from_hf asks for one


def spec_fields(model: nn.Module) -> dict[str, Any]:
    return layout_fields(model)


def layout_config(spec: ModelSpec, config_class: type, **extra: Any):
    """The configuration of a model of Llama's layout: `config_class` with what they share, and `extra`."""
    rope = spec.position.base if spec.position.name == "rope" else 10000.0
    if spec.ffn.name not in GATED_ACT:
        raise InteropError(f"feed-forward {spec.ffn.name}: {config_class.__name__[:-6]}'s MLP is gated by one of "
                           f"{', '.join(GATED_ACT)}")
    return config_class(hidden_act=GATED_ACT[spec.ffn.name],
        vocab_size=spec.tgt_vocab_size, hidden_size=spec.d_model, intermediate_size=spec.ffn_width,
        num_hidden_layers=spec.n_decoder_layers, num_attention_heads=spec.n_heads, num_key_value_heads=spec.kv_heads,
        head_dim=spec.d_head, max_position_embeddings=spec.max_len, attention_dropout=spec.dropout_at("attention"),
        rms_norm_eps=spec.norm_type.eps if spec.norm_type.name == "rmsnorm" else 1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": rope}, tie_word_embeddings=spec.embeddings.tie,
        bos_token_id=spec.bos_id, eos_token_id=spec.eos_id, pad_token_id=spec.pad_id, **extra,
    )


def config(spec: ModelSpec):
    from transformers import LlamaConfig

    return layout_config(spec, LlamaConfig)


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


def computed(spec: ModelSpec) -> dict[str, Tensor]:
    return rotary_buffers(spec, "model.rotary_emb")


def names(spec: ModelSpec) -> dict[str, str]:
    table = {"decoder.embed.tokens.weight": "model.embed_tokens.weight", "generator.weight": "lm_head.weight",
             "decoder.norm.weight": "model.norm.weight"}
    for i in range(spec.n_decoder_layers):
        zoo, ref = f"decoder.layers.{i}", f"model.layers.{i}"
        table |= {f"{zoo}.self_attn.{p}.weight": f"{ref}.self_attn.{p}_proj.weight" for p in "qkv"}
        table |= {f"{zoo}.self_attn.out.weight": f"{ref}.self_attn.o_proj.weight",
                  f"{zoo}.self_attn_residual.norm.weight": f"{ref}.input_layernorm.weight",
                  f"{zoo}.ffn_residual.norm.weight": f"{ref}.post_attention_layernorm.weight",
                  f"{zoo}.ffn.gate.weight": f"{ref}.mlp.gate_proj.weight",
                  f"{zoo}.ffn.linear1.weight": f"{ref}.mlp.up_proj.weight",
                  f"{zoo}.ffn.linear2.weight": f"{ref}.mlp.down_proj.weight"}
    return table


LLAMA = register(Family("llama", reference, spec_fields, config, names, computed,
                        free=("attention", "pad_id")))
