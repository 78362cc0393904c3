"""The model kinds by name, and `build`, which makes a model of the spec's kind from a spec, a
name or a mapping. Stacks keep their names across kinds (`encoder`, `decoder`, `generator`), so a
parameter that two kinds share has one canonical name and one initial draw.

- EncoderDecoder (zoo.model.encoder_decoder): src -> encoder -> memory; tgt + memory -> decoder -> logits.
- DecoderOnly (kind `decoder`, zoo.model.decoder_only): ids -> causal stack -> next-token logits.
- EncoderOnly (kind `encoder`, zoo.model.encoder_only): ids -> bidirectional stack -> per-token logits.

Each registers with `register_kind` (zoo.specs.registries, a class decorator), as a plugin's kind does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoo.model.decoder_only import DecoderOnly
from zoo.model.encoder_decoder import EncoderDecoder
from zoo.model.encoder_only import EncoderOnly
from zoo.model.zoo_model import AttentionMaps, ZooModel, init_gain
from zoo.specs.catalog import resolve
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import kinds, register_kind

__all__ = ["AttentionMaps", "DecoderOnly", "EncoderDecoder", "EncoderOnly", "ZooModel", "build", "init_gain",
           "model_class", "register_kind"]


def model_class(spec: ModelSpec) -> type[ZooModel]:
    """The class of the spec's kind, whose class methods frame its data (zoo.model.zoo_model)."""
    return kinds()[spec.kind]


def build(source: ModelSpec | str | Mapping[str, Any], /, *, seed: int | None = None, **overrides: Any) -> ZooModel:
    """A model of the spec's kind from a ModelSpec, a preset or canonical name, or a mapping, with
    field overrides."""
    spec = resolve(source, **overrides)
    return model_class(spec)(spec, seed=seed)
