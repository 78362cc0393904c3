"""The switches beyond the axes, grouped by what they change: attention (`attn`), the token tables
(`embeddings`) and the output head (`output`). Each also has a flat key, the one the spec took
before the groups (`window`, `tie_embeddings`, `logit_softcap`): files, `--set`, sweeps and
stored specs may still write it, canonical names show it, and a run's identity counts it, so
every earlier name and fingerprint holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator
from pydantic_core import PydanticCustomError

from zoo.errors import ConfigError
from zoo.specs.registries import registry
from zoo.specs.strict import StrictSettings


class AttentionSwitches(StrictSettings):
    """How attention forms its heads and scores, whichever axis part computes them."""

    n_kv_heads: PositiveInt | None = Field(
        None, description="key/value heads (grouped-query attention); null: n_heads, 1: multi-query"
    )
    head_width: PositiveInt | None = Field(
        None, description="the width of each attention head; null: d_model / n_heads (T5's d_kv may differ)"
    )
    scale_scores: bool = Field(
        True, description="divide attention scores by sqrt(d_head); T5 does not, and folds the factor into the "
                          "initial query weights, as the zoo does then"
    )
    scale_width: float | None = Field(
        None, gt=0.0, description="scores times scale_width^-1/2 instead of d_head^-1/2 (Gemma 2 and 3: "
                                  "query_pre_attn_scalar); null: d_head"
    )
    softcap: float | None = Field(
        None, gt=0.0, description="cap tanh(s / cap) on the scaled attention scores s, before any position bias and "
                                  "mask (Gemma 2: 50); null: none"
    )
    qk_norm: str | None = Field(
        None, description="normalize each head's queries and keys before the scores: a norm_type (rmsnorm: OLMo 2, "
                          "Qwen3, Gemma 3) over d_head, with the spec's norm_type settings where it names that "
                          "part, or l2 (unit length, scores times a learned per-head scale; "
                          "Henry et al. 2020); null: none"
    )
    qkv_bias: bool | None = Field(
        None, description="biases on the query, key and value projections; null: as `bias` (Qwen2: true beside bias "
                          "false; GPT-J: false beside bias true)"
    )
    out_bias: bool | None = Field(None, description="a bias on the attention's output projection; null: as `bias`")
    qk_norm_scope: Literal["head", "each_head", "projection"] = Field(
        "head", description="what one qk_norm normalizes: head, each head's d_head with gains shared by the heads "
                            "(Qwen3, Gemma 3); each_head, each head's d_head with gains of its own (StableLM, "
                            "Cohere); projection, all query heads together and all key heads together (OLMo 2)"
    )
    window: PositiveInt | None = Field(
        None, description="sliding-window self-attention: a query sees the keys fewer than `window` positions away "
                          "(in a causal stack, itself and the window - 1 before it: Mistral, Gemma 2); the decoding "
                          "cache keeps only the window; null: every key"
    )

    @field_validator("qk_norm")
    @classmethod
    def _known_qk_norm(cls, value: str | None) -> str | None:
        choices = ["l2", *registry("norm_type").names()]
        if value is not None and value not in choices:
            raise PydanticCustomError("qk_norm", "unknown qk_norm '{value}'; choices: null, {choices}",
                                      {"value": value, "choices": ", ".join(choices)})
        return value

    @model_validator(mode="after")
    def _scope_has_a_norm(self) -> AttentionSwitches:
        if self.scale_width is not None and not self.scale_scores:
            raise PydanticCustomError("scale_width", "scale_width {width} scales the scores, and scale_scores is false; "
                                      "give one of them", {"width": self.scale_width})
        if self.qk_norm_scope != "head" and self.qk_norm in (None, "l2"):
            raise PydanticCustomError(
                "qk_norm_scope", "qk_norm_scope {scope} normalizes by qk_norm's norm, and qk_norm is {value}; choose "
                "qk_norm among {choices}", {"scope": self.qk_norm_scope, "value": self.qk_norm or "null",
                                            "choices": ", ".join(registry("norm_type").names())})
        return self


class EmbeddingSwitches(StrictSettings):
    """How the token tables are sized, scaled, normalized and shared."""

    scale: bool = Field(True, description="multiply token embeddings by sqrt(d_model)")
    init_std: PositiveFloat | None = Field(
        None, description="the standard deviation the token tables are drawn with; null: d_model^-1/2 where scaled "
                          "(unit variance after the scale), else 1; GPT-2 draws 0.02, which keeps a tied output's "
                          "first logits small when trained from scratch")
    norm: bool = Field(False, description="a norm after adding positions (BERT-style)")
    tie: bool = Field(False, description="the output projection shares the target embedding")
    share: bool = Field(False, description="source and target share one embedding table (T5, BART, Marian)")
    dim: PositiveInt | None = Field(
        None, description="factorized embeddings: token tables of this width projected to d_model, and a tied output "
                          "projection reads through the same width; null: d_model"
    )
    dim_scope: Literal["tokens", "embedding"] = Field(
        "tokens", description="with `dim`, what works at the narrow width: tokens, the token table alone (projected to "
                              "d_model without a bias before positions are added); embedding, the whole embedding "
                              "(tokens, positions, token types, norm; then projected with `bias`) and the output head, "
                              "whose transform maps d_model to dim and normalizes there (ALBERT, ELECTRA)"
    )

    @model_validator(mode="after")
    def _scope_has_a_width(self) -> EmbeddingSwitches:
        if self.dim_scope != "tokens" and self.dim is None:
            raise PydanticCustomError("dim_scope", "dim_scope {scope} places the embedding at the width dim, and dim is "
                                      "null; give embedding_dim", {"scope": self.dim_scope})
        return self


class OutputSwitches(StrictSettings):
    """What stands between the last block and the logits."""

    scale: bool = Field(
        False, description="multiply the decoder's output by d_model^-1/2 before the output projection (T5 1.0, "
                           "whose projection is the tied embedding)"
    )
    bias: Literal["auto", "trained", "fixed", "none"] = Field(
        "auto", description="a bias on the logits: trained, fixed (kept with the weights, never trained: BART's and "
                            "Marian's final_logits_bias), none; auto: trained when `bias`, else none"
    )
    softcap: float | None = Field(
        None, gt=0.0, description="cap tanh(z / cap) on the output logits z (Gemma 2: 30); null: none"
    )
    transform: bool = Field(
        False, description="a dense layer, GELU and a norm (norm_type) before the output projection: BERT's masked-LM "
                           "head"
    )
    logit_scale: float | None = Field(
        None, gt=0.0, description="multiply the logits by this factor, before any softcap (Cohere: 0.0625); null: 1"
    )


GROUPS: dict[str, type[StrictSettings]] = {"attn": AttentionSwitches, "embeddings": EmbeddingSwitches,
                                           "output": OutputSwitches}
"""The spec's switch groups by field name."""

