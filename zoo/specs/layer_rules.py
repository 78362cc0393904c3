"""Per-layer patterns: settings of a layer that vary with its index by a declared rule.

One mechanism for every interleaving the field uses: Gemma 2's sliding window on alternate
layers, Gemma 3's five local layers to one global with its own rope base, ModernBERT's global
attention every third layer and its first layer without an attention norm, Character.AI's one
global layer in six. A spec holds its rules by name, in order (a later rule wins where two
select one layer):

    layers:
      global: {every: 4, set: {window: null, position: {base: 1000000.0}}}
      first: {only: [0], set: {norm: {attention_norm: false}}}

so `model.layers.global.every` is a sweep's grid key (every 1: all global, 2: 1:1, 4: 3:1, 6: 5:1).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, ValidationError, field_serializer, field_validator, model_validator
from pydantic_core import PydanticCustomError

from zoo.errors import describe_validation
from zoo.specs.registries import AXES, close_match
from zoo.specs.strict import StrictSettings
from zoo.specs.switches import FLAT, GROUPS, grouped

LAYER_KEYS: tuple[str, ...] = (*AXES, "d_ff", *(key for key, (group, _) in FLAT.items() if group == "attn"), "attn")
"""What a rule may set: any axis (a mapping without a name changes the settings of the spec's own
part), the feed-forward width, and attention's switches (by flat key or in `attn`)."""

NAME = re.compile(r"[A-Za-z_]\w*")
ATTN_FLAT = {key: field for key, (group, field) in FLAT.items() if group == "attn"}
"""Attention's switches by their flat keys (`window`) -> their fields in `attn`."""
FLAT_OF_ATTN = {field: key for key, field in ATTN_FLAT.items()}


class LayerRule(StrictSettings):
    """The layers a rule selects (in each stack, counted from 0 at the embeddings) and what it sets there."""

    every: PositiveInt = Field(1, description="the period of the pattern: one layer in every `every`")
    at: NonNegativeInt | None = Field(
        None, description="which layer of each period, from 0; null: the last (every 2: layers 1, 3, 5, ...)"
    )
    only: list[NonNegativeInt] | None = Field(None, description="these layer indices instead of a period")
    stack: Literal["all", "encoder", "decoder"] = Field("all", description="the stacks whose layers the rule selects")
    set: dict[str, Any] = Field(description=f"the layer's settings: {', '.join(LAYER_KEYS)}")

    @field_validator("set", mode="before")
    @classmethod
    def _attention_grouped(cls, value: Any) -> Any:
        """Attention's switches given by flat key (`window: 8`) move into `attn` once, here, where
        the rule enters: the rule holds the grouped form only (in the place of the first of them)."""
        if not isinstance(value, Mapping):
            return value
        moved = {key: item for key, item in value.items() if key in ATTN_FLAT or key == "attn"}
        if not moved:
            return dict(value)
        attn = grouped(moved)["attn"]
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in moved:
                out.setdefault("attn", attn)
            else:
                out[key] = item
        return out

    @field_serializer("set")
    def _attention_flat(self, value: dict[str, Any]) -> dict[str, Any]:
        """Written with attention's switches under their flat keys, as the first rules were: a
        rule's canonical name and a run's fingerprint are those rules', whichever way it is given."""
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "attn" and isinstance(item, Mapping) and all(field in FLAT_OF_ATTN for field in item):
                out.update({FLAT_OF_ATTN[field]: switch for field, switch in item.items()})
            else:
                out[key] = item
        return out

    @model_validator(mode="after")
    def _well_formed(self) -> LayerRule:
        offset = self.every - 1 if self.at is None else self.at
        if offset >= self.every:
            raise PydanticCustomError("rule_at", "at {at} is outside a period of every {every} (0..{last})",
                                      {"at": self.at, "every": self.every, "last": self.every - 1})
        if self.only is not None and (self.every != 1 or self.at is not None):
            raise PydanticCustomError("rule_only", "a rule selects by `only` or by `every`/`at`, not both", {})
        unknown = [key for key in self.set if key not in LAYER_KEYS]
        if unknown:
            raise PydanticCustomError(
                "rule_key", "set: '{key}' is not a setting a layer may change; choices: {choices}",
                {"key": unknown[0], "choices": ", ".join(LAYER_KEYS)})
        if not self.set:
            raise PydanticCustomError("rule_empty", "set: a rule sets at least one of {choices}",
                                      {"choices": ", ".join(LAYER_KEYS)})
        return self

    def selects(self, stack: str, index: int) -> bool:
        if self.stack not in ("all", stack):
            return False
        if self.only is not None:
            return index in self.only
        return index % self.every == (self.every - 1 if self.at is None else self.at)


