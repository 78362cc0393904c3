"""zoo: a configurable zoo of Transformer variants for ablation studies.

    model = zoo.build("pre.learned.per_head.gelu", vocab_size=1000)
"""

from zoo import interop
from zoo.catalog import list_variants, load_spec, register_preset, resolve, spec
from zoo.convert import convert
from zoo.model import AttentionMaps, EncoderDecoder, build
from zoo.registry import AXES, Registry, UnknownChoiceError, registry
from zoo.spec import ModelSpec
from zoo.experiment import ExperimentSpec, load_experiment
from zoo.train import Diverged, TrainResult, load, train

__all__ = [
    "AXES",
    "AttentionMaps",
    "Diverged",
    "EncoderDecoder",
    "ExperimentSpec",
    "TrainResult",
    "ModelSpec",
    "Registry",
    "UnknownChoiceError",
    "build",
    "interop",
    "convert",
    "list_variants",
    "load",
    "load_experiment",
    "load_spec",
    "register_preset",
    "registry",
    "resolve",
    "spec",
    "train",
]
