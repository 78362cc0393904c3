"""Dropout rates by site: a model's one `dropout` everywhere, or a rate of its own where a reference
model has one (Llama drops attention weights only; BERT no activations; OPT 0.1 on residuals and 0.0
on attention), so that an imported model trains as its reference does."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SITES = ("attention", "activation", "residual", "embedding")
DropoutSite = Literal["attention", "activation", "residual", "embedding"]
FIELDS = ("dropout", *(f"{site}_dropout" for site in SITES))
"""Every spec field that sets a dropout rate: training's, which no weight depends on."""


class DropoutRates(BaseModel):
    """The rates of the four sites; null: the spec's `dropout`. Regularization, as `dropout` is: not
    part of a canonical name."""

    attention_dropout: float | None = Field(None, ge=0.0, lt=1.0, description="attention weights; null: dropout")
    activation_dropout: float | None = Field(
        None, ge=0.0, lt=1.0, description="inside the feed-forward, after its activation (Vaswani et al., T5, BART); "
                                          "null: dropout")
    residual_dropout: float | None = Field(
        None, ge=0.0, lt=1.0, description="each sublayer's output, before its residual sum; null: dropout")
    embedding_dropout: float | None = Field(None, ge=0.0, lt=1.0, description="the embedding's output; null: dropout")

    def dropout_at(self, site: DropoutSite) -> float:
        """The rate at a site: its own, or the spec's `dropout`."""
        own = getattr(self, f"{site}_dropout")
        return self.dropout if own is None else own  # type: ignore[attr-defined]
