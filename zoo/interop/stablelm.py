"""StableLM (Stability AI 2023-2024: StableLM-3B-4E1T, StableLM 2) and Persimmon (Adept 2023) as
transformers' StableLmForCausalLM and PersimmonForCausalLM hold them: decoder-only pre-norm stacks with
LayerNorm and rotary positions on part of each head (`rope+fraction`, halves).

StableLM: Llama's SwiGLU and grouped-query attention, biases on q/k/v where the configuration says
use_qkv_bias (`qkv_bias`), and none elsewhere; its parallel block (use_parallel_residual, StableLM 2
12B) reads one LayerNorm (`parallel`). Its qk_layernorm is a bias-free LayerNorm of each head beside
biased LayerNorms elsewhere; the zoo's qk norm takes the norm_type's settings, so that one is refused.

Persimmon: squared ReLU (`relu2`), biases on every projection but the logits', q/k/v packed head by
head as GPT-NeoX packs them, and queries and keys LayerNorm-ed per head (one norm shared by the heads,
`qk_norm: layernorm`) before the rotation."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.gpt_neox import packed_head_views
from zoo.interop.llama import WEIGHTS
from zoo.interop.rotary import rope_config, rope_fields, rotary_buffers
from zoo.interop.tables import ACTIVATIONS, DECODER_RENAMES, decoder
from zoo.specs.model_spec import ModelSpec

RENAMES = DECODER_RENAMES.derive(dropouts={"residual": "hidden_dropout", "attention": "attention_dropout"})


def common(c) -> dict[str, Any]:
    """What StableLM's and Persimmon's configurations share."""
    return RENAMES.read(c) | rope_fields(c) | {
        "kind": "decoder", "attention": "fused", "norm_type": {"name": "layernorm", "eps": float(c.layer_norm_eps)},
        "final_norm": True, "scale_embeddings": False, "embedding_norm": False, "output_bias": "none"}


def common_config(spec: ModelSpec) -> dict[str, Any]:
    return RENAMES.write(spec) | rope_config(spec) | dict(
        layer_norm_eps=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-5,
        tie_word_embeddings=spec.embeddings.tie)


def stablelm_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    if c.qk_layernorm:
        raise InteropError("qk_layernorm: StableLM's per-head LayerNorms of queries and keys are bias-free beside biased "
                           "LayerNorms elsewhere, and the zoo's qk_norm takes the norm_type's settings")
    if c.hidden_act != "silu":
        raise InteropError(f"StableLM with hidden_act {c.hidden_act!r} has no zoo spec; the zoo reads silu (SwiGLU)")
    return common(c) | {
        "n_kv_heads": c.num_key_value_heads, "ffn": "swiglu", "bias": False, "qkv_bias": bool(c.use_qkv_bias),
        "norm": "parallel" if c.use_parallel_residual else "pre",
        "tie_embeddings": model.lm_head.weight is model.model.embed_tokens.weight}


def stablelm_config(spec: ModelSpec):
    from transformers import StableLmConfig

    if spec.out_bias:
        raise InteropError("StableLM holds no bias on its attention's output projection")
    return StableLmConfig(**common_config(spec), num_key_value_heads=spec.kv_heads, use_qkv_bias=spec.qkv_bias,
                          use_parallel_residual=spec.norm.name == "parallel", qk_layernorm=False)


STABLELM_NAMES = WEIGHTS.derive(parts=("weight", "bias"))
"""Llama's table with the biases its norms and, where it says so, its q, k and v hold; a parallel
block's one norm is the attention's."""


def persimmon_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    if ACTIVATIONS.get(c.hidden_act) != "relu2":
        raise InteropError(f"Persimmon with hidden_act {c.hidden_act!r} has no zoo spec; the zoo reads relu2")
    return common(c) | {"norm": "pre", "ffn": "relu2", "bias": True,
                        "qk_norm": "layernorm" if c.qk_layernorm else None,
                        "tie_embeddings": model.lm_head.weight is model.model.embed_tokens.weight}


def persimmon_config(spec: ModelSpec):
    from transformers import PersimmonConfig

    return PersimmonConfig(**common_config(spec), hidden_act="relu2", qk_layernorm=spec.attn.qk_norm is not None)


PERSIMMON_NAMES = decoder(
    {"decoder.embed.tokens.*": "model.embed_tokens.*", "generator.*": "lm_head.*", "decoder.norm.*": "model.final_layernorm.*"},
    {"self_attn.{p}.*": "self_attn.query_key_value.*:{p}", "self_attn.q_norm.*": "self_attn.q_layernorm.*",
     "self_attn.k_norm.*": "self_attn.k_layernorm.*", "self_attn.out.*": "self_attn.dense.*",
     "self_attn_residual.norm.*": "input_layernorm.*", "ffn_residual.norm.*": "post_attention_layernorm.*",
     "ffn.linear1.*": "mlp.dense_h_to_4h.*", "ffn.linear2.*": "mlp.dense_4h_to_h.*"})


def persimmon_views(spec: ModelSpec, tensors: dict[str, Tensor]) -> dict[str, tuple[Tensor, str]]:
    return packed_head_views(spec, tensors, "model.layers.{}.self_attn.query_key_value")


def computed(spec: ModelSpec) -> dict[str, Tensor]:
    return rotary_buffers(spec, "model.rotary_emb")


FREE = ("attention", "pad_id")
STABLELM = register(Family("stablelm", "StableLmForCausalLM", stablelm_fields, stablelm_config,
                           STABLELM_NAMES, computed, free=FREE))
PERSIMMON = register(Family("persimmon", "PersimmonForCausalLM", persimmon_fields,
                            persimmon_config, PERSIMMON_NAMES, computed, free=FREE, views=persimmon_views))
