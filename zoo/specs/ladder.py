"""One rule for a model's sizes: every width grows with d_model. The heads grow in count, each
keeping its width (as GPT-3's, Chinchilla's and Pythia's ladders do), the key/value heads with
them, and an explicit d_ff in proportion (`auto` follows d_model by itself). A ladder, a
coordinate check and a muP transfer study all size their models by it, so a "wider" model is
the same model at every rung."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from zoo.errors import ConfigError


def scaled(value: int, ratio: Fraction, field: str, width: int, recipe: Any) -> int:
    grown = value * ratio
    if grown.denominator != 1:
        raise ConfigError(f"d_model {width}: {field} {value} of d_model {recipe.d_model} grows to {float(grown):g}, "
                          f"not a whole number; choose widths that are multiples of d_model / {field}")
    return int(grown)


def widened(recipe: Any, width: int) -> Any:
    """The recipe at d_model `width`, every width grown with it (heads by their count)."""
    ratio = Fraction(width, recipe.d_model)
    changes: dict[str, Any] = {"d_model": width, "n_heads": scaled(recipe.n_heads, ratio, "n_heads", width, recipe)}
    if recipe.attn.n_kv_heads is not None:
        changes["n_kv_heads"] = scaled(recipe.attn.n_kv_heads, ratio, "n_kv_heads", width, recipe)
    if recipe.attn.head_width is None:
        changes["head_width"] = None  # d_model / n_heads: the heads' width, held
    if recipe.d_ff != "auto":
        changes["d_ff"] = scaled(recipe.d_ff, ratio, "d_ff", width, recipe)
    return recipe.replace(**changes)


def mup_at(recipe: Any, width: int, base: Any) -> Any:
    """`widened`, under muP with `base` (a recipe) as its base width and head width."""
    return widened(recipe, width).replace(parametrization="mup", mup_base_width=base.d_model,
                                          mup_base_head_width=base.d_head)
