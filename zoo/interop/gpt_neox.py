"""GPT-NeoX (Black et al. 2022) and Pythia (Biderman et al. 2023) as transformers' GPTNeoXForCausalLM
holds them: a decoder-only pre-norm stack with LayerNorm, rotary positions over the first quarter of
each head (`rope+fraction=0.25`, halves), the exact GELU, biases on every projection but the
output's, and an output projection of its own. Its blocks are parallel with a norm per sublayer
(`parallel+shared_norm=false`: x + attn(LN1(x)) + mlp(LN2(x))), or sequential pre-norm where the
configuration says use_parallel_residual false. q, k and v are one packed projection, head by
head ([q, k, v] of head 0, then of head 1, ...), which the table reads through views."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.interop.family import Family, register
from zoo.interop.rotary import rope_config, rope_fields, rotary_buffers
from zoo.interop.tables import ACTIVATIONS, DECODER_RENAMES, decoder
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec

FFN = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "swish": "silu"}


RENAMES = DECODER_RENAMES.derive(dropouts={"residual": "hidden_dropout", "embedding": "hidden_dropout",
                                           "attention": "attention_dropout"})


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    ffn = ACTIVATIONS.get(c.hidden_act)
    refuse_unfit("GPT-NeoX", (ffn in FFN, "hidden_act", c.hidden_act, ", ".join(FFN.values())),
                 (bool(c.attention_bias), "attention_bias", c.attention_bias, "true: biases on q, k, v and mlp"))
    return RENAMES.read(c) | rope_fields(c) | {  # pad_id None: from_hf asks for one
        "kind": "decoder", "norm": {"name": "parallel", "shared_norm": False} if c.use_parallel_residual else "pre",
        "attention": "fused", "ffn": ffn, "norm_type": {"name": "layernorm", "eps": float(c.layer_norm_eps)},
        "final_norm": True, "scale_embeddings": False, "embedding_norm": False,
        "tie_embeddings": model.lm_head.weight is model.gpt_neox.embed_in.weight, "output_bias": "none", "bias": True,
    }


def config(spec: ModelSpec):
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig(
        **RENAMES.write(spec), **rope_config(spec), hidden_act=FFN.get(spec.ffn.name, "gelu"),
        layer_norm_eps=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-5,
        use_parallel_residual=spec.norm.name == "parallel", tie_word_embeddings=spec.embeddings.tie)


def computed(spec: ModelSpec) -> dict[str, Tensor]:
    return rotary_buffers(spec, "gpt_neox.rotary_emb")


def packed_head_views(spec: ModelSpec, tensors: dict[str, Tensor], packed: str) -> dict[str, tuple[Tensor, str]]:
    """The rows (and bias) of each layer's packed q/k/v projection (`packed` with the layer's index
    for {}), laid out per head as [q, k, v], as three views: q is every head's first third."""
    out = {}
    for i in range(spec.n_decoder_layers):
        for part in ("weight", "bias"):
            name = f"{packed.format(i)}.{part}"
            if name in tensors:
                heads = tensors[name].view(spec.n_heads, 3, spec.d_head, *tensors[name].shape[1:])
                out |= {f"{name}:{p}": (heads[:, j], name) for j, p in enumerate("qkv")}
    return out


def views(spec: ModelSpec, tensors: dict[str, Tensor]) -> dict[str, tuple[Tensor, str]]:
    return packed_head_views(spec, tensors, "gpt_neox.layers.{}.attention.query_key_value")


NAMES = decoder(
    {"decoder.embed.tokens.weight": "gpt_neox.embed_in.weight", "generator.weight": "lm_head.weight",
     "decoder.norm.*": "gpt_neox.final_layer_norm.*"},
    {"self_attn.{p}.*": "attention.query_key_value.*:{p}", "self_attn.out.*": "attention.dense.*",
     "self_attn_residual.norm.*": "input_layernorm.*", "ffn_residual.norm.*": "post_attention_layernorm.*",
     "ffn.linear1.*": "mlp.dense_h_to_4h.*", "ffn.linear2.*": "mlp.dense_4h_to_h.*"}, at="gpt_neox.layers.{i}")


GPT_NEOX = register(Family("gpt_neox", "GPTNeoXForCausalLM", spec_fields, config, NAMES, computed,
                           free=("attention", "pad_id"), views=views, preset="pythia"))
