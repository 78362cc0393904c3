"""RoBERTa (Liu et al. 2019) and DistilBERT (Sanh et al. 2019) as transformers' RobertaForMaskedLM and
DistilBertForMaskedLM hold them: BERT's post-norm encoder and masked-LM head (zoo.interop.bert).
RoBERTa's positions start after its pad id (position p reads row p + pad_id + 1: `learned+offset`)
and its token-type table has one row; DistilBERT has no token types and names its parts apart."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.bert import LAYER, check_bidirectional, embeddings, encoder_ids
from zoo.interop.family import Family, register
from zoo.interop.tables import BERT_RENAMES, Renames, encoder
from zoo.specs.model_spec import ModelSpec


def encoder_fields(c, act: str, tied: bool) -> dict[str, Any]:
    """What the configurations of RoBERTa and DistilBERT mean alike."""
    check_bidirectional(c, "a BERT-like model")
    if act != "gelu":
        raise InteropError(f"a BERT-like model with activation {act!r} has no zoo spec; the zoo reads gelu")
    pad, start, end = encoder_ids(c, "a BERT-like model")
    return {"kind": "encoder", "vocab_size": c.vocab_size, "pad_id": pad, "bos_id": start, "eos_id": end,
            "norm": "post", "attention": "fused", "ffn": "gelu", "final_norm": False,
            "scale_embeddings": False, "embedding_norm": True, "output_transform": True, "tie_embeddings": tied,
            "output_bias": "trained", "bias": True}


def roberta_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    offset = c.pad_token_id + 1
    tied = model.lm_head.decoder.weight is model.roberta.embeddings.word_embeddings.weight
    return encoder_fields(c, c.hidden_act, tied) | BERT_RENAMES.read(c) | {
        "max_len": c.max_position_embeddings - offset,
        "position": {"name": "learned", "offset": offset, "token_types": c.type_vocab_size},
        "norm_type": {"name": "layernorm", "eps": float(c.layer_norm_eps)}}


def roberta_config(spec: ModelSpec):
    from transformers import RobertaConfig

    learned = spec.position.name == "learned"
    if not learned or spec.position.offset != spec.pad_id + 1:
        raise InteropError("RoBERTa reads learned positions from the row after its pad id")
    return RobertaConfig(
        **BERT_RENAMES.write(spec) | {"max_position_embeddings": spec.max_len + spec.position.offset},
        type_vocab_size=spec.position.token_types, layer_norm_eps=spec.norm_type.eps if spec.norm_type.name ==
        "layernorm" else 1e-5, pad_token_id=spec.pad_id, bos_token_id=spec.bos_id, eos_token_id=spec.eos_id,
        tie_word_embeddings=spec.embeddings.tie)


def roberta_computed(spec: ModelSpec) -> dict[str, Tensor]:
    rows = spec.max_len + (spec.position.offset if spec.position.name == "learned" else 0)
    return {"roberta.embeddings.position_ids": torch.arange(rows)[None].float(),
            "roberta.embeddings.token_type_ids": torch.zeros(1, rows)}


ROBERTA_NAMES = encoder(embeddings("roberta.embeddings") | {
    "generator.weight": "lm_head.decoder.weight", "generator.bias": "lm_head.bias",
    "generator.transform.norm.*": "lm_head.layer_norm.*", "generator.transform.dense.*": "lm_head.dense.*"},
    LAYER, at="roberta.encoder.layer.{i}")


DISTILBERT_RENAMES = Renames({"vocab_size": "vocab_size", "d_model": "dim", "n_heads": "n_heads", "d_ff": "hidden_dim",
                              "n_encoder_layers": "n_layers", "max_len": "max_position_embeddings"},
                             dropouts={"residual": "dropout", "embedding": "dropout", "attention": "attention_dropout"})


def distilbert_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    if c.sinusoidal_pos_embds:
        raise InteropError("DistilBERT with sinusoidal_pos_embds has no zoo spec (its sinusoids are trained)")
    # DistilBERT drops no attention output before its residual sum; the zoo drops both sublayers' (training only)
    tied = model.vocab_projector.weight is model.distilbert.embeddings.word_embeddings.weight
    return encoder_fields(c, c.activation, tied) | DISTILBERT_RENAMES.read(c) | {
        "position": "learned", "norm_type": {"name": "layernorm", "eps": 1e-12}}


def distilbert_config(spec: ModelSpec):
    from transformers import DistilBertConfig

    if spec.norm_type.name != "layernorm" or spec.norm_type.eps != 1e-12:
        raise InteropError("DistilBERT's LayerNorms have eps 1e-12")
    return DistilBertConfig(**DISTILBERT_RENAMES.write(spec), activation="gelu", pad_token_id=spec.pad_id,
                            tie_word_embeddings=spec.embeddings.tie)


DISTILBERT_NAMES = encoder(
    {"encoder.embed.tokens.*": "distilbert.embeddings.word_embeddings.*",
     "encoder.embed.position.table.*": "distilbert.embeddings.position_embeddings.*",
     "encoder.embed.norm.*": "distilbert.embeddings.LayerNorm.*", "generator.*": "vocab_projector.*",
     "generator.transform.norm.*": "vocab_layer_norm.*", "generator.transform.dense.*": "vocab_transform.*"},
    {"self_attn.{p}.*": "attention.{p}_lin.*", "self_attn.out.*": "attention.out_lin.*",
     "self_attn_residual.norm.*": "sa_layer_norm.*", "ffn.linear1.*": "ffn.lin1.*", "ffn.linear2.*": "ffn.lin2.*",
     "ffn_residual.norm.*": "output_layer_norm.*"}, at="distilbert.transformer.layer.{i}")


def distilbert_computed(spec: ModelSpec) -> dict[str, Tensor]:
    return {"distilbert.embeddings.position_ids": torch.arange(spec.max_len)[None].float()}


FREE = ("attention", "bos_id", "eos_id")
ROBERTA = register(Family("roberta", "RobertaForMaskedLM", roberta_fields, roberta_config, ROBERTA_NAMES,
                          roberta_computed, free=FREE))
DISTILBERT = register(Family("distilbert", "DistilBertForMaskedLM", distilbert_fields, distilbert_config,
                             DISTILBERT_NAMES, distilbert_computed, free=FREE))
