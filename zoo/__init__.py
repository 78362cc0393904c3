"""zoo: a configurable zoo of Transformer variants for ablation studies.

    model = zoo.build("pre.learned.per_head.gelu", vocab_size=1000)

Names are imported on first use (PEP 562), so `import zoo` and `zoo --help` do not wait for torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from zoo.specs import registries

registries.BUILT_IN[:] = ["zoo.variants", "zoo.tasks", "zoo.optim", "zoo.metrics", "zoo.model.kinds"]
"""The built-in choices, loaded on the first registry lookup (the top floor names them, so that no
room below it loads a room above it by name)."""

_HOMES = {
    "zoo.errors": ("CheckpointError", "ConfigError", "ConfigTypeError", "DataError", "Diverged", "InputError",
                   "InputTypeError", "InteropError", "Interrupted", "MissingData", "RunConflict", "ZooError"),
    "zoo.interop": ("from_hf", "to_hf"),
    "zoo.model.convert": ("convert",),
    "zoo.interop.folders": ("from_pretrained",),
    "zoo.model.kinds": ("AttentionMaps", "DecoderOnly", "EncoderDecoder", "EncoderOnly", "ZooModel", "build"),
    "zoo.specs.catalog": ("list_variants", "load_spec", "recipe", "register_preset", "resolve", "spec"),
    "zoo.specs.choices": ("Choice", "PartSettings"),
    "zoo.specs.experiment": ("ExperimentSpec", "load_experiment"),
    "zoo.specs.model_spec": ("ModelRecipe", "ModelSpec"),
    "zoo.specs.registries": ("AXES", "Registry", "UnknownChoiceError", "registry"),
    "zoo.trainer": ("TrainResult", "load", "train"),
}
HOME = {name: module for module, names in _HOMES.items() for name in names}
"""Each public name -> the module that defines it."""

__all__ = sorted([*HOME, "interop"])


def __getattr__(name: str) -> Any:
    if name == "interop":
        return importlib.import_module("zoo.interop")
    if name not in HOME:
        raise AttributeError(f"module 'zoo' has no attribute {name!r}")
    value = getattr(importlib.import_module(HOME[name]), name)
    globals()[name] = value  # found once
    return value


def __dir__() -> list[str]:
    return __all__
