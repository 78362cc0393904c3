"""MPT (MosaicML 2023) as transformers' MptForCausalLM holds it: a decoder-only pre-norm stack with
bias-free LayerNorms (`layernorm+bias=false`), ALiBi with MPT's slopes (alibi_bias_max 8: Press et
al.'s, the zoo's `alibi`, for any head count), the exact GELU over 4 x d_model, no biases, an output
projection tied to the embedding, q/k/v packed as [q; k; v] (all query rows, then all key rows,
then all value rows), and scores scaled by softmax_scale where the configuration gives one
(`scale_width` = softmax_scale^-2).

transformers' MPT computes neither the configuration's qk_ln, logit_scale nor expansion_ratio, nor
learned positions; the zoo reads the model transformers builds. ALiBi bounds no length: `max_len` is
max_seq_len. Refused: clip_qkv (q/k/v clamped), alibi_bias_max other than 8. transformers' MptConfig
types attn_pdrop as an int, so to_hf of a spec whose dropout is not 0 or 1 is refused there."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.tables import TOKEN_IDS, Renames, decoder, dropout_fields, split_views
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec

RENAMES = Renames({"vocab_size": "vocab_size", "d_model": "d_model", "n_heads": "n_heads", "n_decoder_layers": "n_layers",
                   "max_len": "max_seq_len", **TOKEN_IDS})
"""MPT's dropout rate lives in its attn_config, which the readers below take apart."""


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    attn = c.attn_config
    refuse_unfit("MPT", (attn.clip_qkv is None, "attn_config.clip_qkv", attn.clip_qkv, "None"),
                 (attn.alibi_bias_max == 8, "attn_config.alibi_bias_max", attn.alibi_bias_max, "8"))
    scale = attn.softmax_scale
    return RENAMES.read(c) | {
        "kind": "decoder", "d_ff": 4 * c.d_model, **dropout_fields(attn.attn_pdrop, attn.attn_pdrop, embedding=0.0),
        "norm": "pre", "position": "alibi", "attention": "fused", "ffn": "gelu",
        "norm_type": {"name": "layernorm", "eps": float(c.layer_norm_epsilon), "bias": False}, "final_norm": True,
        "scale_embeddings": False, "embedding_norm": False, "output_bias": "none", "bias": False,
        "tie_embeddings": model.lm_head.weight is model.transformer.wte.weight,
        **({"scale_width": float(scale) ** -2} if scale is not None else {}),
    }


def config(spec: ModelSpec):
    from transformers import MptConfig

    if spec.ffn_width != 4 * spec.d_model:
        raise InteropError(f"d_ff {spec.ffn_width}: MPT's feed-forward is 4 x d_model = {4 * spec.d_model} wide")
    width = spec.attn.scale_width
    return MptConfig(
        **RENAMES.write(spec), layer_norm_epsilon=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-5,
        attn_config={"attn_pdrop": int(rate) if (rate := spec.dropout_at("attention")).is_integer() else rate,  # an int there
                     "softmax_scale": None if width is None else width**-0.5}, tie_word_embeddings=spec.embeddings.tie)


def views(spec: ModelSpec, tensors: dict[str, Tensor]) -> dict[str, tuple[Tensor, str]]:
    """Wqkv's rows as three blocks of d_model: q, k, v."""
    return {name: view for i in range(spec.n_decoder_layers) for name, view in split_views(
        tensors, f"transformer.blocks.{i}.attn.Wqkv.weight", dict.fromkeys("qkv", spec.d_model)).items()}


NAMES = decoder(
    {"decoder.embed.tokens.*": "transformer.wte.*", "generator.*": "lm_head.*", "decoder.norm.*": "transformer.norm_f.*"},
    {"self_attn.{p}.*": "attn.Wqkv.*:{p}", "self_attn.out.*": "attn.out_proj.*", "self_attn_residual.norm.*": "norm_1.*",
     "ffn_residual.norm.*": "norm_2.*", "ffn.linear1.*": "ffn.up_proj.*", "ffn.linear2.*": "ffn.down_proj.*"},
    at="transformer.blocks.{i}", parts=("weight",))


def names(spec: ModelSpec) -> dict[str, str]:
    table = {"decoder.embed.tokens.weight": "transformer.wte.weight", "generator.weight": "lm_head.weight",
             "decoder.norm.weight": "transformer.norm_f.weight"}
    for i in range(spec.n_decoder_layers):
        zoo, ref = f"decoder.layers.{i}", f"transformer.blocks.{i}"
        table |= {f"{zoo}.self_attn.{p}.weight": f"{ref}.attn.Wqkv.weight:{p}" for p in "qkv"}
        table |= {f"{zoo}.self_attn.out.weight": f"{ref}.attn.out_proj.weight",
                  f"{zoo}.self_attn_residual.norm.weight": f"{ref}.norm_1.weight",
                  f"{zoo}.ffn_residual.norm.weight": f"{ref}.norm_2.weight",
                  f"{zoo}.ffn.linear1.weight": f"{ref}.ffn.up_proj.weight",
                  f"{zoo}.ffn.linear2.weight": f"{ref}.ffn.down_proj.weight"}
    return table


MPT = register(Family("mpt", "MptForCausalLM", spec_fields, config, NAMES,
                      free=("attention", "pad_id"), views=views))
