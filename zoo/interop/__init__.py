"""Interop with the implementations researchers trust: the proof that the zoo's parts are theirs.

- `from_torch`: the usual torch.nn.Transformer wrapper of the PyTorch tutorials (zoo.interop.torch_nn).
- `from_hf` / `to_hf`: every family of transformers' models in FAMILIES (docs/families.md lists
  them), one record each (zoo.interop.family), needing `pip install zoo[hf]`. Importing the package
  imports every module in it, as the built-in parts are: each family module registers its families.
"""

from zoo.interop.hf import FAMILIES, from_hf, to_hf
from zoo.interop.torch_nn import from_torch
from zoo.specs.registries import import_modules

import_modules(__name__, __path__)

__all__ = ["FAMILIES", "from_hf", "from_torch", "to_hf"]
