"""How a model's constants depend on its width: the standard parametrization, or muP (Yang et
al. 2022, "Tensor Programs V"), under which the best learning rate found at a small width
transfers to larger ones.

Under muP every width (d_model, d_ff, the heads' total width) grows by one multiplier m =
d_model / mup_base_width, and the model equals its standard self at the base width. What depends
on width is then:
- the output logits, multiplied by 1/m (the output multiplier; the output weights keep their
  learning rate, so a tied table serves as input and output alike);
- attention scores, scaled by sqrt(base head width) / d_head instead of 1 / sqrt(d_head);
- the constants the standard model computes from d_model (the embeddings' sqrt(d_model) and the
  std of tables), computed at the base width instead, so input coordinates do not grow with it;
- Adam's learning rate of each matrix whose fan-in grows with width, and the initial draw of a
  readout to a fixed width (an MoE router), both by 1/m (zoo.model.mup).

Each registered part says how it scales (zoo.specs.hooks.ScalesWithWidth); a part that declares
nothing, or that says why it cannot be made muP-correct, is refused under muP in one line.
"""

from __future__ import annotations

import math
from typing import Any, Literal, get_args

from zoo.specs.hooks import ScalesWithWidth, implements

Parametrization = Literal["standard", "mup"]
PARAMETRIZATIONS: tuple[str, ...] = get_args(Parametrization)

BASE_CLASSES = frozenset({"NormPlacement", "PositionScheme", "Attention", "FeedForwardBase"})
"""zoo.parts' base classes: a declaration a part inherits from one of them alone says nothing of it."""


def is_mup(spec: Any) -> bool:
    return spec.parametrization == "mup"


def width_multiplier(spec: Any) -> float:
    """m = d_model / mup_base_width under muP; 1 under the standard parametrization."""
    return spec.d_model / spec.mup_base_width if is_mup(spec) else 1.0


def scaling_width(spec: Any) -> int:
    """The width that the constants a standard model computes from d_model are computed at:
    the base width under muP, else d_model."""
    return spec.mup_base_width if is_mup(spec) else spec.d_model


def base_head_width(spec: Any) -> float:
    """The heads' width at the base width: mup_base_head_width, else d_head scaled with the width
    (the heads' count held, their width growing)."""
    given = spec.mup_base_head_width
    return float(given) if given is not None else spec.d_head / width_multiplier(spec)


def score_scale(spec: Any) -> float:
    """What attention multiplies its scores by: 1 / sqrt(d_head) (or scale_width^-1/2, or 1 where
    unscaled), or under muP sqrt(base head width) / d_head, which equals it at the base width."""
    if spec.parametrization == "mup":
        return math.sqrt(base_head_width(spec)) / spec.d_head
    return (spec.attn.scale_width or spec.d_head) ** -0.5 if spec.attn.scale_scores else 1.0


def declaration(part: type) -> str | None:
    """How a part scales under muP, where it (or a part it derives from) says so."""
    for cls in part.__mro__:
        if cls.__name__ in BASE_CLASSES and cls.__module__ == "zoo.parts":
            return None
        if "mup" in vars(cls):
            return vars(cls)["mup"]
    return None


def part_problem(axis: str, name: str, part: type) -> str | None:
    """Why a part cannot serve under muP: it declares no scaling, or it says why it cannot."""
    refused = getattr(part, "mup_refused", None)
    if refused:
        return f"parametrization mup: {axis} {name}: {refused}"
    if not implements(part, ScalesWithWidth) or declaration(part) is None:
        return (f"parametrization mup: {axis} {name} ({part.__name__}) declares no scaling with width (a class attribute "
                "`mup`, zoo.specs.hooks.ScalesWithWidth), so nothing says its activations stay the same size as "
                "width grows; use parametrization standard")
    return None


def switches_problem(spec: Any) -> str | None:
    """The settings beyond the parts that muP cannot keep width-independent, or that it needs."""
    if not is_mup(spec):
        given = [key for key in ("mup_base_width", "mup_base_head_width") if getattr(spec, key) is not None]
        if given:
            return f"{given[0]} {getattr(spec, given[0])} is read under parametrization mup only; set parametrization: " \
                   "mup, or leave it out"
        return None
    if spec.mup_base_width is None:
        return "parametrization mup needs mup_base_width: the d_model at which the model equals its standard self"
    refusals = {
        "attn.scale_scores false": (not spec.attn.scale_scores,
                                    "T5's unscaled scores fold 1/sqrt(d_head) into the queries' initial draw, and muP "
                                    "scales the scores themselves by 1/d_head; set scale_scores true"),
        "attn.scale_width": (spec.attn.scale_width is not None,
                             "a fixed score scale does not shrink as the heads widen; muP sets the scale itself"),
        "attn.qk_norm l2": (spec.attn.qk_norm == "l2",
                            "its learned score scale starts at d_head, which grows with the heads' width"),
        "embeddings.dim": (spec.embeddings.dim is not None,
                           "factorized tables hold a width that does not grow with d_model"),
        "output.logit_scale": (spec.output.logit_scale is not None,
                               "the output multiplier is muP's own 1/m; a fixed logit scale beside it is not"),
    }
    for setting, (present, why) in refusals.items():
        if present:
            return f"parametrization mup: {setting}: {why}"
    return None
