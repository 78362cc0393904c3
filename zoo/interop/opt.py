"""OPT (Zhang et al. 2022) as transformers' OPTForCausalLM holds it: a decoder-only stack of BART's
decoder layers without cross-attention, pre-norm with a final LayerNorm (do_layer_norm_before; post-norm
without one where it is false), learned positions read from row p + 2 (`learned+offset=2`), ReLU,
biases on every projection but the output's, an output projection tied to the embedding.

Refused: OPT-350m's projections between a narrower embedding and the stack (word_embed_proj_dim),
LayerNorms without gains (layer_norm_elementwise_affine false). OPT drops sublayer outputs (dropout) and
attention weights (attention_dropout), neither embeddings nor activations (its activation_dropout is
never read)."""

from __future__ import annotations

from typing import Any

from torch import nn

from zoo.errors import InteropError
from zoo.interop.bart import LAYER
from zoo.interop.family import Family, register
from zoo.interop.tables import ACTIVATIONS, DECODER_RENAMES, decoder
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec

FFN = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "swish": "silu"}


RENAMES = DECODER_RENAMES.derive(d_ff="ffn_dim", dropouts={"residual": "dropout", "attention": "attention_dropout"})


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    if c.word_embed_proj_dim != c.hidden_size:
        raise InteropError(f"word_embed_proj_dim {c.word_embed_proj_dim} beside hidden_size {c.hidden_size} (OPT-350m's "
                           "projected embeddings) has no zoo spec")
    refuse_unfit("OPT", *((bool(getattr(c, name)), name, getattr(c, name), "true")
                          for name in ("layer_norm_elementwise_affine", "enable_bias")))
    if ACTIVATIONS.get(c.activation_function) not in FFN:
        raise InteropError(f"OPT with activation_function {c.activation_function!r} has no zoo spec; the zoo reads "
                           f"{', '.join(FFN.values())}")
    pre = c.do_layer_norm_before
    return RENAMES.read(c) | {
        "kind": "decoder", "norm": "pre" if pre else "post", "position": {"name": "learned", "offset": 2},
        "attention": "fused", "ffn": ACTIVATIONS[c.activation_function], "norm_type": {"name": "layernorm", "eps": 1e-5},
        "final_norm": pre and not c._remove_final_layer_norm, "scale_embeddings": False, "embedding_norm": False,
        "tie_embeddings": model.lm_head.weight is model.model.decoder.embed_tokens.weight, "output_bias": "none",
        "bias": True,
    }


def config(spec: ModelSpec):
    from transformers import OPTConfig

    pre = spec.norm.name == "pre"
    if spec.ffn.name not in FFN:
        raise InteropError(f"feed-forward {spec.ffn.name}: OPT holds {', '.join(FFN)}")
    return OPTConfig(
        **RENAMES.write(spec), activation_function=FFN[spec.ffn.name], do_layer_norm_before=pre,
        _remove_final_layer_norm=pre and not spec.uses_final_norm, word_embed_proj_dim=spec.d_model,
        tie_word_embeddings=spec.embeddings.tie)


NAMES = decoder({"decoder.embed.tokens.weight": "model.decoder.embed_tokens.weight", "generator.weight": "lm_head.weight",
                 "decoder.embed.position.table.weight": "model.decoder.embed_positions.weight",
                 "decoder.norm.*": "model.decoder.final_layer_norm.*"}, LAYER, at="model.decoder.layers.{i}")
"""BART's layer; the final norm where the stack is pre-norm (neither has one otherwise)."""


OPT = register(Family("opt", "OPTForCausalLM", spec_fields, config, NAMES))
