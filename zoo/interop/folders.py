"""zoo.from_pretrained: the model a folder holds, whichever library's save_pretrained wrote it."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from pydantic import ValidationError

from zoo.errors import ConfigError, describe_validation
from zoo.files import regular_file
from zoo.interop.hf import from_hf
from zoo.model.kinds import build
from zoo.model.pretrained import CONFIG, FORMAT, WEIGHTS, read_config, read_weights
from zoo.specs.model_spec import ModelSpec


def from_pretrained(directory: str | Path):
    """The model a folder holds, in eval mode on the CPU: a zoo model's (its spec and weights), or
    a transformers model's saved locally (read with transformers, offline, then `from_hf`)."""
    directory = Path(directory)
    config = read_config(directory)
    if "zoo_format" in config:
        return load_zoo_folder(directory, config)
    return from_transformers_folder(directory, config)


def load_zoo_folder(directory: Path, config: dict):
    """The zoo model a folder that save_pretrained wrote holds (its spec and weights), in eval mode
    on the CPU; zoo.from_pretrained (zoo.interop.folders) reads a transformers folder too."""
    written = config["zoo_format"]
    if isinstance(written, bool) or not isinstance(written, int) or written < 1:
        raise ConfigError(f"{directory / CONFIG}: zoo_format is {json.dumps(written)}, not a format number (an integer "
                          f"from 1; this zoo writes {FORMAT})")
    if written > FORMAT:
        raise ConfigError(f"{directory / CONFIG}: zoo_format {written}, written by a newer zoo; this one reads up to "
                          f"{FORMAT}")
    try:
        spec = ModelSpec.model_validate(config.get("spec"))
    except ValidationError as err:
        raise ConfigError(f"{directory / CONFIG}: its spec: {describe_validation(err)}") from None
    model = build(spec, seed=0)
    model.load_state_dict(read_weights(directory / WEIGHTS, model))
    return model.eval()


def from_transformers_folder(directory: Path, config: dict):
    """A transformers model saved with save_pretrained: its class from the configuration, read
    from the folder alone (local_files_only), then imported by from_hf."""
    try:
        import transformers
    except ImportError as err:
        raise ConfigError(f"{directory}: a transformers model folder needs transformers ({err}): "
                          "pip install 'zoo[hf]'") from None
    cls = model_class(transformers, directory, config)
    check_weight_files(directory)
    stored = stored_dtype(directory)
    try:
        # mismatched shapes come back in the loading info, which names each (transformers' own error
        # points at a report it logs, which a quiet logger never shows); the model is then refused below
        model, loading = cls.from_pretrained(directory, local_files_only=True, use_safetensors=True,
                                             output_loading_info=True, dtype="auto", ignore_mismatched_sizes=True)
    except (OSError, ValueError, RuntimeError, TypeError, KeyError, AttributeError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConfigError(f"{directory}: transformers cannot read it as {cls.__name__}: {first}") from None
    unread = [f"{name} is missing" for name in loading.get("missing_keys", [])]
    unread += [f"{name} is not {cls.__name__}'s" for name in loading.get("unexpected_keys", [])]
    unread += [f"{item[0]} has shape {tuple(item[1])}, the config gives {tuple(item[2])}" if isinstance(item, tuple)
               and len(item) == 3 else f"{item} has another shape than the config gives"
               for item in loading.get("mismatched_keys", [])]
    unread += [str(message) for message in loading.get("error_msgs", [])]
    if unread:
        raise ConfigError(f"{directory}: its weights are not a whole {cls.__name__} ({'; '.join(unread[:4])}"
                          f"{'; ...' if len(unread) > 4 else ''}); every tensor must be there with its shape, and none "
                          "left over")
    say_dtype(directory, config, stored, next(model.parameters()).dtype)
    return from_hf(model.eval())


def say_dtype(directory: Path, config: dict, stored, taken) -> None:
    """The dtype a folder was read in, where it is not float32 or not the one its weights are stored
    in: transformers reads config.json's dtype (float32 weights stored as float16 under a config
    saying float32 are read in float32; float16 said over float32 weights rounds them), and the zoo
    reads the folder as transformers does, so that the two agree."""
    import torch

    if taken == stored == torch.float32:
        return
    said = config.get("dtype") or config.get("torch_dtype")
    how = f"as its config.json's dtype {said!r} says" if said else "as transformers reads it"
    change = ("" if taken == stored else
              f" (its weights are stored in {str(stored).removeprefix('torch.')}"
              f"{', so each was rounded' if taken.itemsize < stored.itemsize else ''})")
    warnings.warn(f"{directory}: read in {str(taken).removeprefix('torch.')}, {how}{change}; "
                  "model.float() computes in float32", stacklevel=3)


def model_class(transformers, directory: Path, config: dict):
    """The model class config.json's `architectures` names: a transformers model class."""
    architectures = config.get("architectures") or []
    if not isinstance(architectures, list) or not all(isinstance(name, str) for name in architectures):
        raise ConfigError(f"{directory / CONFIG}: architectures is {json.dumps(architectures)[:80]}, not a list of "
                          "transformers model class names")
    known = [getattr(transformers, name) for name in architectures if hasattr(transformers, name)]
    cls = next((c for c in known if isinstance(c, type) and issubclass(c, transformers.PreTrainedModel)), None)
    if cls is None:
        raise ConfigError(f"{directory / CONFIG}: neither a zoo model's (no zoo_format) nor a transformers model's "
                          f"whose class this transformers knows (architectures: {architectures or 'none'})")
    return cls


STORED = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}
"""safetensors' names of the floating dtypes a model's weights are stored in."""


def stored_dtype(directory: Path):
    """The widest floating dtype of the weights as stored (what say_dtype compares the dtype read
    with); an unreadable header is refused by name before transformers reads the folder."""
    import torch
    from safetensors import safe_open

    found = set()
    for path in sorted(directory.glob("*.safetensors")):
        try:
            with safe_open(str(path), "pt") as handle:
                found |= {handle.get_slice(name).get_dtype() for name in handle.keys()}  # noqa: SIM118 (a safetensors handle, not a dict)
        except Exception as err:  # any unreadable header: safetensors' own error types vary by version
            raise ConfigError(f"{path}: not a readable safetensors file ({err})") from None
    floating = {getattr(torch, STORED[name]) for name in found if name in STORED}
    if len(floating) == 1:
        return floating.pop()
    return torch.float64 if torch.float64 in floating else torch.float32  # float32 holds float16 and bfloat16 exactly


def check_weight_files(directory: Path) -> None:
    """Weights are read from safetensors files only, each a regular file: a pickle (`.bin`) could
    run code when loaded, so it is refused, never opened."""
    safe = sorted(directory.glob("*.safetensors"))
    pickled = sorted(path.name for pattern in ("*.bin", "*.pt", "*.pth", "*.ckpt") for path in directory.glob(pattern))
    if not safe:
        held = f"its weights as a pickle ({', '.join(pickled)})" if pickled else "no weights (model.safetensors)"
        raise ConfigError(f"{directory}: holds {held}; the zoo reads safetensors only (a pickle can run code when "
                          "loaded): save the model with save_pretrained(..., safe_serialization=True)")
    for path in safe:
        try:
            regular_file(path, "a weights file")
        except IsADirectoryError:
            raise ConfigError(f"{path}: is a folder, not the model's weights") from None
