"""BART (Lewis et al. 2020) as transformers' BartForConditionalGeneration holds it: post-norm with
LayerNorm, learned positions offset by 2, a LayerNorm on the embeddings, GELU, one embedding for
both stacks and the output, and a fixed final_logits_bias; decoding starts from eos.

The layer table serves Marian too, whose layers are BART's."""

from __future__ import annotations

from typing import Any

from torch import nn

from zoo.errors import InteropError
from zoo.interop.hf import ACTIVATIONS, Family, dropout_fields, register
from zoo.specs.model_spec import ModelSpec

NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "out": "out_proj"}


def reference() -> type:
    from transformers import BartForConditionalGeneration

    return BartForConditionalGeneration


def shared_fields(model: nn.Module, family: str) -> dict[str, Any]:
    """What BART and Marian configurations say alike."""
    c = model.config
    if c.encoder_attention_heads != c.decoder_attention_heads or c.encoder_ffn_dim != c.decoder_ffn_dim:
        raise InteropError(f"{family} with stacks of different widths (attention heads {c.encoder_attention_heads} and "
                           f"{c.decoder_attention_heads}, ffn {c.encoder_ffn_dim} and {c.decoder_ffn_dim}) has no zoo spec")
    ffn = ACTIVATIONS.get(c.activation_function)
    if ffn is None:
        raise InteropError(f"{family} activation_function {c.activation_function!r} has no zoo feed-forward part")
    start = c.decoder_start_token_id if c.decoder_start_token_id is not None else c.pad_token_id
    inner = model.model
    return {
        "d_model": c.d_model, "n_heads": c.encoder_attention_heads, "d_ff": c.encoder_ffn_dim,
        "n_encoder_layers": c.encoder_layers, "n_decoder_layers": c.decoder_layers,
        **dropout_fields(c.dropout, c.attention_dropout, c.activation_dropout),
        "max_len": c.max_position_embeddings, "pad_id": c.pad_token_id, "bos_id": start, "eos_id": c.eos_token_id,
        "norm": "post", "attention": "fused", "ffn": ffn, "norm_type": "layernorm", "final_norm": False,
        "scale_embeddings": bool(c.scale_embedding),
        "share_embeddings": inner.encoder.embed_tokens.weight is inner.decoder.embed_tokens.weight,
        "tie_embeddings": model.lm_head.weight is inner.decoder.embed_tokens.weight,
        "output_bias": "fixed", "bias": True,
    }


def spec_fields(model: nn.Module) -> dict[str, Any]:
    return {**shared_fields(model, "BART"), "src_vocab_size": model.config.vocab_size,
            "tgt_vocab_size": model.config.vocab_size, "position": {"name": "learned", "offset": 2},
            "embedding_norm": True}


def shared_config(spec: ModelSpec) -> dict[str, Any]:
    act = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "swish": "swish", "relu2": "relu2"}.get(spec.ffn.name, "relu")
    return dict(
        d_model=spec.d_model, encoder_layers=spec.n_encoder_layers, decoder_layers=spec.n_decoder_layers,
        encoder_attention_heads=spec.n_heads, decoder_attention_heads=spec.n_heads, encoder_ffn_dim=spec.ffn_width,
        decoder_ffn_dim=spec.ffn_width, activation_function=act, dropout=spec.dropout_at("residual"),
        attention_dropout=spec.dropout_at("attention"), activation_dropout=spec.dropout_at("activation"),
        max_position_embeddings=spec.max_len, scale_embedding=spec.embeddings.scale,
        pad_token_id=spec.pad_id, eos_token_id=spec.eos_id, decoder_start_token_id=spec.bos_id,
        forced_eos_token_id=None, tie_word_embeddings=spec.embeddings.tie,
    )


def config(spec: ModelSpec):
    from transformers import BartConfig

    return BartConfig(vocab_size=spec.tgt_vocab_size, bos_token_id=None, **shared_config(spec))


def attention(zoo: str, ref: str) -> dict[str, str]:
    return {f"{zoo}.{a}.{kind}": f"{ref}.{b}.{kind}" for a, b in NAMES.items() for kind in ("weight", "bias")}


def module(zoo: str, ref: str) -> dict[str, str]:
    return {f"{zoo}.{kind}": f"{ref}.{kind}" for kind in ("weight", "bias")}


def layers(spec: ModelSpec) -> dict[str, str]:
    """The blocks, the embeddings and the output: what BART and Marian hold alike."""
    table = {"encoder.embed.tokens.weight": "model.encoder.embed_tokens.weight",
             "decoder.embed.tokens.weight": "model.decoder.embed_tokens.weight",
             "generator.weight": "lm_head.weight", "generator.bias": "final_logits_bias"}
    for stack, count in (("encoder", spec.n_encoder_layers), ("decoder", spec.n_decoder_layers)):
        for i in range(count):
            zoo, ref = f"{stack}.layers.{i}", f"model.{stack}.layers.{i}"
            table |= attention(f"{zoo}.self_attn", f"{ref}.self_attn")
            table |= module(f"{zoo}.self_attn_residual.norm", f"{ref}.self_attn_layer_norm")
            if stack == "decoder":
                table |= attention(f"{zoo}.cross_attn", f"{ref}.encoder_attn")
                table |= module(f"{zoo}.cross_attn_residual.norm", f"{ref}.encoder_attn_layer_norm")
            table |= module(f"{zoo}.ffn.linear1", f"{ref}.fc1") | module(f"{zoo}.ffn.linear2", f"{ref}.fc2")
            table |= module(f"{zoo}.ffn_residual.norm", f"{ref}.final_layer_norm")
    return table


def names(spec: ModelSpec) -> dict[str, str]:
    table = layers(spec)
    for stack in ("encoder", "decoder"):
        table[f"{stack}.embed.position.table.weight"] = f"model.{stack}.embed_positions.weight"
        table |= module(f"{stack}.embed.norm", f"model.{stack}.layernorm_embedding")
    return table


BART = register(Family("bart", reference, spec_fields, config, names))
