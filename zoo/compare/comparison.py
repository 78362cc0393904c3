"""A sweep's design asked one question: what every analysis of `zoo compare` reads. The question
(zoo.sweep.question) is the comparison's own fields; the design (grid, seeds, tuned values) stays
the sweep as its file holds it. Another metric replaces the question alone, and a tuned sweep's
comparison replaces the design alone (its grid without the tuned keys), so neither is copied with
the other's fields typed again."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from zoo.sweep.keys import check_tuned_metrics
from zoo.sweep.question import Question
from zoo.sweep.spec import FitSettings, SweepSpec

DESIGN_READS = ("name", "grid", "seeds", "tune", "confirm_seeds", "labels", "axes")
"""What the analyses read of the design, as the comparison's own: its name, grid, seeds, tuned
values and confirmation seeds, and its labels() and axes()."""


@dataclass(frozen=True, kw_only=True)
class Comparison(Question):
    design: SweepSpec

    @classmethod
    def of(cls, sweep: SweepSpec) -> Comparison:
        """The comparison the sweep file declares: its design and its own question."""
        return cls.asked(sweep, Question.of(sweep))

    @classmethod
    def asked(cls, design: SweepSpec, question: Question) -> Comparison:
        return cls(design=design, **{part.name: getattr(question, part.name) for part in fields(Question)})

    @property
    def question(self) -> Question:
        """The question alone, without the design it is asked of."""
        return Question(**{part.name: getattr(self, part.name) for part in fields(Question)})

    def asking(self, metric: str) -> Comparison:
        """The same design asked of another metric; a tuned design compares on a held-out split
        only, which `check_tuned_metrics` says by name."""
        asked = super().asking(metric)
        if self.design.tune:
            check_tuned_metrics(asked.resolved_metric.name, asked.resolved_choose_on.name)
        return asked

    def redesigned(self, **changes: Any) -> Comparison:
        """Another design (validated as a sweep file is) under the same question."""
        return replace(self, design=self.design.model_copy(update=changes))

    def config(self) -> dict[str, Any]:
        """The design as the sweep file holds it, with the question asked in its fields: what
        a comparison's W&B run records."""
        fit = None if self.fit is None else self.fit.model_dump(mode="json")
        return {**self.design.model_dump(mode="json"), "metric": self.metric, "goal": self.goal, "target": self.target,
                "fit": fit}

    @property
    def fit_settings(self) -> FitSettings:
        return self.fit or FitSettings()

    def __getattr__(self, name: str) -> Any:
        """The design's fields of DESIGN_READS, read as the comparison's; nothing else."""
        if name in DESIGN_READS:
            return getattr(self.design, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
