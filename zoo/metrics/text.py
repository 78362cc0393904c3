"""Corpus metrics of decoded text, scored by sacrebleu with its defaults: BLEU (Papineni et al.
2002), chrF (Popović 2015) and TER (Snover et al. 2006). Each run records sacrebleu's signature of
each (result.json `scorers`), so a score is read with how it was computed."""

from __future__ import annotations

import math

from zoo.metrics import Metric, Tally, register

TEXT = frozenset({"generates", "text"})


class SacreMetric(Metric):
    needs = TEXT
    scorer_class: str = ""

    @classmethod
    def _scorer(cls):
        import sacrebleu.metrics  # imported when a run scores text: `zoo --help` stays quick

        return getattr(sacrebleu.metrics, cls.scorer_class)()

    @classmethod
    def score(cls, tally: Tally) -> float:
        return cls._scorer().corpus_score(tally.hypotheses, [tally.references]).score

    @classmethod
    def scorer(cls) -> str:
        scorer = cls._scorer()
        scorer.corpus_score(["."], [["."]])  # sacrebleu signs a scorer once it has scored (one reference each)
        return scorer.get_signature().format()


@register("bleu")
class Bleu(SacreMetric):
    """Corpus BLEU of the decoded targets (0 to 100; 13a tokenization, exponential smoothing)."""

    bounds, order, scorer_class = (0.0, 100.0), 4, "BLEU"


@register("chrf")
class ChrF(SacreMetric):
    """Corpus chrF: the F-score (beta 2) of character 6-grams (0 to 100); kinder than BLEU to
    morphology and to short outputs."""

    bounds, order, scorer_class = (0.0, 100.0), 5, "CHRF"


@register("ter")
class Ter(SacreMetric):
    """Translation edit rate: the edits (shifts counted) per reference word, times 100; lower is better."""

    goal, bounds, order, scorer_class = "min", (0.0, math.inf), 6, "TER"
