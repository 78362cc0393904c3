"""Corpus metrics of decoded text, scored by sacrebleu: BLEU (Papineni et al. 2002), chrF (Popović
2015) and TER (Snover et al. 2006), each with sacrebleu's defaults unless `train.metrics` sets
them. Each run records sacrebleu's signature of each (result.json `scorers`), which names every
setting, so a score is read with how it was computed."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

from pydantic import Field

from zoo.metrics import Metric, Tally, register
from zoo.specs.choices import PartSettings

TEXT = frozenset({"generates", "text"})


class SacreMetric(Metric):
    needs = TEXT
    scorer_class: str = ""
    unsigned: ClassVar[dict[str, Any]] = {}
    """Settings sacrebleu's signature leaves out, by name with sacrebleu's default: the signature
    names each one set otherwise, so that two scorings that differ never share a signature."""

    @classmethod
    def _scorer(cls, settings: PartSettings):
        import sacrebleu.metrics  # imported when a run scores text: `zoo --help` stays quick

        return getattr(sacrebleu.metrics, cls.scorer_class)(**settings.model_dump())

    @classmethod
    def score(cls, tally: Tally, settings: PartSettings) -> float:
        return cls._scorer(settings).corpus_score(tally.hypotheses, [tally.references]).score

    @classmethod
    def scorer(cls, settings: PartSettings) -> str:
        scorer = cls._scorer(settings)
        scorer.corpus_score(["."], [["."]])  # sacrebleu signs a scorer once it has scored (one reference each)
        chosen = settings.model_dump()
        missing = "".join(f"|{name}:{chosen[name]}" for name, default in cls.unsigned.items() if chosen[name] != default)
        return scorer.get_signature().format() + missing


class BleuSettings(PartSettings):
    tokenize: Literal["13a", "intl", "zh", "char", "none"] = Field(
        "13a", description="how hypotheses and references are cut into words: 13a (WMT's mteval), intl (Unicode "
                           "punctuation and symbols), zh (Chinese characters apart), char, none (text is tokenized)")
    lowercase: bool = Field(False, description="score case-insensitively")
    smooth_method: Literal["exp", "floor", "add-k", "none"] = Field(
        "exp", description="how an n-gram order without a match is smoothed (Chen and Cherry 2014)")
    max_ngram_order: int = Field(4, ge=1, le=9, description="the longest n-grams counted")


@register("bleu")
class Bleu(SacreMetric):
    """Corpus BLEU of the decoded targets (0 to 100; 13a tokenization, exponential smoothing)."""

    Settings, goal, bounds, order, scorer_class = BleuSettings, "max", (0.0, 100.0), 4, "BLEU"
    unsigned: ClassVar[dict[str, Any]] = {"max_ngram_order": 4}


class ChrFSettings(PartSettings):
    char_order: int = Field(6, ge=1, le=10, description="the longest character n-grams")
    word_order: int = Field(0, ge=0, le=4, description="the longest word n-grams: 0 chrF, 2 chrF++ (Popović 2017)")
    beta: int = Field(2, ge=1, le=10, description="recall weighs beta times as much as precision (sacrebleu's "
                                                   "signature leaves it out; the zoo's names it away from 2)")
    lowercase: bool = Field(False, description="score case-insensitively")
    whitespace: bool = Field(False, description="count whitespace in the character n-grams")


@register("chrf")
class ChrF(SacreMetric):
    """Corpus chrF: the F-score (beta 2) of character 6-grams (0 to 100); kinder than BLEU to
    morphology and to short outputs."""

    Settings, goal, bounds, order, scorer_class = ChrFSettings, "max", (0.0, 100.0), 5, "CHRF"
    unsigned: ClassVar[dict[str, Any]] = {"beta": 2}


class TerSettings(PartSettings):
    normalized: bool = Field(False, description="normalize punctuation and split it off before scoring")
    no_punct: bool = Field(False, description="remove punctuation before scoring")
    case_sensitive: bool = Field(False, description="count a change of case as an edit")
    asian_support: bool = Field(False, description="split Asian characters and punctuation apart")


@register("ter")
class Ter(SacreMetric):
    """Translation edit rate: the edits (shifts counted) per reference word, times 100; lower is better."""

    Settings, goal, bounds, order, scorer_class = TerSettings, "min", (0.0, math.inf), 6, "TER"
