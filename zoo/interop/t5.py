"""T5 (Raffel et al. 2020) as transformers' T5ForConditionalGeneration holds it: T5 1.0 (ReLU, the
output projection tied to the shared embedding and fed d_model^-1/2 times the decoder's output) and
T5 1.1 / Flan-T5 (gated GELU by the tanh approximation, no output rescale).

In the zoo: pre-norm with RMSNorm, T5's relative bias (one table per stack, in its first layer
there), scores not scaled, head width d_kv, no biases, one embedding for both stacks."""

from __future__ import annotations

from typing import Any

from torch import nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.tables import ACTIVATIONS, Renames, Stack, Weights
from zoo.specs.model_spec import ModelSpec

GATED = {"gelu": "geglu", "gelu_python": "geglu", "gelu_new": "geglu_tanh", "gelu_pytorch_tanh": "geglu_tanh",
         "relu": "reglu", "silu": "swiglu", "swish": "swiglu"}
"""T5's gated activations (`feed_forward_proj: gated-ACT`) and the zoo's gated feed-forward parts."""
PROJECTIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "swish": "silu", "relu2": "relu2",
               "reglu": "gated-relu", "geglu": "gated-gelu_python", "geglu_tanh": "gated-gelu", "swiglu": "gated-silu"}
"""The zoo's feed-forward parts as T5's feed_forward_proj (its `gated-gelu` is the tanh GELU)."""


RENAMES = Renames({"tgt_vocab_size": "vocab_size", "d_model": "d_model", "n_heads": "num_heads", "head_width": "d_kv",
                   "d_ff": "d_ff", "n_encoder_layers": "num_layers", "n_decoder_layers": "num_decoder_layers",
                   "pad_id": "pad_token_id", "eos_id": "eos_token_id"},
                  dropouts=dict.fromkeys(("residual", "attention", "activation", "embedding"), "dropout_rate"))
"""T5's one vocabulary serves both stacks, and one rate drops at every site; its start is its own."""


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    ffn = (GATED if c.is_gated_act else ACTIVATIONS).get(c.dense_act_fn)
    if ffn is None:
        raise InteropError(f"T5 feed_forward_proj {c.feed_forward_proj!r} has no zoo feed-forward part")
    start = c.decoder_start_token_id if c.decoder_start_token_id is not None else c.pad_token_id
    position = {"name": "t5", "num_buckets": c.relative_attention_num_buckets,
                "max_distance": c.relative_attention_max_distance}
    return RENAMES.read(c) | {
        "src_vocab_size": c.vocab_size, "bos_id": start, "norm": "pre", "position": position, "attention": "fused", "ffn": ffn,
        "norm_type": {"name": "rmsnorm", "eps": float(c.layer_norm_epsilon)}, "final_norm": True,
        "scale_embeddings": False, "embedding_norm": False, "share_embeddings": True,
        "tie_embeddings": model.lm_head.weight is model.shared.weight, "scale_scores": False,
        "scale_output": bool(getattr(c, "scale_decoder_outputs", c.tie_word_embeddings)),
        "output_bias": "none", "bias": False,
    }


def config(spec: ModelSpec):
    from transformers import T5Config

    t5 = spec.position.name == "t5"
    return T5Config(
        **RENAMES.write(spec), relative_attention_num_buckets=spec.position.num_buckets if t5 else 32,
        relative_attention_max_distance=spec.position.max_distance if t5 else 128,
        layer_norm_epsilon=spec.norm_type.eps if spec.norm_type.name == "rmsnorm" else 1e-6,
        feed_forward_proj=PROJECTIONS.get(spec.ffn.name, "relu"), tie_word_embeddings=spec.output.scale,
        decoder_start_token_id=spec.bos_id)


def layer(cross: bool, gated: bool) -> dict[str, str]:
    """A T5 block's rows: its sublayers are layer.0 (self-attention), layer.1 (the decoder's
    cross-attention) and the feed-forward after them, whose input projection is wi, or wi_0 (the
    gate) and wi_1 where it is gated."""
    ffn_at = 2 if cross else 1
    ffn = f"{ffn_at}.DenseReluDense"
    linear = {"ffn.gate.*": f"{ffn}.wi_0.*", "ffn.linear1.*": f"{ffn}.wi_1.*"} if gated else {"ffn.linear1.*": f"{ffn}.wi.*"}
    attend = {"cross_attn.{p}.*": "1.EncDecAttention.{p}.*", "cross_attn.out.*": "1.EncDecAttention.o.*",
              "cross_attn_residual.norm.*": "1.layer_norm.*"} if cross else {}
    return {"self_attn.{p}.*": "0.SelfAttention.{p}.*", "self_attn.out.*": "0.SelfAttention.o.*",
            "self_attn_residual.norm.*": "0.layer_norm.*", **attend,
            **linear, "ffn.linear2.*": f"{ffn}.wo.*", "ffn_residual.norm.*": f"{ffn_at}.layer_norm.*"}


TABLES = {gated: Weights(
    {"encoder.embed.tokens.*": "shared.*", "decoder.embed.tokens.*": "decoder.embed_tokens.*", "generator.*": "lm_head.*",
     "{stack}.norm.*": "{stack}.final_layer_norm.*",
     "{stack}.embed.position.bias.*": "{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.*"},
    (Stack("encoder", "encoder.block.{i}.layer", layer(False, gated)),
     Stack("decoder", "decoder.block.{i}.layer", layer(True, gated))),
    parts=("weight",)) for gated in (False, True)}


def names(spec: ModelSpec) -> dict[str, str]:
    return TABLES[spec.ffn.name in GATED.values()](spec)


T5 = register(Family("t5", "T5ForConditionalGeneration", spec_fields, config, names, free=("attention", "max_len"),
                     preset="t5-v1_1"))


def mt5_fields(model: nn.Module) -> dict[str, Any]:
    """mT5 is T5 1.1's layout; its forward never rescales the decoder's output, though its configuration
    says tie_word_embeddings (which T5's reads as the rescale)."""
    return spec_fields(model) | {"scale_output": False}


def mt5_config(spec: ModelSpec):
    from transformers import MT5Config

    fields = config(spec).to_dict()
    return MT5Config(**{key: fields[key] for key in MT5_KEYS})


MT5_KEYS = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
            "relative_attention_num_buckets", "relative_attention_max_distance", "dropout_rate", "layer_norm_epsilon",
            "feed_forward_proj", "pad_token_id", "eos_token_id", "decoder_start_token_id")
MT5 = register(Family("mt5", "MT5ForConditionalGeneration", mt5_fields, mt5_config, names, free=("attention", "max_len")))
