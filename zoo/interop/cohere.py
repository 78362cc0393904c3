"""Command R (Cohere 2024) as transformers' CohereForCausalLM holds it: a decoder-only parallel block
reading one bias-free LayerNorm (`parallel`, `layernorm+bias=false`), rotary positions on adjacent
pairs (`rope+layout=interleaved`), SwiGLU, grouped-query attention, no biases, an output projection
tied to the embedding and logits times logit_scale (`output.logit_scale`). Where use_qk_norm says so
(Command R+), queries and keys are LayerNorm-ed per head, each head with gains of its own
(`qk_norm_scope: each_head`), held by transformers as one (heads, head width) tensor per projection,
which the table reads head by head through views."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.llama import RENAMES, WEIGHTS
from zoo.interop.rotary import rope_base, rope_config, rotary_buffers
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    refuse_unfit("Cohere", (not c.attention_bias, "attention_bias", c.attention_bias, "false"),
                 (c.hidden_act == "silu", "hidden_act", c.hidden_act, "silu (SwiGLU)"))
    return RENAMES.read(c) | {
        "kind": "decoder", "norm": "parallel",
        "position": {"name": "rope", "base": rope_base(c), "layout": "interleaved"}, "attention": "fused",
        "ffn": "swiglu", "norm_type": {"name": "layernorm", "eps": float(c.layer_norm_eps), "bias": False},
        "final_norm": True, "scale_embeddings": False, "embedding_norm": False, "output_bias": "none", "bias": False,
        "tie_embeddings": model.lm_head.weight is model.model.embed_tokens.weight, "logit_scale": logit_scale(c),
        **({"qk_norm": "layernorm", "qk_norm_scope": "each_head"} if c.use_qk_norm else {}),
    }


def logit_scale(c) -> float:
    """Cohere's factor on the logits; transformers' model multiplies by it, so it must be a number."""
    if not isinstance(c.logit_scale, int | float) or isinstance(c.logit_scale, bool):
        raise InteropError(f"Cohere logit_scale {c.logit_scale!r}: transformers' model multiplies its logits by it; "
                           "give it a number (1.0: unscaled)")
    return float(c.logit_scale)


def config(spec: ModelSpec):
    from transformers import CohereConfig

    return CohereConfig(
        **RENAMES.write(spec), **rope_config(spec, fraction=False),
        layer_norm_eps=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-5,
        logit_scale=spec.output.logit_scale or 1.0, use_qk_norm=spec.attn.qk_norm is not None,
        tie_word_embeddings=spec.embeddings.tie)


def names(spec: ModelSpec) -> dict[str, str]:
    """Llama's table (a parallel block reads one norm: the attention's), and a row for each head's
    gains of the query and key norms."""
    table = WEIGHTS(spec)
    for i in range(spec.n_decoder_layers):
        for p, heads in (("q", spec.n_heads), ("k", spec.kv_heads)):
            table |= {f"decoder.layers.{i}.self_attn.{p}_norm.{h}.weight": f"model.layers.{i}.self_attn.{p}_norm.weight:{h}"
                      for h in range(heads)}
    return table


def views(spec: ModelSpec, tensors: dict[str, Tensor]) -> dict[str, tuple[Tensor, str]]:
    """Each head's row of the (heads, head width) query and key norm gains."""
    out = {}
    for name, tensor in tensors.items():
        if name.endswith(("self_attn.q_norm.weight", "self_attn.k_norm.weight")):
            out |= {f"{name}:{h}": (tensor[h], name) for h in range(tensor.size(0))}
    return out


def computed(spec: ModelSpec) -> dict[str, Tensor]:
    return rotary_buffers(spec, "model.rotary_emb")


COHERE = register(Family("cohere", "CohereForCausalLM", spec_fields, config, names, computed,
                         free=("attention", "pad_id"), views=views))
