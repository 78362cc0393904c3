"""Falcon (TII 2023) as transformers' FalconForCausalLM holds it: a decoder-only stack with LayerNorm,
rotary positions (halves), the exact GELU, biases where the configuration says `bias` (on every
projection but the output's, or on none), an output projection tied to the embedding, and q/k/v
packed into one projection in one of three layouts:

- Falcon 7B (multi_query): every query head, then the one key head, then the one value head;
- Falcon 40B and 180B (new_decoder_architecture): per key/value group, its query heads, then its
  key head and its value head (grouped-query attention, num_kv_heads);
- otherwise: head by head as [q, k, v], as GPT-NeoX packs them.

Its blocks are parallel, attention and feed-forward reading one LayerNorm (`parallel`: 7B, and the
new architecture with num_ln_in_parallel_attn 1) or one each (`parallel+shared_norm=false`: 40B,
180B), or sequential pre-norm where parallel_attn is false. Refused: Falcon's ALiBi (falcon-rw), which
divides the slopes by sqrt(head width) with the scores."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.rotary import rope_base, rope_config, rotary_buffers
from zoo.interop.tables import ACTIVATIONS, DECODER_RENAMES, decoder
from zoo.specs.model_spec import ModelSpec

FFN = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "swish": "silu"}


RENAMES = DECODER_RENAMES.derive(d_ff="ffn_hidden_size", dropouts={"residual": "hidden_dropout"})
"""Falcon drops no embeddings, and its attention's output at attention_dropout in a sequential block
alone, where the zoo asks it to equal hidden_dropout."""


def kv_heads(c) -> int:
    if c.new_decoder_architecture:
        return c.num_kv_heads
    return 1 if c.multi_query else c.num_attention_heads


def block(c) -> Any:
    """The norm placement: parallel with one norm or two, or sequential pre-norm."""
    if not c.parallel_attn:
        return "pre"
    two = c.new_decoder_architecture and c.num_ln_in_parallel_attn in (None, 2)
    return {"name": "parallel", "shared_norm": False} if two else "parallel"


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    if c.alibi:
        raise InteropError("alibi: Falcon's ALiBi divides the slopes by sqrt(head width) with the scores, and the zoo's "
                           "ALiBi adds them unscaled")
    if c.new_decoder_architecture and not c.parallel_attn:
        raise InteropError("Falcon's new_decoder_architecture without parallel_attn has no zoo spec")
    if ACTIVATIONS.get(c.activation) not in FFN:
        raise InteropError(f"Falcon with activation {c.activation!r} has no zoo spec; the zoo reads {', '.join(FFN.values())}")
    if not c.parallel_attn and c.attention_dropout != c.hidden_dropout:  # its attention's output: attention_dropout
        raise InteropError("Falcon's sequential block with attention_dropout other than hidden_dropout has no zoo spec")
    return RENAMES.read(c) | {
        "kind": "decoder", "n_kv_heads": kv_heads(c), "norm": block(c),
        "position": {"name": "rope", "base": rope_base(c)}, "attention": "fused", "ffn": ACTIVATIONS[c.activation],
        "norm_type": {"name": "layernorm", "eps": float(c.layer_norm_epsilon)}, "final_norm": True,
        "scale_embeddings": False, "embedding_norm": False, "output_bias": "none", "bias": bool(c.bias),
        "tie_embeddings": model.lm_head.weight is model.transformer.word_embeddings.weight,
    }


def config(spec: ModelSpec):
    from transformers import FalconConfig

    if spec.ffn.name not in FFN:
        raise InteropError(f"feed-forward {spec.ffn.name}: Falcon holds {', '.join(FFN)}")
    parallel = spec.norm.name == "parallel"
    two_norms = parallel and not spec.norm.shared_norm
    grouped = two_norms or 1 < spec.kv_heads < spec.n_heads
    return FalconConfig(
        **RENAMES.write(spec), **rope_config(spec, fraction=False), num_kv_heads=spec.kv_heads,
        new_decoder_architecture=grouped, multi_query=not grouped and spec.kv_heads == 1,
        parallel_attn=parallel, num_ln_in_parallel_attn=(2 if two_norms else 1) if grouped else None,
        bias=spec.bias, activation=FFN[spec.ffn.name], alibi=False,
        layer_norm_epsilon=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-5,
        attention_dropout=spec.dropout_at("residual"), tie_word_embeddings=spec.embeddings.tie)


def views(spec: ModelSpec, tensors: dict[str, Tensor]) -> dict[str, tuple[Tensor, str]]:
    """q, k and v of each layer's packed projection: per key/value group, its query heads, its key head
    and its value head. One layout for all three: multi-query's is one group's, and with a key/value
    head per query head it is GPT-NeoX's head-by-head [q, k, v]."""
    out, group = {}, spec.n_heads // spec.kv_heads
    for i in range(spec.n_decoder_layers):
        for part in ("weight", "bias"):
            name = f"transformer.h.{i}.self_attention.query_key_value.{part}"
            if name in tensors:
                groups = tensors[name].view(spec.kv_heads, group + 2, spec.d_head, *tensors[name].shape[1:])
                out |= {f"{name}:q": (groups[:, :group], name), f"{name}:k": (groups[:, group], name),
                        f"{name}:v": (groups[:, group + 1], name)}
    return out


NAMES = decoder(
    {"decoder.embed.tokens.weight": "transformer.word_embeddings.weight", "generator.weight": "lm_head.weight",
     "decoder.norm.*": "transformer.ln_f.*"},
    {"self_attn.{p}.*": "self_attention.query_key_value.*:{p}", "self_attn.out.*": "self_attention.dense.*",
     "ffn.linear1.*": "mlp.dense_h_to_4h.*", "ffn.linear2.*": "mlp.dense_4h_to_h.*",
     "self_attn_residual.norm.*": "input_layernorm.*", "ffn_residual.norm.*": "post_attention_layernorm.*"},
    at="transformer.h.{i}")
"""A sequential block's norms, or the one norm a parallel block's sublayers share."""
TWO_NORMS = NAMES.derive(layer={"self_attn_residual.norm.*": "ln_attn.*", "ffn_residual.norm.*": "ln_mlp.*"})
"""A parallel block with a norm for each sublayer."""


def names(spec: ModelSpec) -> dict[str, str]:
    return (TWO_NORMS if spec.norm.name == "parallel" and not spec.norm.shared_norm else NAMES)(spec)


def computed(spec: ModelSpec) -> dict[str, Tensor]:
    return rotary_buffers(spec, "transformer.rotary_emb")


FALCON = register(Family("falcon", "FalconForCausalLM", spec_fields, config, names, computed,
                         free=("attention", "pad_id"), views=views))
