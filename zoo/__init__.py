"""zoo: a configurable zoo of Transformer variants for ablation studies.

    model = zoo.build("pre.learned.per_head.gelu", vocab_size=1000)
"""

from zoo import interop
from zoo.catalog import list_variants, load_spec, register_preset, resolve, spec
from zoo.convert import convert
from zoo.model import AttentionMaps, EncoderDecoder, build
from zoo.registry import AXES, Registry, UnknownChoiceError, registry
from zoo.spec import ModelSpec

__all__ = [
    "AXES",
    "AttentionMaps",
    "EncoderDecoder",
    "ModelSpec",
    "Registry",
    "UnknownChoiceError",
    "build",
    "interop",
    "convert",
    "list_variants",
    "load_spec",
    "register_preset",
    "registry",
    "resolve",
    "spec",
]
