"""ELECTRA (Clark et al. 2020) as transformers' ElectraForMaskedLM holds it (its generator): BERT's
layout (zoo.interop.bert) with the whole embedding at a narrower width where embedding_size is below
hidden_size: tokens, positions, token types and their LayerNorm at embedding_size, then a biased
projection to the stack (`embedding_dim`, `dim_scope: embedding`), and a masked-LM head that maps the
stack's output back to embedding_size (dense, GELU, LayerNorm there) before the output projection
tied to the token table, with a bias."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.bert import BERT, LAYER, embeddings, layout_fields, position_buffers
from zoo.interop.family import register
from zoo.interop.tables import BERT_RENAMES, encoder
from zoo.specs.model_spec import ModelSpec


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    tied = model.generator_lm_head.weight is model.electra.embeddings.word_embeddings.weight
    factorized = {"embedding_dim": c.embedding_size, "embedding_dim_scope": "embedding"}
    return layout_fields(c, "ELECTRA", tied) | (factorized if c.embedding_size != c.hidden_size else {})


def config(spec: ModelSpec):
    from transformers import ElectraConfig

    learned = spec.position.name == "learned"
    if learned and not spec.position.token_types:
        raise InteropError("ELECTRA adds a token-type table to its positions")
    if spec.embeddings.dim is not None and spec.embeddings.dim_scope != "embedding":
        raise InteropError("ELECTRA's whole embedding is at embedding_size (dim_scope embedding)")
    return ElectraConfig(
        **BERT_RENAMES.write(spec), embedding_size=spec.embedding_width,
        type_vocab_size=spec.position.token_types if learned else 2,
        layer_norm_eps=spec.norm_type.eps if spec.norm_type.name == "layernorm" else 1e-12, pad_token_id=spec.pad_id,
        tie_word_embeddings=spec.embeddings.tie)


def computed(spec: ModelSpec) -> dict[str, Tensor]:
    return position_buffers(spec, "electra.embeddings")


NAMES = encoder(embeddings("electra.embeddings") | {
    "encoder.embed.project.*": "electra.embeddings_project.*", "generator.*": "generator_lm_head.*",
    "generator.transform.norm.*": "generator_predictions.LayerNorm.*",
    "generator.transform.dense.*": "generator_predictions.dense.*"}, LAYER, at="electra.encoder.layer.{i}")
"""BERT's layout, with a projection from narrower embeddings where they are (neither holds one otherwise)."""


ELECTRA = register(BERT.derive("electra", "ElectraForMaskedLM", spec_fields=spec_fields, config=config, names=NAMES,
                               computed=computed))
