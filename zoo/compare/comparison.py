"""A sweep's design asked one question: what every analysis of `zoo compare` reads. The design
(grid, seeds, tuned values) and the question (zoo.sweep.question) stay two objects: another
metric replaces the question alone, and a tuned sweep's comparison replaces the design alone
(its grid without the tuned keys), so neither is copied with the other's fields typed again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zoo.metrics import Goal, Resolved
from zoo.sweep.keys import check_tuned_metrics
from zoo.sweep.question import Question
from zoo.sweep.spec import FitSettings, SweepSpec


@dataclass(frozen=True)
class Comparison:
    design: SweepSpec
    question: Question

    @classmethod
    def of(cls, sweep: SweepSpec) -> Comparison:
        """The comparison the sweep file declares: its design and its own question."""
        return cls(sweep, Question.of(sweep))

    def asking(self, metric: str) -> Comparison:
        """The same design asked of another metric; a tuned design compares on a held-out split
        only, which `check_tuned_metrics` says by name."""
        question = self.question.asking(metric)
        if self.design.tune:
            check_tuned_metrics(question.metric.name, question.choose_on.name)
        return Comparison(self.design, question)

    def redesigned(self, **changes: Any) -> Comparison:
        """Another design (validated as a sweep file is) under the same question."""
        return Comparison(self.design.model_copy(update=changes), self.question)

    def config(self) -> dict[str, Any]:
        """The design as the sweep file holds it, with the question asked in its fields: what
        a comparison's W&B run records."""
        asked = {"metric": self.metric, "goal": self.goal, "target": self.target,
                 "fit": None if self.question.fit is None else self.question.fit.model_dump(mode="json")}
        return {**self.design.model_dump(mode="json"), **asked}

    # the question's
    @property
    def metric(self) -> str:
        return self.question.name

    @property
    def goal(self) -> Goal:
        return self.question.goal

    @property
    def resolved_metric(self) -> Resolved:
        return self.question.metric

    @property
    def target(self) -> float | None:
        return self.question.target

    @property
    def margins(self) -> dict[str, float]:
        return dict(self.question.margins)

    @property
    def fit_settings(self) -> FitSettings:
        return self.question.fit or FitSettings()

    @property
    def choose_on(self) -> str | None:
        return None if self.question.choose_on is None else str(self.question.choose_on)

    @property
    def resolved_choose_on(self) -> Resolved | None:
        return self.question.choose_on

    # the design's
    @property
    def name(self) -> str:
        return self.design.name

    @property
    def grid(self) -> dict[str, list[Any]]:
        return self.design.grid

    @property
    def seeds(self) -> list[int]:
        return self.design.seeds

    @property
    def tune(self) -> dict[str, list[Any]]:
        return self.design.tune

    @property
    def confirm_seeds(self) -> list[int]:
        return self.design.confirm_seeds

    def labels(self) -> dict[str, str]:
        return self.design.labels()

    def axes(self) -> dict[str, list[Any]]:
        return self.design.axes()
