"""zoo: a configurable zoo of Transformer variants for ablation studies.

    model = zoo.build("pre.learned.per_head.gelu", vocab_size=1000)
"""

from zoo import interop
from zoo.errors import CheckpointError, ConfigError, DataError, Diverged, Interrupted, RunConflict, ZooError
from zoo.interop import from_hf, to_hf
from zoo.model.convert import convert
from zoo.model.kinds import AttentionMaps, DecoderOnly, EncoderDecoder, EncoderOnly, ZooModel, build
from zoo.specs.catalog import list_variants, load_spec, register_preset, resolve, spec
from zoo.specs.choices import Choice, PartSettings
from zoo.specs.experiment import ExperimentSpec, load_experiment
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import AXES, Registry, UnknownChoiceError, registry
from zoo.trainer import TrainResult, load, train

__all__ = [
    "AXES",
    "AttentionMaps",
    "CheckpointError",
    "Choice",
    "ConfigError",
    "DataError",
    "DecoderOnly",
    "Diverged",
    "EncoderDecoder",
    "EncoderOnly",
    "ExperimentSpec",
    "Interrupted",
    "ModelSpec",
    "PartSettings",
    "Registry",
    "RunConflict",
    "TrainResult",
    "UnknownChoiceError",
    "ZooError",
    "ZooModel",
    "build",
    "convert",
    "from_hf",
    "interop",
    "list_variants",
    "load",
    "load_experiment",
    "load_spec",
    "register_preset",
    "registry",
    "resolve",
    "spec",
    "to_hf",
    "train",
]