FLAT: dict[str, tuple[str | None, str]] = {
    "n_kv_heads": ("attn", "n_kv_heads"), "head_width": ("attn", "head_width"), "final_norm": (None, "final_norm"),
    "scale_embeddings": ("embeddings", "scale"), "embedding_norm": ("embeddings", "norm"),
    "tie_embeddings": ("embeddings", "tie"), "share_embeddings": ("embeddings", "share"),
    "scale_scores": ("attn", "scale_scores"), "scale_output": ("output", "scale"), "output_bias": ("output", "bias"),
    "attn_softcap": ("attn", "softcap"), "logit_softcap": ("output", "softcap"), "qk_norm": ("attn", "qk_norm"),
    "window": ("attn", "window"), "share_layers": (None, "share_layers"), "embedding_dim": ("embeddings", "dim"),
    "output_transform": ("output", "transform"), "bias": (None, "bias"), "qk_norm_scope": ("attn", "qk_norm_scope"),
    "qkv_bias": ("attn", "qkv_bias"), "out_bias": ("attn", "out_bias"), "scale_width": ("attn", "scale_width"),
    "logit_scale": ("output", "logit_scale"), "embedding_dim_scope": ("embeddings", "dim_scope"),
    "documents": (None, "documents"), "parametrization": (None, "parametrization"),
    "mup_base_width": (None, "mup_base_width"), "mup_base_head_width": (None, "mup_base_head_width"),
    "embedding_init_std": ("embeddings", "init_std"),
}
"""Every switch's flat key -> (its group, or None for a switch of the whole model, and its field
there), in the order a canonical name shows them (the spec's order before the groups)."""


