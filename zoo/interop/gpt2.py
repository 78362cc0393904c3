"""GPT-2 (Radford et al. 2019) as transformers' GPT2LMHeadModel holds it: a decoder-only pre-norm
stack with LayerNorm, learned positions, the tanh GELU, biased projections held as transposed
Conv1D weights (q, k and v packed in one), and an unbiased output projection tied to the
embedding (or, with tie_word_embeddings false, a table of its own). GPT-2 has no pad token; the
zoo's batches need one: give `from_hf(model, pad_id=...)` an id your inputs never hold as a token,
or set the configuration's pad_token_id."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.tables import ACTIVATIONS, TOKEN_IDS, Renames, decoder
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec

FFN = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu", "swish": "silu"}


RENAMES = Renames({"vocab_size": "vocab_size", "d_model": "n_embd", "n_heads": "n_head", "n_decoder_layers": "n_layer",
                   "max_len": "n_positions", **TOKEN_IDS},
                  dropouts={"residual": "resid_pdrop", "embedding": "embd_pdrop", "attention": "attn_pdrop"})
"""GPT-2's names, which GPT-J's configuration shares (its d_ff, n_inner, may be None: 4 x d_model)."""


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    refuse_unfit("GPT-2", *((not getattr(c, name), name, getattr(c, name), "false")
                            for name in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn")),
                 (bool(c.scale_attn_weights), "scale_attn_weights", c.scale_attn_weights, "true"))
    ffn = ACTIVATIONS.get(c.activation_function)
    if ffn is None or ffn not in FFN:
        raise InteropError(f"GPT-2 activation_function {c.activation_function!r} has no zoo feed-forward part")
    return RENAMES.read(c) | {  # pad_id None: from_hf asks for one
        "kind": "decoder", "d_ff": c.n_inner or 4 * c.n_embd, "norm": "pre", "position": "learned", "attention": "fused",
        "ffn": ffn,
        "norm_type": {"name": "layernorm", "eps": float(c.layer_norm_epsilon)}, "final_norm": True,
        "scale_embeddings": False, "embedding_norm": False, "output_bias": "none",
        "tie_embeddings": model.lm_head.weight is model.transformer.wte.weight,
        "bias": True,
    }


def config(spec: ModelSpec):
    from transformers import GPT2Config

    return GPT2Config(
        **RENAMES.write(spec), n_inner=spec.ffn_width, activation_function=FFN.get(spec.ffn.name, "gelu_new"),
        layer_norm_epsilon=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-5,
        tie_word_embeddings=spec.embeddings.tie)


CONV1D = {"self_attn.out": "attn.c_proj", "ffn.linear1": "mlp.c_fc", "ffn.linear2": "mlp.c_proj"}
"""The zoo's linear layers that GPT-2 holds as Conv1D, apart from the packed c_attn."""


def views(spec: ModelSpec, tensors: dict[str, Tensor]) -> dict[str, tuple[Tensor, str]]:
    """Conv1D weights are (in, out): the zoo's (out, in) weights are their transposes, and the
    packed c_attn holds q, k and v side by side (its bias too)."""
    out, d = {}, spec.d_model
    for i in range(spec.n_decoder_layers):
        layer = f"transformer.h.{i}"
        for part in ("weight", "bias"):
            packed = f"{layer}.attn.c_attn.{part}"
            if packed in tensors:
                for j, proj in enumerate("qkv"):
                    rows = tensors[packed][..., j * d : (j + 1) * d]
                    out[f"{packed}:{proj}"] = (rows.T if part == "weight" else rows, packed)
        for conv in CONV1D.values():
            name = f"{layer}.{conv}.weight"
            if name in tensors:
                out[f"{name}:T"] = (tensors[name].T, name)
    return out


NAMES = decoder(
    {"decoder.embed.tokens.weight": "transformer.wte.weight", "generator.weight": "lm_head.weight",
     "decoder.embed.position.table.weight": "transformer.wpe.weight", "decoder.norm.*": "transformer.ln_f.*"},
    {"self_attn.{p}.*": "attn.c_attn.*:{p}", "self_attn_residual.norm.*": "ln_1.*", "ffn_residual.norm.*": "ln_2.*",
     **{f"{zoo}.weight": f"{conv}.weight:T" for zoo, conv in CONV1D.items()},
     **{f"{zoo}.bias": f"{conv}.bias" for zoo, conv in CONV1D.items()}}, at="transformer.h.{i}")


GPT2 = register(Family("gpt2", "GPT2LMHeadModel", spec_fields, config, NAMES, free=("attention", "pad_id"), views=views))
