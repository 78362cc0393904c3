"""`train.init_from`: a run that starts from trained weights (another run's checkpoint, or a model
folder that save_pretrained wrote, the zoo's or transformers') instead of an initialization, so a
model imported with from_hf, or trained by an earlier run, trains on with the zoo's trainer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zoo.errors import ConfigError
from zoo.specs.model_spec import ModelSpec
from zoo.trainer.identity import flatten


def initial_weights(source: str, spec: ModelSpec) -> dict[str, Any]:
    """The state dict to start from, once its model is found to be the experiment's: a difference
    in any field (the vocabulary sizes the task gives included) is an error naming each."""
    from zoo.model.pretrained import from_pretrained
    from zoo.trainer.checkpoint import load

    path = Path(source)
    if not path.exists():
        raise ConfigError(f"train.init_from {source!r}: no such file or folder (a run's checkpoint.pt, or a folder "
                          "that save_pretrained wrote)")
    model = from_pretrained(path) if path.is_dir() else load(path)[0]
    differences = spec_differences(model.spec, spec)
    if differences:
        raise ConfigError(f"train.init_from {source!r}: its model is not the experiment's ({'; '.join(differences[:6])}"
                          f"{'; ...' if len(differences) > 6 else ''}); set the experiment's model to it "
                          f"(its spec: zoo show, or the folder's config.json)")
    return model.state_dict()


def spec_differences(there: ModelSpec, here: ModelSpec) -> list[str]:
    old, new = flatten(there.model_dump(mode="json")), flatten(here.model_dump(mode="json"))
    return [f"model.{key}: {old.get(key)!r} there, {new.get(key)!r} here" for key in sorted(old.keys() | new.keys())
            if old.get(key) != new.get(key)]
