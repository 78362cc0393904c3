"""Llama (Touvron et al. 2023) as transformers' LlamaForCausalLM holds it: a decoder-only pre-norm
stack with RMSNorm, rotary positions (the half-split pairing, rope_theta), SwiGLU (or the gated
feed-forward its hidden_act names: gelu is GEGLU), grouped-query attention and no biases. Like
GPT-2 it has no pad token: give `from_hf(model, pad_id=...)` or set the configuration's pad_token_id.

Its layout is the base that zoo.interop.llama_layout and zoo.interop.gemma derive families from."""

from __future__ import annotations

from typing import Any

from torch import nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.rotary import rope_base, rope_config, rotary_buffers
from zoo.interop.tables import ACTIVATIONS, DECODER_RENAMES, decoder, reads, writes
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec

GATED = {"swish": "swiglu", "gelu": "geglu", "gelu_tanh": "geglu_tanh", "relu": "reglu"}
"""The zoo's activation (zoo.interop.tables.ACTIVATIONS of hidden_act) -> the gated feed-forward of
Llama's MLP, down(act(gate(x)) * up(x)), with that activation on the gate."""
GATED_ACT = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_pytorch_tanh", "reglu": "relu"}
"""The hidden_act that to_hf writes for each gated feed-forward."""

RENAMES = DECODER_RENAMES.derive(n_kv_heads="num_key_value_heads", dropouts={"attention": "attention_dropout"})
"""Llama's names; head_dim is read and written apart, as Phi-3 has none (its heads are d_model / n_heads)."""


def layout_fields(model: nn.Module) -> dict[str, Any]:
    """The spec of a model of Llama's layout: what the configurations of its families share."""
    c = model.config
    ffn = GATED.get(ACTIVATIONS.get(c.hidden_act, ""))
    refuse_unfit(type(model).__name__, *((not getattr(c, name, False), name, getattr(c, name, False), "false")
                                         for name in ("attention_bias", "mlp_bias")),
                 (ffn is not None, "hidden_act", c.hidden_act, f"{', '.join(GATED_ACT.values())}: the gate's activation"))
    return RENAMES.read(c) | {
        "kind": "decoder", "head_width": getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        "norm": "pre", "position": {"name": "rope", "base": rope_base(c)},
        "attention": "fused", "ffn": ffn, "norm_type": {"name": "rmsnorm", "eps": float(c.rms_norm_eps)},
        "final_norm": True, "scale_embeddings": False, "embedding_norm": False, "output_bias": "none", "bias": False,
        "tie_embeddings": model.lm_head.weight is model.model.embed_tokens.weight}


def layout_config(spec: ModelSpec, head_dim: bool = True) -> dict[str, Any]:
    """The configuration of a model of Llama's layout, as its families' configurations share it
    (with `head_dim` where the family's configuration has one)."""
    if spec.ffn.name not in GATED_ACT:
        raise InteropError(f"feed-forward {spec.ffn.name}: Llama's layout gates its MLP by one of {', '.join(GATED_ACT)}")
    return RENAMES.write(spec) | rope_config(spec, fraction=False) | dict(
        hidden_act=GATED_ACT[spec.ffn.name], rms_norm_eps=spec.norm_type.eps if spec.norm_type.name == "rmsnorm" else 1e-6,
        tie_word_embeddings=spec.embeddings.tie) | ({"head_dim": spec.d_head} if head_dim else {})


WEIGHTS = decoder(
    {"decoder.embed.tokens.*": "model.embed_tokens.*", "generator.*": "lm_head.*", "decoder.norm.*": "model.norm.*"},
    {"self_attn.{p}.*": "self_attn.{p}_proj.*", "self_attn.out.*": "self_attn.o_proj.*",
     "self_attn_residual.norm.*": "input_layernorm.*", "ffn_residual.norm.*": "post_attention_layernorm.*",
     "ffn.gate.*": "mlp.gate_proj.*", "ffn.linear1.*": "mlp.up_proj.*", "ffn.linear2.*": "mlp.down_proj.*"},
    parts=("weight",))
QK_NORMS = {f"self_attn.{p}_norm.*": f"self_attn.{p}_norm.*" for p in "qk"}
"""The rows of per-head query and key norms (Qwen3, OLMo 2, Gemma 3)."""

LLAMA = register(Family("llama", "LlamaForCausalLM", reads(layout_fields), writes("LlamaConfig", layout_config),
                        WEIGHTS, lambda spec: rotary_buffers(spec, "model.rotary_emb"), free=("attention", "pad_id")))
