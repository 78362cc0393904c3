"""A family's two tables as data: its weights (top-level rows, and one per-layer template that one
loop expands over a stack's layers) and its configuration's fields (renames, read and written from
the same rows). A table names each thing once; a family derived from another changes a few rows."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from zoo.specs.model_spec import ModelSpec

QKV = ("q", "k", "v")


def dropout_fields(residual: float, attention: float, activation: float = 0.0,
                   embedding: float | None = None) -> dict[str, float]:
    """A reference's dropout rates by site as spec fields (zoo.dropout.rates): `dropout` is its rate
    on sublayer outputs (and, unless given apart, on the embedding's), and a site's own rate is
    written where it differs (a reference that drops no activations: activation_dropout 0)."""
    rates = {"attention": attention, "activation": activation, "embedding": residual if embedding is None else embedding}
    return {"dropout": float(residual), **{f"{site}_dropout": float(rate) for site, rate in rates.items()
                                           if rate != residual}}


ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_python": "gelu", "gelu_new": "gelu_tanh",
               "gelu_pytorch_tanh": "gelu_tanh", "silu": "swish", "swish": "swish", "relu2": "relu2"}
"""transformers' activation names (ACT2FN) and the zoo's feed-forward parts that compute them."""


def expand(rows: Mapping[str, str], parts: tuple[str, ...], stacks: tuple[str, ...] = ()) -> dict[str, str]:
    """Rows with `{p}` written once for each of q, k and v, `*` once for each of `parts` and
    `{stack}` once for each of `stacks`."""
    out = {}
    for zoo, ref in rows.items():
        words = [(mark, values if mark in zoo else ("",)) for mark, values in (("{p}", QKV), ("*", parts),
                                                                              ("{stack}", stacks))]
        for chosen in itertools.product(*(values for _, values in words)):
            row = (zoo, ref)
            for (mark, _), value in zip(words, chosen, strict=True):
                row = (row[0].replace(mark, value), row[1].replace(mark, value))
            out[row[0]] = row[1]
    return out


@dataclass(frozen=True)
class Stack:
    """The layers of one of the zoo's stacks in a reference: where layer i lives (`at`, with {i}),
    and the template of one layer's rows (zoo name under `{stack}.layers.{i}` -> reference name under
    `at`)."""
    name: str
    at: str
    layer: Mapping[str, str]


@dataclass(frozen=True)
class Weights:
    """A reference's weight table: zoo canonical name -> reference name. In a row, `*` stands for
    each of `parts`, `{p}` for each of q, k and v, and in a top-level row `{stack}` for each stack's
    name. Called with a spec, it is a Family's `names`."""
    top: Mapping[str, str]
    stacks: tuple[Stack, ...]
    parts: tuple[str, ...] = ("weight", "bias")

    def __call__(self, spec: ModelSpec) -> dict[str, str]:
        table = expand(self.top, self.parts, tuple(stack.name for stack in self.stacks))
        for stack in self.stacks:
            rows = expand(stack.layer, self.parts)
            for i in range(spec.depths[stack.name == "decoder"]):
                at = stack.at.format(i=i)
                table |= {f"{stack.name}.layers.{i}.{zoo}": f"{at}.{ref}" for zoo, ref in rows.items()}
        return table

    def derive(self, top: Mapping[str, str] | None = None, layer: Mapping[str, str] | None = None,
               drop: Iterable[str] = (), parts: tuple[str, ...] | None = None) -> Weights:
        """This table with rows added or renamed (`top`, and `layer` in every stack) and rows dropped
        (their zoo names, top-level or per-layer), over other `parts` where given."""
        gone = set(drop)

        def edited(rows: Mapping[str, str], more: Mapping[str, str] | None) -> dict[str, str]:
            return {zoo: ref for zoo, ref in {**rows, **(more or {})}.items() if zoo not in gone}

        return Weights(edited(self.top, top),
                       tuple(Stack(s.name, s.at, edited(s.layer, layer)) for s in self.stacks), parts or self.parts)


def decoder(top: Mapping[str, str], layer: Mapping[str, str], at: str = "model.layers.{i}",
            parts: tuple[str, ...] = ("weight", "bias")) -> Weights:
    """The table of a decoder-only reference."""
    return Weights(top, (Stack("decoder", at, layer),), parts)


def encoder(top: Mapping[str, str], layer: Mapping[str, str], at: str) -> Weights:
    """The table of an encoder-only reference."""
    return Weights(top, (Stack("encoder", at, layer),))


