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
from zoo.interop.family import Family, register
from zoo.interop.gpt2 import RENAMES as GPT2_RENAMES
from zoo.interop.rotary import rope_config, rope_fields, rotary_buffers
from zoo.interop.tables import ACTIVATIONS, DECODER_RENAMES, Renames, decoder
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec

FFN = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "swish": "silu"}


PHI_RENAMES = DECODER_RENAMES.derive(dropouts={"residual": "resid_pdrop", "attention": "attention_dropout",
                                               "embedding": "embd_pdrop"})


def common(model: nn.Module, renames: Renames, act: str, eps: float) -> dict[str, Any]:
    """What Phi's and GPT-J's configurations mean alike."""
    if ACTIVATIONS.get(act) not in FFN:
        raise InteropError(f"{type(model).__name__} with activation {act!r} has no zoo spec; the zoo reads "
                           f"{', '.join(FFN.values())}")
    return renames.read(model.config) | {
        "kind": "decoder", "norm": "parallel", "attention": "fused", "ffn": ACTIVATIONS[act],
        "norm_type": {"name": "layernorm", "eps": float(eps)}, "final_norm": True, "scale_embeddings": False,
        "embedding_norm": False, "output_bias": "trained", "bias": True}


def phi_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    refuse_unfit("Phi", (not c.qk_layernorm, "qk_layernorm", c.qk_layernorm, "false"),
                 (c.num_key_value_heads in (None, c.num_attention_heads), "num_key_value_heads", c.num_key_value_heads,
                  f"num_attention_heads, {c.num_attention_heads}: no grouped key/value heads"))
    return common(model, PHI_RENAMES, c.hidden_act, c.layer_norm_eps) | rope_fields(c, layout="halves") | {
        "tie_embeddings": model.lm_head.weight is model.model.embed_tokens.weight}


def activation(spec: ModelSpec) -> str:
    if spec.ffn.name not in FFN:
        raise InteropError(f"feed-forward {spec.ffn.name}: Phi and GPT-J hold {', '.join(FFN)}")
    return FFN[spec.ffn.name]


def phi_config(spec: ModelSpec):
    from transformers import PhiConfig

    return PhiConfig(
        **PHI_RENAMES.write(spec), **rope_config(spec), hidden_act=activation(spec),
        layer_norm_eps=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-5,
        tie_word_embeddings=spec.embeddings.tie)


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
    return common(model, GPT2_RENAMES, c.activation_function, c.layer_norm_epsilon) | {
        "position": {"name": "rope", "base": 10000.0, "fraction": c.rotary_dim / head, "layout": "interleaved"},
        "d_ff": c.n_inner or 4 * c.n_embd, "qkv_bias": False, "out_bias": False,
        "tie_embeddings": model.lm_head.weight is model.transformer.wte.weight}


def gptj_config(spec: ModelSpec):
    from transformers import GPTJConfig

    rotary = spec.position.name == "rope"
    return GPTJConfig(
        **GPT2_RENAMES.write(spec), n_inner=spec.ffn_width,
        rotary_dim=round(spec.d_head * spec.position.fraction) if rotary else None, activation_function=activation(spec),
        layer_norm_epsilon=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-5,
        tie_word_embeddings=spec.embeddings.tie)


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
