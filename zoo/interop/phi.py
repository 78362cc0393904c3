"""Phi (Microsoft 2023: phi-1, phi-1.5, phi-2) and GPT-J (Wang and Komatsuzaki 2021) as transformers'
PhiForCausalLM and GPTJForCausalLM hold them: decoder-only parallel blocks with one LayerNorm
(`parallel`: x + attn(LN(x)) + mlp(LN(x))), rotary positions on part of each head (`rope+fraction`;
Phi's halves, GPT-J's adjacent pairs, `layout: interleaved`), the tanh GELU, a final LayerNorm and
an output projection of their own with a bias. Phi biases every projection; GPT-J none of its
attention's (`qkv_bias: false, out_bias: false`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import ACTIVATIONS, Family, dropout_fields, register
from zoo.interop.rotary import rope_base, rotary_buffers
from zoo.interop.tables import decoder
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec

FFN = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "swish": "silu"}


def common(model: nn.Module, act: str, eps: float, rotated: float, layout: str, base: float) -> dict[str, Any]:
    c = model.config
    if ACTIVATIONS.get(act) not in FFN:
        raise InteropError(f"{type(model).__name__} with activation {act!r} has no zoo spec; the zoo reads "
                           f"{', '.join(FFN.values())}")
    return {
        "kind": "decoder", "vocab_size": c.vocab_size, "norm": "parallel",
        "position": {"name": "rope", "base": base, "fraction": rotated, "layout": layout}, "attention": "fused",
        "ffn": ACTIVATIONS[act], "norm_type": {"name": "layernorm", "eps": float(eps)}, "final_norm": True,
        "scale_embeddings": False, "embedding_norm": False, "output_bias": "trained", "bias": True,
        "bos_id": c.bos_token_id, "eos_id": c.eos_token_id, "pad_id": c.pad_token_id,
    }


def phi_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    refuse_unfit("Phi", (not c.qk_layernorm, "qk_layernorm", c.qk_layernorm, "false"),
                 (c.num_key_value_heads in (None, c.num_attention_heads), "num_key_value_heads", c.num_key_value_heads,
                  f"num_attention_heads, {c.num_attention_heads}: no grouped key/value heads"))
    fraction = (c.rope_parameters or {}).get("partial_rotary_factor", 1.0)
    return common(model, c.hidden_act, c.layer_norm_eps, float(fraction), "halves", rope_base(c)) | {
        "d_model": c.hidden_size, "n_heads": c.num_attention_heads, "d_ff": c.intermediate_size,
        "n_decoder_layers": c.num_hidden_layers, "max_len": c.max_position_embeddings,
        **dropout_fields(c.resid_pdrop, c.attention_dropout, embedding=c.embd_pdrop),
        "tie_embeddings": model.lm_head.weight is model.model.embed_tokens.weight}


def activation(spec: ModelSpec) -> str:
    if spec.ffn.name not in FFN:
        raise InteropError(f"feed-forward {spec.ffn.name}: Phi and GPT-J hold {', '.join(FFN)}")
    return FFN[spec.ffn.name]


def phi_config(spec: ModelSpec):
    from transformers import PhiConfig

    rotary = spec.position.name == "rope"
    return PhiConfig(
        vocab_size=spec.tgt_vocab_size, hidden_size=spec.d_model, intermediate_size=spec.ffn_width,
        num_hidden_layers=spec.n_decoder_layers, num_attention_heads=spec.n_heads, hidden_act=activation(spec),
        rope_parameters={"rope_type": "default", "rope_theta": spec.position.base if rotary else 10000.0,
                         "partial_rotary_factor": spec.position.fraction if rotary else 1.0},
        max_position_embeddings=spec.max_len, layer_norm_eps=spec.norm_type.eps if spec.norm_type.name == "layernorm"
        else 1e-5, resid_pdrop=spec.dropout_at("residual"), embd_pdrop=spec.dropout_at("embedding"),
        attention_dropout=spec.dropout_at("attention"),
        tie_word_embeddings=spec.embeddings.tie, bos_token_id=spec.bos_id, eos_token_id=spec.eos_id,
        pad_token_id=spec.pad_id)


PHI_NAMES = decoder(
    {"decoder.embed.tokens.*": "model.embed_tokens.*", "generator.*": "lm_head.*", "decoder.norm.*": "model.final_layernorm.*"},
    {"self_attn.{p}.*": "self_attn.{p}_proj.*", "self_attn.out.*": "self_attn.dense.*",
     "self_attn_residual.norm.*": "input_layernorm.*", "ffn.linear1.*": "mlp.fc1.*", "ffn.linear2.*": "mlp.fc2.*"})


def gptj_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    head = c.n_embd // c.n_head
    refuse_unfit("GPT-J", *((getattr(c, name) == c.attn_pdrop, name, getattr(c, name), f"attn_pdrop's {c.attn_pdrop}")
                            for name in ("resid_pdrop", "embd_pdrop")),
                 (c.rotary_dim is not None, "rotary_dim", c.rotary_dim, "a number of rotated channels"))
    return common(model, c.activation_function, c.layer_norm_epsilon, c.rotary_dim / head, "interleaved", 10000.0) | {
        "d_model": c.n_embd, "n_heads": c.n_head, "d_ff": c.n_inner or 4 * c.n_embd, "n_decoder_layers": c.n_layer,
        "max_len": c.n_positions, **dropout_fields(c.resid_pdrop, c.attn_pdrop, embedding=c.embd_pdrop),
        "qkv_bias": False, "out_bias": False,
        "tie_embeddings": model.lm_head.weight is model.transformer.wte.weight}


def gptj_config(spec: ModelSpec):
    from transformers import GPTJConfig

    rotary = spec.position.name == "rope"
    return GPTJConfig(
        vocab_size=spec.tgt_vocab_size, n_embd=spec.d_model, n_layer=spec.n_decoder_layers, n_head=spec.n_heads,
        n_inner=spec.ffn_width, rotary_dim=round(spec.d_head * spec.position.fraction) if rotary else None,
        activation_function=activation(spec), n_positions=spec.max_len,
        layer_norm_epsilon=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-5,
        resid_pdrop=spec.dropout_at("residual"),
        embd_pdrop=spec.dropout_at("embedding"), attn_pdrop=spec.dropout_at("attention"), tie_word_embeddings=spec.embeddings.tie,
        bos_token_id=spec.bos_id, eos_token_id=spec.eos_id, pad_token_id=spec.pad_id)


def gptj_computed(spec: ModelSpec) -> dict[str, Tensor]:
    """GPT-J's table of sines and cosines over its rotated width, computed as the zoo's rotation is."""
    width = round(spec.d_head * spec.position.fraction) if spec.position.name == "rope" else spec.d_head
    inverse = 1.0 / (10000 ** (torch.arange(0, width, 2, dtype=torch.int64) / width))
    angles = torch.arange(spec.max_len, dtype=torch.int64).float()[:, None] * inverse
    return {"transformer.rotary_emb.embed_positions": torch.cat((torch.sin(angles), torch.cos(angles)), dim=1)}


GPTJ_NAMES = decoder(
    {"decoder.embed.tokens.*": "transformer.wte.*", "generator.*": "lm_head.*", "decoder.norm.*": "transformer.ln_f.*"},
    {"self_attn.{p}.*": "attn.{p}_proj.*", "self_attn.out.*": "attn.out_proj.*", "self_attn_residual.norm.*": "ln_1.*",
     "ffn.linear1.*": "mlp.fc_in.*", "ffn.linear2.*": "mlp.fc_out.*"}, at="transformer.h.{i}")


FREE = ("attention", "pad_id")
PHI = register(Family("phi", "PhiForCausalLM", phi_fields, phi_config, PHI_NAMES,
                      lambda spec: rotary_buffers(spec, "model.rotary_emb"), free=FREE))
GPTJ = register(Family("gptj", "GPTJForCausalLM", gptj_fields, gptj_config, GPTJ_NAMES, gptj_computed,
                       free=FREE))
