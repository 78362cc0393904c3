"""A model as a folder, as transformers keeps one: `config.json` (the zoo's spec) and
`model.safetensors` (its weights, which hold no code to run). `zoo.from_pretrained` reads such a
folder, and also a transformers model folder saved locally with `save_pretrained` (through
`from_hf`; nothing is downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load, save

from zoo.errors import CheckpointError, ConfigError
from zoo.files import atomic_write, read_bounded, read_json
from zoo.model.size_checks import available_bytes

CONFIG, WEIGHTS = "config.json", "model.safetensors"
FORMAT = 1


def save_pretrained(model, directory: str | Path) -> Path:
    """Write the model's spec and weights into `directory` (made if missing), each file whole or
    not at all. A tensor that two names share (tied or shared embeddings) is stored once."""
    directory = Path(directory)
    tensors, aliases, seen = {}, {}, {}
    for name, tensor in model.state_dict().items():
        where = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if where in seen:
            aliases[name] = seen[where]
        else:
            seen[where] = name
            tensors[name] = tensor.detach().cpu().contiguous()
    atomic_write(directory / WEIGHTS, save(tensors, metadata={"format": "pt", "zoo_aliases": json.dumps(aliases)}))
    atomic_write(directory / CONFIG, json.dumps({"zoo_format": FORMAT, "spec": model.spec.model_dump(mode="json")},
                                                indent=1))
    return directory


def read_config(directory: Path) -> dict:
    file = directory / CONFIG
    if not directory.is_dir():
        raise ConfigError(f"{directory}: no such folder; from_pretrained reads a folder that save_pretrained wrote")
    try:
        config = read_json(file, CONFIG)
    except FileNotFoundError:
        raise ConfigError(f"{directory}: no {CONFIG}; from_pretrained reads a folder that save_pretrained wrote "
                          "(a zoo model's, or a transformers model's saved locally)") from None
    except IsADirectoryError:
        raise ConfigError(f"{file}: is a folder, not the model's configuration") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{file}: holds a {type(config).__name__}, not a mapping")
    return config


def read_weights(file: Path, model) -> dict[str, torch.Tensor]:
    """The state dict a weights file holds, its shared names restored, checked against the model."""
    try:
        data = read_bounded(file, "a weights file", available_bytes("cpu"), CheckpointError)
        tensors = load(data)
        header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])  # the format: length, then JSON
        aliases = json.loads((header.get("__metadata__") or {}).get("zoo_aliases", "{}"))
    except FileNotFoundError:
        raise CheckpointError(f"{file}: missing; the folder holds a config but no weights") from None
    except IsADirectoryError:
        raise CheckpointError(f"{file}: is a folder, not the model's weights") from None
    except (SafetensorError, ValueError, OverflowError, RecursionError) as err:
        raise CheckpointError(f"{file}: not a readable safetensors file ({err})") from None
    if not (isinstance(aliases, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in aliases.items())):
        raise CheckpointError(f"{file}: its metadata zoo_aliases is {json.dumps(aliases)[:80]}, not a mapping of weight "
                              "names to the names they share a tensor with")
    state = {**tensors, **{name: tensors[source] for name, source in aliases.items() if source in tensors}}
    expected = model.state_dict()
    missing, unexpected = sorted(expected.keys() - state.keys()), sorted(state.keys() - expected.keys())
    wrong = [f"{name} {tuple(state[name].shape)} (the spec gives {tuple(t.shape)})" for name, t in expected.items()
             if name in state and state[name].shape != t.shape]
    if missing or unexpected or wrong:
        said = [*(f"{n} is missing" for n in missing[:3]), *(f"{n} is not the spec's" for n in unexpected[:3]), *wrong[:3]]
        raise CheckpointError(f"{file}: its weights do not fit its spec {model.spec.name}: {'; '.join(said)}")
    return state
