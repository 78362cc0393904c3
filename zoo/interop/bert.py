"""BERT (Devlin et al. 2019) as transformers' BertForMaskedLM holds it: an encoder-only post-norm
stack with LayerNorm and exact GELU, learned positions with a token-type table (the zoo feeds
segment 0), a LayerNorm on the embeddings, and the masked-LM head: a dense layer, GELU and a
LayerNorm, then the output projection tied to the embedding, with a bias."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.tables import BERT_RENAMES, encoder
from zoo.interop.unread import refuse_unfit
from zoo.specs.model_spec import ModelSpec


def check_bidirectional(c, family: str) -> None:
    """A BERT-like configuration with is_decoder attends causally (and may cross-attend): not the
    zoo's encoder, which attends both ways; read as one, it would compute another function."""
    decoder, crossing = getattr(c, "is_decoder", False), getattr(c, "add_cross_attention", False)
    refuse_unfit(family, (not decoder, "is_decoder", decoder, "false: the zoo's encoder attends both ways; load it with "
                          "is_decoder false, or build a decoder-only zoo model instead"),
                 (not crossing, "add_cross_attention", crossing, "false: an encoder attends to nothing else"))


def encoder_ids(c, family: str) -> tuple[int, int, int]:
    """(pad, bos, eos) of a BERT-like encoder, which never decodes: its pad id, and any two other
    ids for the spec's start and end. Its token-type table must hold type 0, which it adds."""
    if getattr(c, "type_vocab_size", 1) < 1:
        raise InteropError(f"{family} type_vocab_size {c.type_vocab_size}: its embeddings add the row of token type 0, "
                           "so the table needs one row at least")
    pad = c.pad_token_id if c.pad_token_id is not None else 0
    start, end = [i for i in range(3) if i != pad][:2]
    return pad, start, end


def layout_fields(c, family: str, tied: bool) -> dict[str, Any]:
    """The spec of BERT's layout from a configuration of it (BERT's, ELECTRA's)."""
    check_bidirectional(c, family)
    if c.hidden_act != "gelu":
        raise InteropError(f"{family} hidden_act {c.hidden_act!r}: the zoo's masked-LM head uses the exact GELU")
    pad, start, end = encoder_ids(c, family)
    return BERT_RENAMES.read(c) | {
        "kind": "encoder", "pad_id": pad, "bos_id": start, "eos_id": end, "norm": "post",
        "position": {"name": "learned", "token_types": c.type_vocab_size}, "attention": "fused",
        "ffn": "gelu", "norm_type": {"name": "layernorm", "eps": float(c.layer_norm_eps)}, "final_norm": False,
        "scale_embeddings": False, "embedding_norm": True, "output_transform": True, "tie_embeddings": tied,
        "output_bias": "trained", "bias": True,
    }


def spec_fields(model: nn.Module) -> dict[str, Any]:
    return layout_fields(model.config, "BERT",
                         model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight)


def config(spec: ModelSpec):
    from transformers import BertConfig

    learned = spec.position.name == "learned"
    if learned and not spec.position.token_types:
        raise InteropError("BERT adds a token-type table to its positions")
    return BertConfig(
        **BERT_RENAMES.write(spec), type_vocab_size=spec.position.token_types if learned else 2,
        layer_norm_eps=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-12,
        pad_token_id=spec.pad_id, tie_word_embeddings=spec.embeddings.tie,
    )


def position_buffers(spec: ModelSpec, embeddings: str) -> dict[str, Tensor]:
    """Position ids 0.. and token types 0, which BERT's layout keeps as buffers of its embeddings."""
    return {f"{embeddings}.position_ids": torch.arange(spec.max_len)[None].float(),
            f"{embeddings}.token_type_ids": torch.zeros(1, spec.max_len)}


def computed(spec: ModelSpec) -> dict[str, Tensor]:
    return position_buffers(spec, "bert.embeddings")


def embeddings(at: str) -> dict[str, str]:
    """The token, position and token-type tables of BERT's layout, and their norm, under `at`."""
    return {"encoder.embed.tokens.*": f"{at}.word_embeddings.*", "encoder.embed.position.table.*": f"{at}.position_embeddings.*",
            "encoder.embed.position.types.*": f"{at}.token_type_embeddings.*", "encoder.embed.norm.*": f"{at}.LayerNorm.*"}


LAYER = {"self_attn.q.*": "attention.self.query.*", "self_attn.k.*": "attention.self.key.*",
         "self_attn.v.*": "attention.self.value.*", "self_attn.out.*": "attention.output.dense.*",
         "self_attn_residual.norm.*": "attention.output.LayerNorm.*", "ffn.linear1.*": "intermediate.dense.*",
         "ffn.linear2.*": "output.dense.*", "ffn_residual.norm.*": "output.LayerNorm.*"}
"""A layer of BERT's layout (RoBERTa, ELECTRA)."""

NAMES = encoder(embeddings("bert.embeddings") | {
    "generator.weight": "cls.predictions.decoder.weight", "generator.bias": "cls.predictions.bias",
    "generator.transform.dense.*": "cls.predictions.transform.dense.*",
    "generator.transform.norm.*": "cls.predictions.transform.LayerNorm.*"}, LAYER, at="bert.encoder.layer.{i}")


BERT = register(Family("bert", "BertForMaskedLM", spec_fields, config, NAMES, computed,
                       free=("attention", "bos_id", "eos_id")))
