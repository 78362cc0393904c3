"""zoo.from_pretrained: the model a folder holds, whichever library's save_pretrained wrote it."""

from __future__ import annotations

from pathlib import Path

from zoo.errors import ConfigError
from zoo.interop.hf import from_hf
from zoo.model.pretrained import CONFIG, load_zoo_folder, read_config


def from_pretrained(directory: str | Path):
    """The model a folder holds, in eval mode on the CPU: a zoo model's (its spec and weights), or
    a transformers model's saved locally (read with transformers, offline, then `from_hf`)."""
    directory = Path(directory)
    config = read_config(directory)
    if "zoo_format" in config:
        return load_zoo_folder(directory, config)
    return from_transformers_folder(directory, config)


def from_transformers_folder(directory: Path, config: dict):
    """A transformers model saved with save_pretrained: its class from the configuration, read
    from the folder alone (local_files_only), then imported by from_hf."""
    try:
        import transformers
    except ImportError as err:
        raise ConfigError(f"{directory}: a transformers model folder needs transformers ({err}): "
                          "pip install 'zoo[hf]'") from None
    architectures = config.get("architectures") or []
    cls = next((getattr(transformers, name) for name in architectures if hasattr(transformers, name)), None)
    if cls is None:
        raise ConfigError(f"{directory / CONFIG}: neither a zoo model's (no zoo_format) nor a transformers model's "
                          f"whose class this transformers knows (architectures: {architectures or 'none'})")
    return from_hf(cls.from_pretrained(directory, local_files_only=True).eval())
