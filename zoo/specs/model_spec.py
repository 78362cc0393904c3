"""ModelSpec: the single, validated description of one variant, of any kind; ModelRecipe: the
same without the vocabulary sizes, which an experiment's task fills in."""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    NonNegativeInt,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from zoo.dropout.rates import DropoutRates
from zoo.errors import ConfigError, describe_validation
from zoo.specs.choices import AxisChoice, Choice
from zoo.specs.hooks import AutoWidth, SpecCheck, implements, wants_final_norm
from zoo.specs.layer_rules import LayerRule, layer_fields, rule_without_settings, rules_problem
from zoo.specs.naming import DEFAULT_KIND, CanonicalName
from zoo.specs.parametrization import Parametrization, is_mup, part_problem, switches_problem
from zoo.specs.registries import AXES, KINDS, describe_unknown, kinds, registry
from zoo.specs.strict import StrictSettings
from zoo.specs.switches import FLAT, AttentionSwitches, EmbeddingSwitches, OutputSwitches, grouped, merge_groups
from zoo.specs.synonyms import MODEL_SYNONYMS
from zoo.specs.yamlio import dump_yaml


class ModelRecipe(CanonicalName, DropoutRates, StrictSettings):
    """Every choice that defines a model, the vocabulary sizes optional: what an experiment holds,
    validated at load, whose sizes the task's vocabulary fills in (`sized`). Immutable; unknown
    keys are rejected.

    `vocab_size` is accepted as shorthand for equal source and target vocabularies. A model of one
    stack (`decoder`, `encoder`) has one vocabulary, so its two sizes must be equal; it ignores the
    layer count of the stack it lacks, so one spec can be swept across kinds.
    """

    _layer_specs: dict[tuple, Any] = PrivateAttr(default_factory=dict)
    """Each layer's spec, by the names of the rules that select it (validated once) and by (stack,
    index): what at_layer gave."""
    synonyms: ClassVar[dict[str, str]] = MODEL_SYNONYMS
    shorthands: ClassVar[tuple[str, ...]] = tuple(key for key, (group, _) in FLAT.items() if group is not None)

    kind: str = Field(
        DEFAULT_KIND, description="encoder_decoder; decoder: a causal language model (n_decoder_layers); encoder: "
                                  "bidirectional, a masked-language-model head (n_encoder_layers)"
    )
    src_vocab_size: PositiveInt | None = Field(None, description="null: the task's")
    tgt_vocab_size: PositiveInt | None = Field(None, description="null: the task's")
    d_model: PositiveInt = 512
    n_heads: PositiveInt = 8
    d_ff: PositiveInt | Literal["auto"] = Field(
        2048, description="feed-forward width; auto: 4 d_model, or 2/3 of it (to a multiple of 8) for a gated ffn"
    )
    n_encoder_layers: PositiveInt = 6
    n_decoder_layers: PositiveInt = 6
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    max_len: PositiveInt = 512
    pad_id: NonNegativeInt = 0
    bos_id: NonNegativeInt = Field(
        1, description="the decoder's start token; may equal pad_id (T5, Marian: the first position is then never "
                       "padding) or eos_id (BART)"
    )
    eos_id: NonNegativeInt = 2
    norm: Annotated[Choice, AxisChoice("norm")] = Field("post", validate_default=True)
    position: Annotated[Choice, AxisChoice("position")] = Field("sinusoidal", validate_default=True)
    attention: Annotated[Choice, AxisChoice("attention")] = Field("fused", validate_default=True)
    ffn: Annotated[Choice, AxisChoice("ffn")] = Field("relu", validate_default=True)
    norm_type: Annotated[Choice, AxisChoice("norm_type")] = Field(
        "layernorm", validate_default=True, description="the normalization of every placement, final and embedding norm"
    )
    final_norm: Literal["auto"] | bool = Field(
        "auto", description="a norm after the last block of each stack; auto: as the norm placement wants"
    )
    share_layers: bool = Field(
        False, description="one set of layer weights applied at every depth of each stack (Universal Transformer, "
                           "ALBERT)"
    )
    attn: AttentionSwitches = Field(default_factory=AttentionSwitches,
                                    description="attention's switches: n_kv_heads, head_width, scale_scores, softcap, "
                                                "qk_norm, window")
    embeddings: EmbeddingSwitches = Field(default_factory=EmbeddingSwitches,
                                          description="the token tables' switches: scale, norm, tie, share, dim")
    output: OutputSwitches = Field(default_factory=OutputSwitches,
                                   description="the output head's switches: scale, bias, softcap, transform")
    bias: bool = Field(True, description="biases in the linear layers")
    layers: dict[str, LayerRule] = Field(
        {}, description="per-layer rules by name, applied in order, a later one winning: e.g. {global: {every: 4, "
                        "set: {window: null}}} (zoo.specs.layer_rules)"
    )
    documents: Literal["joined", "separate", "masked"] = Field(
        "joined", description="documents packed in one row, each starting at bos_id (the lm task's pack): joined, "
                              "attention crosses their boundaries (GPT-2, nanoGPT); separate, it stops at every "
                              "boundary and positions restart there, so each document is computed as if alone (one cut "
                              "across packed rows continues its learned or sinusoidal positions in the next); "
                              "masked, it stops but positions run on along the row (Llama 3's document mask). "
                              "Kind decoder"
    )
    parametrization: Parametrization = Field(
        "standard", description="how the model's constants depend on its width: standard; mup, muP (Yang et al. "
                                "2022), under which the best learning rate at mup_base_width transfers to wider models "
                                "(zoo.specs.parametrization)"
    )
    mup_base_width: PositiveInt | None = Field(
        None, description="muP: the d_model at which the model equals its standard self; every width grows with "
                          "d_model / mup_base_width"
    )
    mup_base_head_width: PositiveInt | None = Field(
        None, description="muP: the heads' width at the base width; null: d_head scaled with the width (the heads' "
                          "count held); give the head width itself where the heads' count grows instead"
    )

    @field_validator("layers", mode="before")
    @classmethod
    def _every_rule_sets(cls, rules: Any) -> Any:
        problem = rule_without_settings(rules)
        if problem:
            raise PydanticCustomError("rule_set", "{problem}", {"problem": problem})
        return rules

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in KINDS and kind not in kinds():  # kinds() loads the built-in ones where none are yet
            raise PydanticCustomError("kind", "{problem}", {"problem": describe_unknown("kind", kind, KINDS)})
        return kind

    @model_validator(mode="before")
    @classmethod
    def _group_flat_switches(cls, data: Any) -> Any:
        """Today's flat keys (`window`, `tie_embeddings`, ...) go into their groups, so every file,
        `--set`, sweep, checkpoint and folder written before the groups reads as it did."""
        if not isinstance(data, dict):
            return data
        try:
            return grouped(data)
        except ConfigError as err:
            raise PydanticCustomError("switch_twice", "{problem}", {"problem": str(err)}) from None

    @model_validator(mode="before")
    @classmethod
    def _expand_vocab_size(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "vocab_size" not in data:
            return data
        data = dict(data)
        size = data.pop("vocab_size")
        for side in ("src_vocab_size", "tgt_vocab_size"):
            if side in data and data[side] != size:
                raise PydanticCustomError(
                    "vocab_conflict",
                    "vocab_size {size} conflicts with {side} {other}; give one or the other",
                    {"size": size, "side": side, "other": data[side]},
                )
            data[side] = size
        return data

    @model_validator(mode="after")
    def _fits_together(self) -> ModelRecipe:
        """Rules between fields, checked on the assembled spec so that defaults count too."""
        if self.attn.head_width is None and self.d_model % self.n_heads:
            raise PydanticCustomError(
                "heads_divide_width",
                "d_model {d_model} is not divisible by n_heads {n_heads}; choose n_heads among {choices}, or set "
                "head_width",
                {"d_model": self.d_model, "n_heads": self.n_heads,
                 "choices": ", ".join(str(h) for h in range(1, min(self.d_model, 64) + 1) if self.d_model % h == 0)},
            )
        if self.n_heads % self.kv_heads:
            raise PydanticCustomError(
                "kv_heads_divide_heads",
                "n_heads {n_heads} is not divisible by n_kv_heads {kv}; choose n_kv_heads among {choices}",
                {"n_heads": self.n_heads, "kv": self.kv_heads,
                 "choices": ", ".join(str(h) for h in range(1, self.n_heads + 1) if self.n_heads % h == 0)},
            )
        specials = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        for field, value in specials.items():
            for side in ("src_vocab_size", "tgt_vocab_size"):
                size = getattr(self, side)
                if size is not None and value >= size:
                    raise PydanticCustomError(
                        "special_id_range",
                        "{field} {value} is outside {side} {size} (valid ids 0..{last})",
                        {"field": field, "value": value, "side": side, "size": size, "last": size - 1},
                    )
        if self.pad_id == self.eos_id:
            raise PydanticCustomError(
                "special_id_distinct", "pad_id and eos_id must differ (bos_id may equal either), got {ids}",
                {"ids": ", ".join(f"{k} {v}" for k, v in specials.items())},
            )
        stacks = self.stacks
        one_causal_stack = stacks == ("decoder",)
        if self.documents != "joined" and (not one_causal_stack or self.bos_id in (self.pad_id, self.eos_id)):
            raise PydanticCustomError(
                "documents", "documents {documents}: documents are told apart by their start token in the one row of a "
                "decoder-only model; it needs a model of that kind (got {kind}) and a bos_id apart from pad_id and "
                "eos_id (got {ids}); choices for this model: joined",
                {"documents": self.documents, "kind": self.kind, "ids": ", ".join(f"{k} {v}" for k, v in specials.items())},
            )
        sized = self.src_vocab_size is not None and self.tgt_vocab_size is not None
        if sized and len(stacks) == 1 and self.src_vocab_size != self.tgt_vocab_size:
            raise PydanticCustomError(
                "one_vocab", "a model of kind {kind} has one vocabulary: src_vocab_size {src} and tgt_vocab_size {tgt} "
                "differ; give vocab_size", {"kind": self.kind, "src": self.src_vocab_size, "tgt": self.tgt_vocab_size},
            )
        if self.embeddings.share and len(stacks) == 1:
            raise PydanticCustomError(
                "one_table", "share_embeddings shares the encoder's and the decoder's tables; a model of kind {kind} "
                "has one table", {"kind": self.kind},
            )
        if sized and self.embeddings.share and self.src_vocab_size != self.tgt_vocab_size:
            raise PydanticCustomError(
                "shared_vocab", "share_embeddings needs one vocabulary: src_vocab_size {src} and tgt_vocab_size {tgt} "
                "differ", {"src": self.src_vocab_size, "tgt": self.tgt_vocab_size},
            )
        for axis in AXES:  # a part may say what it cannot do with the rest of the spec
            part = registry(axis).get(getattr(self, axis).name)
            problem = part.spec_problem(self) if implements(part, SpecCheck) else None
            if problem:
                raise PydanticCustomError("part_needs", "{problem}", {"problem": problem})
        # read here, not called: every spec validation passes this line (zoo/specs' call budget)
        if self.parametrization != "standard" or self.mup_base_width or self.mup_base_head_width:
            problem = switches_problem(self) or (self._part_scaling_problem() if is_mup(self) else None)
            if problem:
                raise PydanticCustomError("parametrization", "{problem}", {"problem": problem})
        problem = rules_problem(self)
        if problem:
            raise PydanticCustomError("layer_rule", "{problem}", {"problem": problem})
        return self

    def _part_scaling_problem(self) -> str | None:
        for axis in AXES:
            problem = part_problem(axis, getattr(self, axis).name, registry(axis).get(getattr(self, axis).name))
            if problem:
                return problem
        return None

    def _auto_final_norm(self) -> bool:
        return wants_final_norm(registry("norm").get(self.norm.name), self)

    @property
    def stacks(self) -> tuple[str, ...]:
        """The stacks the model of this kind has (its class's `reads`, zoo.specs.registries.KINDS)."""
        return tuple(KINDS[self.kind].reads)

    @property
    def depths(self) -> tuple[int, int]:
        """(encoder layers, decoder layers) of the model built, 0 for a stack its kind lacks."""
        stacks = KINDS[self.kind].reads  # asked for every layer by the stacks and interop: read, not called
        return (self.n_encoder_layers if "encoder" in stacks else 0, self.n_decoder_layers if "decoder" in stacks else 0)

    @property
    def embedding_width(self) -> int:
        """The width of the token tables: embedding_dim, or d_model without factorization."""
        return self.d_model if self.embeddings.dim is None else self.embeddings.dim

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads if self.attn.head_width is None else self.attn.head_width

    @property
    def attention_width(self) -> int:
        """The width of all query heads together: d_model unless head_width sets it apart."""
        return self.n_heads * self.d_head

    @property
    def logits_bias(self) -> str:
        """`trained`, `fixed` or `none`: output_bias with `auto` resolved by `bias`."""
        if self.output.bias == "auto":
            return "trained" if self.bias else "none"
        return self.output.bias

    @property
    def start_is_pad(self) -> bool:
        """The decoder starts from the pad id (T5, Marian), so its first position is never padding."""
        return self.bos_id == self.pad_id

    @property
    def ffn_width(self) -> int:
        """d_ff, with `auto` resolved by the feed-forward part (gated ones keep the parameter count)."""
        if self.d_ff != "auto":
            return self.d_ff
        part = registry("ffn").get(self.ffn.name)
        return part.auto_width(self.d_model) if implements(part, AutoWidth) else 4 * self.d_model

    @property
    def qkv_bias(self) -> bool:
        """Biases on the query, key and value projections: attn.qkv_bias, or `bias` where it is null."""
        return self.bias if self.attn.qkv_bias is None else self.attn.qkv_bias

    @property
    def out_bias(self) -> bool:
        return self.bias if self.attn.out_bias is None else self.attn.out_bias

    @property
    def kv_heads(self) -> int:
        """Key/value heads: n_kv_heads, or n_heads when it is not set."""
        return self.n_heads if self.attn.n_kv_heads is None else self.attn.n_kv_heads

    @property
    def uses_final_norm(self) -> bool:
        return self._auto_final_norm() if self.final_norm == "auto" else self.final_norm

    def at_layer(self, stack: str, index: int):
        """The spec of layer `index` (from 0) of `stack` (encoder or decoder): this spec where no rule
        of `layers` selects the layer, else its fields with the rules' settings. Validated once per
        selection of rules and kept (the spec is frozen): a 26-layer stack of two kinds of layer
        validates two specs, however often the stacks, the size checks and interop ask."""
        if not self.layers:
            return self
        known = self._layer_specs.get((stack, index))
        if known is not None:
            return known
        selected = tuple(name for name, rule in self.layers.items() if rule.selects(stack, index))
        if not selected:
            spec = self
        elif selected in self._layer_specs:
            spec = self._layer_specs[selected]
        else:
            spec = self._layer_specs[selected] = type(self).model_validate(
                layer_fields(self.model_dump(), self.layers, stack, index))
        self._layer_specs[(stack, index)] = spec
        return spec

    def replace(self, **changes: Any):
        """A copy with `changes`, validated: a switch changes alone, by its flat key or in its group
        (`replace(window=128)` and `replace(attn={"window": 128})` keep `attn.qk_norm`)."""
        dumped, changes = self.model_dump(), grouped(changes)
        try:
            return type(self).model_validate({**dumped, **changes, **merge_groups(dumped, changes)})
        except ValidationError as err:  # the error zoo.spec raises for the same mistake
            raise ConfigError(describe_validation(err)) from err

    def as_built(self) -> dict[str, Any]:
        """The spec's fields as the model is built from them: a default that stands for a value
        (final_norm auto, n_kv_heads and head_width unset, output.bias auto) is that value, so a
        spec that writes it out is the same model, and equal (`zoo.spec(spec.name) == spec`)."""
        return {**self.model_dump(mode="json"), "final_norm": self.uses_final_norm,
                "attn": {**self.attn.model_dump(mode="json"), "n_kv_heads": self.kv_heads, "head_width": self.d_head,
                         "qkv_bias": self.qkv_bias, "out_bias": self.out_bias},
                "output": {**self.output.model_dump(mode="json"), "bias": self.logits_bias}}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelRecipe):
            return NotImplemented
        return type(self) is type(other) and self.as_built() == other.as_built()

    def __hash__(self) -> int:
        return hash(json.dumps(self.as_built(), sort_keys=True, default=str))

    def to_yaml(self) -> str:
        return dump_yaml(self.model_dump())

    def axes(self) -> dict[str, Choice]:
        return {axis: getattr(self, axis) for axis in AXES}

    def sized(self, src_vocab_size: int, tgt_vocab_size: int) -> ModelSpec:
        """The ModelSpec of this recipe with the task's vocabulary sizes, unless the recipe gives its own."""
        return ModelSpec.model_validate({**self.model_dump(), "src_vocab_size": self.src_vocab_size or src_vocab_size,
                                         "tgt_vocab_size": self.tgt_vocab_size or tgt_vocab_size})


class ModelSpec(ModelRecipe):
    """A recipe with its vocabulary sizes: all a model is built from."""

    src_vocab_size: PositiveInt
    tgt_vocab_size: PositiveInt
