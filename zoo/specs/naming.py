"""How a spec is named: its canonical name shows every design choice away from its default, so a
name identifies a model up to its sizes (zoo.specs.catalog reads names back into fields)."""

from __future__ import annotations

from typing import Any

from zoo.specs.choices import value_text
from zoo.specs.layer_rules import rules_text
from zoo.specs.registries import AXES, NAMED_AXES
from zoo.specs.switches import flat_defaults, flat_switches

DEFAULT_KIND = "encoder_decoder"
"""The kind a name leaves out."""


class CanonicalName:
    """The naming of ModelRecipe and ModelSpec, which give it their fields, `model_fields` and
    `_auto_final_norm()` (what final_norm auto resolves to)."""

    @property
    def name(self) -> str:
        """Canonical variant name, e.g. `pre.learned.per_head.gelu`: the axes' name (`axes_name`),
        then every switch away from its default as `key=value` joined by `+`
        (`pre.rope.sdpa.swiglu.rmsnorm.qk_norm=rmsnorm+window=128`), so a name identifies a model
        up to its sizes; per-layer rules follow as `layers={...}`."""
        switches = [f"{key}={value_text(value)}" for key, value in self.switches().items()]
        if self.layers:  # per-layer rules last, as compact JSON (zoo.specs.layer_rules)
            switches.append(f"layers={rules_text(self.layers)}")
        return ".".join([self.axes_name, *(["+".join(switches)] if switches else [])])

    @property
    def axes_name(self) -> str:
        """The kind unless it is the default (`decoder.pre.rope.sdpa.swiglu`), the axes of
        NAMED_AXES always, then each later axis whose value is not its default; every part with its
        non-default settings (`pre.rope+base=500000.0.fused.relu`). A run folder's name starts
        with it, as it always has."""
        kind = [] if self.kind == DEFAULT_KIND else [self.kind]
        return ".".join([*kind, *(str(getattr(self, axis)) for axis in AXES
                                  if axis in NAMED_AXES or getattr(self, axis) != type(self).model_fields[axis].default)])

    def switches(self) -> dict[str, Any]:
        """The switches (window, qk_norm, tie_embeddings, ...: zoo.specs.switches.FLAT) whose values
        differ from their defaults, by their flat keys in FLAT's order; a field whose default stands
        for a value (auto, or null for the usual width) only where it differs from that value
        (`final_norm: true` beside pre is pre's own, `head_width: 64` of 8 heads of 512 the usual)."""
        auto = {"final_norm": self._auto_final_norm(), "output_bias": "trained" if self.bias else "none",
                "n_kv_heads": self.n_heads, "head_width": self.d_model / self.n_heads, "embedding_dim": self.d_model,
                "qkv_bias": self.bias, "out_bias": self.bias}
        defaults = flat_defaults(type(self))
        return {key: value for key, value in flat_switches(self).items()
                if value != defaults[key] and value != auto.get(key, defaults[key])}
