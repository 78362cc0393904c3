"""ModernBERT (Warner et al. 2024) as transformers' ModernBertForMaskedLM holds it: an encoder-only
pre-norm stack with bias-free LayerNorm (`layernorm+bias=false`) and a normed embedding, rotary
positions, a GELU-gated feed-forward, no biases, and two per-layer rules (zoo.specs.layer_rules):
every `global_attn_every_n_layers`-th layer from the first attends globally and rotates at its own
base, the others within local_attention / 2 positions either side; and the first layer reads its
input without an attention norm (the embeddings end in one). The masked-LM head is BERT's: dense,
GELU, norm, then the tied output projection with a bias. Wqkv packs [q; k; v] and Wi [gate; up],
which the table reads through views."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.family import Family, register
from zoo.interop.rotary import rope_base, rotary_buffers_by_layer_type
from zoo.interop.tables import DECODER_RENAMES, encoder, split_views
from zoo.interop.unread import refuse_unfit
from zoo.specs.layer_rules import selecting
from zoo.specs.model_spec import ModelSpec

RENAMES = DECODER_RENAMES.derive(drop=("n_decoder_layers",), n_encoder_layers="num_hidden_layers")
"""Its three dropout rates must agree: the readers below take them apart."""


def theta(c, kind: str) -> float:
    return rope_base(c, c.rope_parameters[kind])


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    biases = {c.attention_bias, c.mlp_bias, c.classifier_bias}
    refuse_unfit("ModernBERT", *((getattr(c, name) == "gelu", name, getattr(c, name), "gelu")
                                 for name in ("hidden_activation", "classifier_activation")),
                 *((len(biases) == 1, name, getattr(c, name), "attention_bias, mlp_bias and classifier_bias alike")
                   for name in ("mlp_bias", "classifier_bias") if getattr(c, name) != c.attention_bias),
                 (bool(c.decoder_bias), "decoder_bias", c.decoder_bias, "true"))
    if len({c.attention_dropout, c.mlp_dropout, c.embedding_dropout}) > 1:
        raise InteropError("ModernBERT with attention_dropout, mlp_dropout and embedding_dropout apart has no zoo spec")
    types = c.layer_types
    full = [i for i, kind in enumerate(types) if kind == "full_attention"]
    rules = {"first": {"only": [0], "set": {"norm": {"attention_norm": False}}}}
    if len(full) < len(types):
        rules = {"full": {**selecting(full, len(types)), "set": {
            "window": None, "position": {"base": theta(c, "full_attention")}}}} | rules if full else rules
    local = "sliding_attention" if len(full) < len(types) else "full_attention"
    return RENAMES.read(c) | {
        "kind": "encoder", "dropout": float(c.attention_dropout), "norm": "pre",
        "position": {"name": "rope", "base": theta(c, local)},
        "attention": "fused", "ffn": "geglu", "norm_type": {"name": "layernorm", "eps": float(c.norm_eps),
                                                           "bias": bool(c.norm_bias)},
        "final_norm": True, "scale_embeddings": False, "embedding_norm": True, "output_transform": True,
        "tie_embeddings": model.decoder.weight is model.model.embeddings.tok_embeddings.weight,
        "output_bias": "trained", "bias": bool(c.attention_bias),
        "window": c.sliding_window + 1 if len(full) < len(types) else None, "layers": rules,
    }


def config(spec: ModelSpec):
    from transformers import ModernBertConfig

    layers = [spec.at_layer("encoder", i) for i in range(spec.n_encoder_layers)]
    full = [i for i, layer in enumerate(layers) if layer.attn.window is None]
    windows = {layer.attn.window for layer in layers} - {None}
    every = (full[1] - full[0]) if len(full) > 1 else spec.n_encoder_layers
    bases = {kind: layers[i].position.base if layers[i].position.name == "rope" else 10000.0
             for kind, i in (("full_attention", full[0] if full else 0),
                             ("sliding_attention", next((i for i in range(len(layers)) if i not in full), 0)))}
    return ModernBertConfig(
        **RENAMES.write(spec), hidden_activation="gelu", norm_eps=spec.norm_type.eps if spec.norm_type.name == "layernorm"
        else 1e-5, norm_bias=spec.norm_type.name == "layernorm" and spec.norm_type.bias,
        attention_bias=spec.bias, mlp_bias=spec.bias, classifier_bias=spec.bias, decoder_bias=True,
        attention_dropout=spec.dropout, mlp_dropout=spec.dropout, embedding_dropout=spec.dropout,
        global_attn_every_n_layers=every, local_attention=2 * (next(iter(windows), 1) - 1) or 2,
        rope_parameters={kind: {"rope_type": "default", "rope_theta": base} for kind, base in bases.items()},
        tie_word_embeddings=spec.embeddings.tie, cls_token_id=spec.bos_id, sep_token_id=spec.eos_id)


def computed(spec: ModelSpec) -> dict[str, Tensor]:
    return rotary_buffers_by_layer_type(spec, "encoder", "model.rotary_emb")


def views(spec: ModelSpec, tensors: dict[str, Tensor]) -> dict[str, tuple[Tensor, str]]:
    """Wqkv's rows as q, k and v; Wi's as the gate (activated) and the up projection."""
    out = {}
    for i in range(spec.n_encoder_layers):
        out |= split_views(tensors, f"model.layers.{i}.attn.Wqkv.weight", dict.fromkeys("qkv", spec.d_model))
        out |= split_views(tensors, f"model.layers.{i}.mlp.Wi.weight", dict.fromkeys(("gate", "up"), spec.ffn_width))
    return out


NAMES = encoder(
    {"encoder.embed.tokens.*": "model.embeddings.tok_embeddings.*", "encoder.embed.norm.*": "model.embeddings.norm.*",
     "encoder.norm.*": "model.final_norm.*", "generator.*": "decoder.*", "generator.transform.dense.*": "head.dense.*",
     "generator.transform.norm.*": "head.norm.*"},
    {"self_attn.{p}.*": "attn.Wqkv.*:{p}", "self_attn.out.*": "attn.Wo.*", "self_attn_residual.norm.*": "attn_norm.*",
     "ffn_residual.norm.*": "mlp_norm.*", "ffn.gate.*": "mlp.Wi.*:gate", "ffn.linear1.*": "mlp.Wi.*:up",
     "ffn.linear2.*": "mlp.Wo.*"}, at="model.layers.{i}")
"""The first layer has no attention norm (the embeddings' norm serves): neither model holds one."""


MODERNBERT = register(Family("modernbert", "ModernBertForMaskedLM", spec_fields, config, NAMES, computed,
                             free=("attention", "bos_id", "eos_id"), views=views))
