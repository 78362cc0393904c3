"""The metrics of teacher forcing and of exact decoding: every task reports a loss and a token
accuracy; a language model its perplexity; a task that decodes its targets, exact match."""

from __future__ import annotations

import math

from zoo.metrics import Metric, Tally, register
from zoo.specs.choices import PartSettings


@register("loss")
class Loss(Metric):
    """Cross-entropy per counted label, teacher-forced (nats)."""

    goal, bounds, order = "min", (0.0, math.inf), 0

    @classmethod
    def score(cls, tally: Tally, settings: PartSettings) -> float:
        return tally.loss


@register("token_acc")
class TokenAccuracy(Metric):
    """The share of counted labels whose most likely token is the label, teacher-forced."""

    goal, bounds, order = "max", (0.0, 1.0), 1

    @classmethod
    def score(cls, tally: Tally, settings: PartSettings) -> float:
        return tally.correct / max(tally.tokens, 1)


@register("perplexity")
class Perplexity(Metric):
    """exp(loss): the language model's perplexity per token."""

    goal, bounds, order, needs = "min", (1.0, math.inf), 2, frozenset({"next_token"})

    @classmethod
    def score(cls, tally: Tally, settings: PartSettings) -> float:
        return math.exp(min(tally.loss, 700.0))  # past e^700 a float overflows


@register("bits_per_byte")
class BitsPerByte(Metric):
    """The loss in bits per UTF-8 byte of the held-out text: loss_sum / (ln 2 x bytes), so that
    models with different tokenizers compare on one scale (a tokenizer of longer pieces has a
    higher loss per token, not per byte). The sum is of every label the loss scores: the end of
    each document or target included; with `pack`, each row's first token is context only."""

    goal, bounds, order, needs = "min", (0.0, math.inf), 4, frozenset({"text_bytes"})

    @classmethod
    def score(cls, tally: Tally, settings: PartSettings) -> float:
        if tally.text_bytes <= 0:
            return math.nan
        return tally.loss_sum / (math.log(2) * tally.text_bytes)


@register("exact_match")
class ExactMatch(Metric):
    """The share of held-out targets decoded exactly, up to their end of sequence."""

    goal, bounds, order, needs = "max", (0.0, 1.0), 3, frozenset({"generates"})

    @classmethod
    def score(cls, tally: Tally, settings: PartSettings) -> float:
        return tally.exact / max(tally.rows, 1)


@register("lr_sensitivity")
class LRSensitivity(Metric):
    """Wortsman et al. (2023)'s learning-rate sensitivity of a tuned sweep's variant: computed by
    zoo compare over runs at several rates (zoo.compare.sensitivity), not by a run."""

    goal, bounds, needs = "min", (0.0, math.inf), frozenset({"comparison"})


class Downstream(Metric):
    """A score lm-evaluation-harness reports for a task of train.downstream (zoo.trainer.harness),
    logged as downstream/TASK/NAME: never computed by a zoo task."""

    needs = frozenset({"downstream"})
    order = 50


@register("acc")
class Accuracy(Downstream):
    """The harness's accuracy: the share of questions whose most likely choice (summed
    log-likelihood) is the answer."""

    goal, bounds = "max", (0.0, 1.0)


@register("acc_norm")
class NormalizedAccuracy(Downstream):
    """The harness's accuracy with each choice's log-likelihood divided by its length in bytes."""

    goal, bounds = "max", (0.0, 1.0)


@register("word_perplexity")
class WordPerplexity(Downstream):
    """The harness's perplexity per word of a rolling log-likelihood task (wikitext)."""

    goal, bounds = "min", (1.0, math.inf)


@register("byte_perplexity")
class BytePerplexity(Downstream):
    """The harness's perplexity per UTF-8 byte of a rolling log-likelihood task."""

    goal, bounds = "min", (1.0, math.inf)
