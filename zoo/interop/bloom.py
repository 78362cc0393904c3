"""BLOOM (BigScience 2022) as transformers' BloomForCausalLM holds it: a decoder-only pre-norm stack with
LayerNorm, a LayerNorm on the embeddings, ALiBi (Press et al.'s slopes, `alibi`), the tanh GELU,
biases on every projection but the output's, an output projection tied to the embedding, and q/k/v
packed head by head as GPT-NeoX packs them.

ALiBi needs no table of positions, so BLOOM's configuration has no maximum length: `max_len` (the
zoo's bound on generation and positions) is the training length of BLOOM, 2048, unless given, and
left open by to_hf. Refused: apply_residual_connection_post_layernorm (the residual taken after the
norm), and pretraining_tp with slow_but_exact (a summation order of its own)."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.gpt_neox import packed_head_views
from zoo.interop.tables import TOKEN_IDS, Renames, decoder
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec

TRAINING_LENGTH = 2048


RENAMES = Renames({"vocab_size": "vocab_size", "d_model": "hidden_size", "n_heads": "n_head",
                   "n_decoder_layers": "n_layer", **TOKEN_IDS},
                  dropouts={"residual": "hidden_dropout", "attention": "attention_dropout"})


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    refuse_unfit("BLOOM", (not c.apply_residual_connection_post_layernorm, "apply_residual_connection_post_layernorm",
                           c.apply_residual_connection_post_layernorm, "false"),
                 (not (c.pretraining_tp > 1 and c.slow_but_exact), "slow_but_exact", c.slow_but_exact,
                  f"false where pretraining_tp is above 1 (it is {c.pretraining_tp})"))
    return RENAMES.read(c) | {
        "kind": "decoder", "d_ff": 4 * c.hidden_size, "max_len": TRAINING_LENGTH, "norm": "pre", "position": "alibi",
        "attention": "fused", "ffn": "gelu_tanh",
        "norm_type": {"name": "layernorm", "eps": float(c.layer_norm_epsilon)}, "final_norm": True,
        "scale_embeddings": False, "embedding_norm": True, "output_bias": "none", "bias": True,
        "tie_embeddings": model.lm_head.weight is model.transformer.word_embeddings.weight,
    }


def config(spec: ModelSpec):
    from transformers import BloomConfig

    if spec.ffn_width != 4 * spec.d_model:
        raise InteropError(f"d_ff {spec.ffn_width}: BLOOM's feed-forward is 4 x d_model = {4 * spec.d_model} wide")
    return BloomConfig(**RENAMES.write(spec), tie_word_embeddings=spec.embeddings.tie,
                       layer_norm_epsilon=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-5)


def views(spec: ModelSpec, tensors: dict[str, Tensor]) -> dict[str, tuple[Tensor, str]]:
    return packed_head_views(spec, tensors, "transformer.h.{}.self_attention.query_key_value")


NAMES = decoder(
    {"decoder.embed.tokens.weight": "transformer.word_embeddings.weight", "generator.weight": "lm_head.weight",
     "decoder.embed.norm.*": "transformer.word_embeddings_layernorm.*", "decoder.norm.*": "transformer.ln_f.*"},
    {"self_attn.{p}.*": "self_attention.query_key_value.*:{p}", "self_attn.out.*": "self_attention.dense.*",
     "self_attn_residual.norm.*": "input_layernorm.*", "ffn_residual.norm.*": "post_attention_layernorm.*",
     "ffn.linear1.*": "mlp.dense_h_to_4h.*", "ffn.linear2.*": "mlp.dense_4h_to_h.*"}, at="transformer.h.{i}")


BLOOM = register(Family("bloom", "BloomForCausalLM", spec_fields, config, NAMES,
                        free=("attention", "pad_id", "max_len"), views=views))