def grouped_key(key: str) -> tuple[str, ...]:
    """The path of a flat key in the grouped spec (`window` -> ('attn', 'window')); any other key as it is."""
    group, field = FLAT.get(key, (None, key))
    return (field,) if group is None else (group, field)


def setting_path(key: str) -> tuple[str, ...]:
    """A dotted experiment key as the path of the setting it sets: a switch's flat key is its
    group's field (`model.window` -> model.attn.window)."""
    parts = tuple(key.split("."))
    return (parts[0], *grouped_key(parts[1]), *parts[2:]) if parts[0] == "model" and len(parts) > 1 else parts


def one_setting(a: str, b: str) -> bool:
    """Whether two keys set the same setting, or one a group that holds the other's."""
    left, right = setting_path(a), setting_path(b)
    shorter = min(len(left), len(right))
    return left[:shorter] == right[:shorter]


def _as_mapping(value: Any) -> dict[str, Any]:
    if isinstance(value, StrictSettings):
        return value.model_dump()
    return dict(value) if isinstance(value, Mapping) else value


def grouped(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Spec fields with every flat switch key moved into its group (`window: 8` -> `attn: {window: 8}`).
    A switch given both ways must agree: `window: 8` beside `attn: {window: 16}` is an error that
    names both."""
    out = dict(fields)
    for key in [key for key in fields if FLAT.get(key, (None,))[0] is not None]:
        group, field = FLAT[key]
        value = out.pop(key)
        holder = _as_mapping(out.get(group, {}))
        if not isinstance(holder, dict):
            raise ConfigError(f"{group} is a group of switches ({', '.join(GROUPS[group].model_fields)}), "
                              f"got {holder!r}")
        if field in holder and holder[field] != value:
            raise ConfigError(f"{key} {value!r} and {group}.{field} {holder[field]!r} are one switch given twice; "
                              f"give one of them")
        out[group] = {**holder, field: value}
    return out


def merge_groups(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Overrides on top of base for the switch groups, field by field (an override of `attn.window`
    keeps the base's `attn.qk_norm`); both in grouped form."""
    return {group: {**_as_mapping(base.get(group, {})), **_as_mapping(value)}
            if isinstance(value, (Mapping, StrictSettings)) and isinstance(base.get(group, {}), (Mapping, StrictSettings))
            else value for group, value in overrides.items() if group in GROUPS}


def flat_switches(recipe: Any) -> dict[str, Any]:
    """Every switch of a recipe by its flat key, in FLAT's order."""
    return {key: getattr(recipe if group is None else getattr(recipe, group), field)
            for key, (group, field) in FLAT.items()}


def flat_defaults(recipe_class: Any) -> dict[str, Any]:
    """Every switch's default by its flat key."""
    return {key: (recipe_class.model_fields[field] if group is None else GROUPS[group].model_fields[field]).default
            for key, (group, field) in FLAT.items()}


def flat_fields(dumped: Mapping[str, Any]) -> dict[str, Any]:
    """A dumped recipe as it was before the groups: each switch under its flat key, for a run's
    identity (whose fingerprints were computed from the flat keys)."""
    flat = {key: value for key, value in dumped.items() if key not in GROUPS}
    flat.update({key: dumped[group][field] for key, (group, field) in FLAT.items() if group is not None})
    return flat
