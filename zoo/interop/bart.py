"""BART (Lewis et al. 2020) as transformers' BartForConditionalGeneration holds it: post-norm with
LayerNorm, learned positions offset by 2, a LayerNorm on the embeddings, GELU, one embedding for
both stacks and the output, and a fixed final_logits_bias; decoding starts from eos.

The layer table serves Marian too, whose layers are BART's."""

from __future__ import annotations

from typing import Any

from torch import nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.tables import ACTIVATIONS, Renames, Stack, Weights
from zoo.specs.model_spec import ModelSpec

RENAMES = Renames({"d_model": "d_model", "n_heads": "encoder_attention_heads", "d_ff": "encoder_ffn_dim",
                   "n_encoder_layers": "encoder_layers", "n_decoder_layers": "decoder_layers",
                   "max_len": "max_position_embeddings", "pad_id": "pad_token_id", "eos_id": "eos_token_id"},
                  dropouts={"residual": "dropout", "embedding": "dropout", "attention": "attention_dropout",
                            "activation": "activation_dropout"})
"""BART's and Marian's names; the decoder's heads and width, which must equal the encoder's, are
written apart."""


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
    return RENAMES.read(c) | {
        "bos_id": start, "norm": "post", "attention": "fused", "ffn": ffn, "norm_type": "layernorm", "final_norm": False,
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
    return RENAMES.write(spec) | dict(
        decoder_attention_heads=spec.n_heads, decoder_ffn_dim=spec.ffn_width, activation_function=act,
        scale_embedding=spec.embeddings.scale, decoder_start_token_id=spec.bos_id, forced_eos_token_id=None,
        tie_word_embeddings=spec.embeddings.tie)


def config(spec: ModelSpec):
    from transformers import BartConfig

    return BartConfig(vocab_size=spec.tgt_vocab_size, bos_token_id=None, **shared_config(spec))


LAYER = {"self_attn.{p}.*": "self_attn.{p}_proj.*", "self_attn.out.*": "self_attn.out_proj.*",
         "self_attn_residual.norm.*": "self_attn_layer_norm.*", "cross_attn.{p}.*": "encoder_attn.{p}_proj.*",
         "cross_attn.out.*": "encoder_attn.out_proj.*", "cross_attn_residual.norm.*": "encoder_attn_layer_norm.*",
         "ffn.linear1.*": "fc1.*", "ffn.linear2.*": "fc2.*", "ffn_residual.norm.*": "final_layer_norm.*"}
"""A layer of BART's, in either stack (an encoder's has no cross-attention rows to fill); Marian,
Pegasus, M2M100 and OPT hold the same."""
LAYERS = Weights({"{stack}.embed.tokens.weight": "model.{stack}.embed_tokens.weight", "generator.weight": "lm_head.weight",
                  "generator.bias": "final_logits_bias"},
                 (Stack("encoder", "model.encoder.layers.{i}", LAYER), Stack("decoder", "model.decoder.layers.{i}", LAYER)))
"""The blocks, the embeddings and the output: what BART and Marian hold alike."""
NAMES = LAYERS.derive(top={"{stack}.embed.position.table.weight": "model.{stack}.embed_positions.weight",
                           "{stack}.embed.norm.*": "model.{stack}.layernorm_embedding.*"})


BART = register(Family("bart", "BartForConditionalGeneration", spec_fields, config, NAMES))