def split_views(tensors: Mapping[str, Tensor], packed: str, rows: Mapping[str, int]) -> dict[str, tuple[Tensor, str]]:
    """The blocks of rows of a packed projection, in order, as views named `{packed}:{block}` (a
    Family's `views`): Phi-3's q, k and v by their head counts, its gate before its up."""
    if packed not in tensors:
        return {}
    blocks = tensors[packed].split(list(rows.values()))
    return {f"{packed}:{name}": (block, packed) for name, block in zip(rows, blocks, strict=True)}


RESOLVED: dict[str, Callable[[ModelSpec], Any]] = {
    "vocab_size": lambda spec: spec.tgt_vocab_size, "d_ff": lambda spec: spec.ffn_width,
    "n_kv_heads": lambda spec: spec.kv_heads, "head_width": lambda spec: spec.d_head}
"""Spec fields whose value a reference holds resolved (`auto` or None worked out)."""


@dataclass(frozen=True)
class Renames:
    """Spec fields and dropout rates a configuration holds under other names, read and written by
    the same rows."""
    rows: Mapping[str, str] = field(default_factory=dict)
    """spec field -> configuration attribute."""
    dropouts: Mapping[str, str] = field(default_factory=dict)
    """dropout site (zoo.dropout.rates.SITES) -> the attribute holding its rate; the reference drops
    nothing at a site not named (where none is, the family reads its rates itself). Sites may share an
    attribute: the first named is written."""

    def read(self, config: Any) -> dict[str, Any]:
        rates = {site: float(getattr(config, attribute)) for site, attribute in self.dropouts.items()}
        dropouts = dropout_fields(rates.get("residual", 0.0), rates.get("attention", 0.0), rates.get("activation", 0.0),
                                  rates.get("embedding", 0.0)) if rates else {}  # none named: the family reads its own
        return {name: getattr(config, attribute) for name, attribute in self.rows.items()} | dropouts

    def write(self, spec: ModelSpec) -> dict[str, Any]:
        rates: dict[str, float] = {}
        for site, attribute in self.dropouts.items():
            rates.setdefault(attribute, spec.dropout_at(site))
        return rates | {attribute: RESOLVED[name](spec) if name in RESOLVED else getattr(spec, name)
                        for name, attribute in self.rows.items()}

    def derive(self, drop: Iterable[str] = (), dropouts: Mapping[str, str] | None = None, **rows: str) -> Renames:
        """These renames with `rows` added or renamed, `drop` (spec fields) gone and other `dropouts`."""
        return Renames({name: attribute for name, attribute in {**self.rows, **rows}.items() if name not in drop},
                       self.dropouts if dropouts is None else dropouts)


TOKEN_IDS = {"bos_id": "bos_token_id", "eos_id": "eos_token_id", "pad_id": "pad_token_id"}
"""The special ids, under the names every configuration of transformers gives them."""
DECODER_RENAMES = Renames({
    "vocab_size": "vocab_size", "d_model": "hidden_size", "n_heads": "num_attention_heads",
    "d_ff": "intermediate_size", "n_decoder_layers": "num_hidden_layers", "max_len": "max_position_embeddings",
    **TOKEN_IDS})
"""What most decoder-only configurations of transformers call the spec's sizes and token ids."""
BERT_RENAMES = Renames({
    "vocab_size": "vocab_size", "d_model": "hidden_size", "n_heads": "num_attention_heads",
    "d_ff": "intermediate_size", "n_encoder_layers": "num_hidden_layers", "max_len": "max_position_embeddings"},
    dropouts={"residual": "hidden_dropout_prob", "embedding": "hidden_dropout_prob",
              "attention": "attention_probs_dropout_prob"})
"""BERT's names, which RoBERTa's and ELECTRA's configurations share (an encoder's own ids are none
of them: it never decodes)."""


Reader = Callable[[Any], dict[str, Any]]
Writer = Callable[[ModelSpec], dict[str, Any]]


def reads(*readers: Reader, **fixed: Any) -> Reader:
    """A family's `spec_fields`: what each reader makes of the reference model, later ones over
    earlier ones, then the fields its configuration always means (`fixed`)."""
    def spec_fields(model: Any) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for reader in readers:
            fields |= reader(model)
        return fields | fixed

    return spec_fields


def writes(config_class: str, *writers: Writer, **fixed: Any) -> Callable[[ModelSpec], Any]:
    """A family's `config`: transformers' `config_class` with what each writer makes of the spec,
    and the attributes the family always writes (`fixed`)."""
    def config(spec: ModelSpec) -> Any:
        import transformers

        attributes: dict[str, Any] = {}
        for writer in writers:
            attributes |= writer(spec)
        return getattr(transformers, config_class)(**attributes, **fixed)

    return config