def distinct_layers(rules: Mapping[str, LayerRule], stack: str, depth: int) -> dict[int, int]:
    """The layers of a stack of `depth` grouped by the rules that select them: a representative index
    of each group -> how many layers it stands for, found from one period of the pattern and the
    `only` indices, so a depth of a million costs one period."""
    def selection(index: int, periodic_only: bool = False) -> tuple[str, ...]:
        return tuple(name for name, rule in rules.items()
                     if (not periodic_only or rule.only is None) and rule.selects(stack, index))

    period = math.lcm(*(rule.every for rule in rules.values() if rule.only is None)) if rules else 1
    listed = {i for rule in rules.values() if rule.only for i in rule.only if i < depth}
    groups: dict[tuple[str, ...], list[int]] = {}  # selection -> [representative, count]
    for residue in range(min(period, depth)):
        members = range(residue, depth, period)
        count = len(members) - sum(1 for i in listed if i % period == residue)
        representative = next((i for i in members if i not in listed), None)
        if representative is not None:
            groups.setdefault(selection(residue, periodic_only=True), [representative, 0])[1] += count
    for index in sorted(listed):
        groups.setdefault(selection(index), [index, 0])[1] += 1
    return {representative: count for representative, count in groups.values() if count}


def selecting(indices: list[int], depth: int) -> dict[str, Any]:
    """A rule's selection of exactly these layers of a stack of `depth`: a period and offset where
    they have one (layers 1, 3, 5: every 2), else the indices."""
    for every in range(1, depth + 1):
        at = indices[0] if indices else 0
        if at < every and indices == list(range(at, depth, every)):
            return {"every": every} if at == every - 1 else {"every": every, "at": at}
    return {"only": list(indices)}


def layer_fields(fields: Mapping[str, Any], rules: Mapping[str, LayerRule], stack: str, index: int) -> dict[str, Any]:
    """The spec fields (dumped, grouped) of layer `index` of `stack`: the rules that select it applied
    in order to the spec's own, and no rules of its own."""
    out = {**fields, "layers": {}}
    for rule in rules.values():
        if rule.selects(stack, index):
            out = apply_settings(out, rule.set)
    return out


def apply_settings(fields: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """Fields with a rule's settings (grouped, as the rule holds them) on top: an axis given as a
    mapping without a name keeps the spec's part and changes its settings; an attention switch
    changes alone."""
    out = dict(fields)
    for key, value in settings.items():
        if key in AXES and isinstance(value, Mapping) and "name" not in value:
            base = out[key] if isinstance(out[key], Mapping) else {"name": str(out[key])}
            value = {**base, **value}
        elif key in GROUPS and isinstance(value, Mapping):
            value = {**dict(out.get(key) or {}), **value}
        out[key] = value
    return out


def selection_problem(name: str, rule: LayerRule, depths: dict[str, int]) -> str | None:
    """A rule whose indices cannot be meant: none, or one past every stack's depth. Such a rule
    changes the name and the fingerprint, never the model. Two rules that select nothing stay
    allowed, as the layer count of a stack the kind lacks is: one for a stack the model lacks (a
    spec swept across kinds), and a period longer than the stack (a sweep's grid over `every`
    reaches "no such layer" so)."""
    if rule.only is None:
        return None
    selected = [depth for stack, depth in depths.items() if depth and rule.stack in ("all", stack)]
    if not selected:
        return None
    deepest = max(selected)
    past = [index for index in rule.only if index >= deepest]
    if not rule.only or past:
        shown = "[]: no layer" if not rule.only else f"{past}: past the last layer, {deepest - 1}"
        return f"layers.{name}.only: {shown}; the rule would change the model's name, never the model"
    return None


def rule_without_settings(rules: Any) -> str | None:
    """A rule given without `set` (which every rule needs), said with the rule of the model its name
    is closest to: most often a typo in a dotted key (`model.layers.globl.every` beside `global`)."""
    if not isinstance(rules, Mapping):
        return None
    unset = [name for name, rule in rules.items() if isinstance(rule, Mapping) and "set" not in rule]
    if not unset:
        return None
    others = [str(name) for name in rules if name not in unset]
    close = close_match(unset[0], others)
    hint = (f"did you mean the rule '{close}'? " if close else
            f"the model's rules are {', '.join(others)}; " if others else "")
    return (f"{unset[0]}: a rule without `set` (the settings it gives its layers); {hint}a new rule needs "
            f"set: {{KEY: VALUE}}, KEY one of {', '.join(LAYER_KEYS)}")


def rules_problem(spec: Any) -> str | None:
    """What is wrong with a spec's rules, or None: a rule's name that a dotted key cannot reach, a
    setting the layer's spec refuses (said as that spec says it), or rules beside share_layers (a
    position scheme that adds to the embeddings, which no layer can change, is refused where the
    stack is built: zoo.model.stacks.layer_block)."""
    if spec.layers and spec.share_layers:
        return "layers: share_layers applies one layer's weights at every depth, so its layers cannot differ"
    for name, rule in spec.layers.items():
        if not NAME.fullmatch(name):
            return f"layers: a rule's name is a word of letters, digits and _ (a dotted key reaches it), got {name!r}"
        problem = selection_problem(name, rule, dict(zip(("encoder", "decoder"), spec.depths, strict=True)))
        if problem:
            return problem
        try:
            type(spec).model_validate(apply_settings({**spec.model_dump(), "layers": {}}, rule.set))
        except ValidationError as err:
            return f"layers.{name}.set: {describe_validation(err)}"
    return None


def rules_text(rules: Mapping[str, LayerRule]) -> str:
    """The rules as a canonical name shows them: compact JSON of each rule's fields away from their
    defaults (YAML reads it back)."""
    dumped = {name: rule.model_dump(mode="json", exclude_defaults=True) for name, rule in rules.items()}
    return json.dumps(dumped, separators=(",", ":"))
