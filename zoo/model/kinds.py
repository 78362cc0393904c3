"""The model kinds by name, and `build`, which makes a model of the spec's kind from a spec, a
name or a mapping. Stacks keep their names across kinds (`encoder`, `decoder`, `generator`), so a
parameter that two kinds share has one canonical name and one initial draw.

- EncoderDecoder (zoo.model.encoder_decoder): src -> encoder -> memory; tgt + memory -> decoder -> logits.
- DecoderOnly (kind `decoder`, zoo.model.decoder_only): ids -> causal stack -> next-token logits.
- EncoderOnly (kind `encoder`, zoo.model.encoder_only): ids -> bidirectional stack -> per-token logits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoo.errors import ConfigError
from zoo.model.decoder_only import DecoderOnly
from zoo.model.encoder_decoder import EncoderDecoder
from zoo.model.encoder_only import EncoderOnly
from zoo.model.zoo_model import AttentionMaps, ZooModel, init_gain
from zoo.specs.catalog import resolve
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import AXES, KIND_STACKS, registry

__all__ = ["AttentionMaps", "DecoderOnly", "EncoderDecoder", "EncoderOnly", "ZooModel", "build", "init_gain",
           "model_class", "register_kind"]

MODELS: dict[str, type[ZooModel]] = {model.kind: model for model in (EncoderDecoder, DecoderOnly, EncoderOnly)}


def register_kind(model: type[ZooModel]) -> type[ZooModel]:
    """Add a kind of model (a class decorator): a ZooModel subclass with its own `kind` name, the
    stacks it `reads` and its framing; specs then accept `kind: NAME`, and the trainer, evaluation
    and decoding use its class methods. Its name may not be a part's, nor a kind's already."""
    if model.kind in MODELS or any(model.kind in registry(axis) for axis in AXES):
        raise ConfigError(f"kind {model.kind!r} is taken (a kind or a part of that name exists); pick another name")
    KIND_STACKS[model.kind] = tuple(model.reads)
    MODELS[model.kind] = model
    return model


def model_class(spec: ModelSpec) -> type[ZooModel]:
    """The class of the spec's kind, whose class methods frame its data (zoo.model.zoo_model)."""
    return MODELS[spec.kind]


def build(source: ModelSpec | str | Mapping[str, Any], /, *, seed: int | None = None, **overrides: Any) -> ZooModel:
    """A model of the spec's kind from a ModelSpec, a preset or canonical name, or a mapping, with
    field overrides."""
    spec = resolve(source, **overrides)
    return model_class(spec)(spec, seed=seed)
