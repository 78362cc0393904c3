"""Metrics, registered by name as parts are: each declares which way it improves, what values it
can take, what a task must do to report it, and how it is scored from one pass over a held-out
split (a `Tally`). And the curve metrics: how fast a run learned, not only where it ended.

A metric is found by the last part of a logged name (zoo.metric_names): `test/chrf` is `chrf` on
the test split, resolved once with its direction and bounds (`Resolved`). Its
settings, where it has any (`train.metrics: {chrf: {word_order: 2}}`: chrF++), are typed as a
part's are."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from zoo.errors import ConfigError
from zoo.metric_names import CURVE, KEPT, MetricName
from zoo.records import RunRecord
from zoo.specs.choices import PartSettings
from zoo.specs.registries import UnknownChoiceError, import_modules, registry

Goal = Literal["min", "max"]
register = registry("metric").register


@dataclass
class Tally:
    """What one pass over a held-out split counts: teacher-forced loss and labels, and the decoded
    hypotheses with their references, as text."""

    loss_sum: float = 0.0
    correct: int = 0
    tokens: int = 0
    exact: int = 0
    rows: int = 0
    text_bytes: int = 0
    """The UTF-8 bytes of the held-out text the loss scored (a task that scores_text), else 0."""
    hypotheses: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)

    @property
    def loss(self) -> float:
        return self.loss_sum / max(self.tokens, 1)


class Metric:
    """A registered metric. `needs`: the traits a task must have to report it (zoo.tasks.base.Task.traits);
    a metric that needs "comparison" is computed by `zoo compare` over runs, never by a task."""

    Settings: ClassVar[type[PartSettings]] = PartSettings
    goal: ClassVar[Goal]
    """min or max: which way is better. No default: a metric registered without one is refused
    (zoo.metrics.declares_goal), where a lower-is-better metric would rank backwards in silence."""
    bounds: ClassVar[tuple[float, float]] = (-math.inf, math.inf)
    needs: ClassVar[frozenset[str]] = frozenset()
    order: ClassVar[int] = 100
    """Where it stands in a run's metrics (the order they were always logged in)."""

    @classmethod
    def score(cls, tally: Tally, settings: PartSettings) -> float:
        raise NotImplementedError

    @classmethod
    def scorer(cls, settings: PartSettings) -> str | None:
        """How a library scored it, where that can change the value (sacrebleu's signature)."""
        return None


def declares_goal(name: str, metric: type[Metric]) -> None:
    """A metric says which way is better (goal min or max), or it is not registered."""
    if getattr(metric, "goal", None) not in ("min", "max"):
        raise ConfigError(f"metric {name!r} ({metric.__module__}.{metric.__qualname__}) declares no goal: set goal = "
                          "'min' (lower is better, as a loss) or 'max' (as an accuracy); without one it would rank "
                          "backwards where lower is better")


registry("metric").check_with(declares_goal)


def chosen(names: Iterable[str], given: Mapping[str, Any]) -> list[str]:
    """The metrics of `names` that train.metrics (`given`) leaves scored: all but those set false."""
    return [name for name in names if given.get(name) is not False]


def decodes(names: Iterable[str]) -> bool:
    """Whether scoring these metrics needs the model's decoded output, not only its teacher-forced loss."""
    return any("generates" in registry("metric").get(name).needs for name in names)


def metric_settings(name: str, given: Mapping[str, Mapping[str, Any]]) -> PartSettings:
    """The settings metric `name` scores with: those `given` for it (train.metrics), else its defaults."""
    return registry("metric").get(name).Settings.model_validate(dict(given.get(name, {})))


def scored(names: Iterable[str], tally: Tally, scoring: Mapping[str, PartSettings], prefix: str) -> dict[str, float]:
    """`PREFIX/NAME` of each metric, scored from one pass's tally with its settings."""
    return {f"{prefix}/{name}": registry("metric").get(name).score(tally, scoring[name]) for name in names}


def reported(traits: Iterable[str]) -> list[str]:
    """The metrics a task with these traits reports, in their order."""
    have = set(traits)
    metrics = registry("metric")
    found = [name for name in metrics.names() if metrics.get(name).needs <= have]
    return sorted(found, key=lambda name: (metrics.get(name).order, name))


def by_comparison(name: str | MetricName) -> bool:
    """Whether zoo compare computes the metric over a sweep's runs (Wortsman et al.'s LR
    sensitivity, over a tuned rate's runs) rather than a run reporting it."""
    parsed = name if isinstance(name, MetricName) else MetricName.parse(name)
    metrics = registry("metric")
    return parsed.metric in metrics and "comparison" in metrics.get(parsed.metric).needs


COMPARISON_CHOOSES_ON = "eval/loss"
"""What a tuned sweep whose metric the comparison computes chooses its values on by default: the
validation loss, the loss the LR sensitivity is of."""


@dataclass(frozen=True)
class Resolved:
    """A metric name resolved once against the registry: what it names, which way is better and
    what values it can take. A sweep holds its `metric` and `choose_on` so."""
    name: MetricName
    goal: Goal
    bounds: tuple[float, float]

    @classmethod
    def of(cls, name: str | MetricName) -> Resolved:
        parsed = name if isinstance(name, MetricName) else MetricName.parse(name)
        metrics = registry("metric")
        if parsed.metric not in metrics:
            raise UnknownChoiceError("metric", parsed.metric, metrics.names(), hint=f" (in {str(parsed)!r})")
        found = metrics.get(parsed.metric)
        return cls(parsed, found.goal, found.bounds)

    def __str__(self) -> str:
        return str(self.name)

    def better(self, new: float, old: float | None, min_delta: float = 0.0) -> bool:
        """Whether `new` improves on `old` by more than `min_delta` (None: nothing yet)."""
        if old is None:
            return True
        return new < old - min_delta if self.goal == "min" else new > old + min_delta


def goal_of(metric: str | MetricName) -> Goal:
    return Resolved.of(metric).goal


def range_of(metric: str | MetricName) -> tuple[float, float]:
    """What values a metric can take; an interval is held inside it."""
    return Resolved.of(metric).bounds


FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32: a metric beyond it is no value a model computed in float32 could report."""


def impossible(metric: str, value: float) -> str | None:
    """Why a finite value cannot be a result of `metric` (a loss of -3: "outside loss's range
    [0, inf)"; 1e39: "cannot be held in float32"), or None. Such a value is an edit or a bug, never
    a measurement: ranked as a number it would come first (or overflow the statistics), so it is
    left out as a non-finite value is, and named. A name that is no registered metric keeps the
    float32 check alone."""
    if not math.isfinite(value):
        return None
    try:
        parsed = MetricName.parse(metric)
        low, high = range_of(parsed)
    except (ConfigError, ValueError, KeyError):
        parsed, low, high = None, -math.inf, math.inf
    if not low <= value <= high:
        shown = f"{'(' if low == -math.inf else '['}{low:g}, {high:g}{')' if high == math.inf else ']'}"
        return f"outside {parsed.metric}'s range {shown}"
    if abs(value) > FLOAT32_MAX:
        return "cannot be held in float32"
    return None


def impossible_values(record: RunRecord) -> list[str]:
    """Each final metric of a run holding a value its metric cannot take (impossible), said as
    `test/loss -3: outside loss's range [0, inf)`."""
    said = []
    for metric in record.final_metrics():
        value = record.value(metric)
        why = impossible(metric, value) if isinstance(value, int | float) else None
        if why:
            said.append(f"{metric} {value:g}: {why}")
    return said


def without_impossible_values(record: RunRecord) -> RunRecord:
    """The record with every impossible final value replaced by NaN: left out of every ranking and
    statistic as a non-finite value is."""
    def screened(metrics: dict[str, float], prefix: str = "") -> dict[str, float]:
        return {name: math.nan if isinstance(value, int | float) and impossible(prefix + name, value) else value
                for name, value in metrics.items()}

    update: dict[str, Any] = {"metrics": screened(record.metrics)}
    for group in KEPT:
        kept = getattr(record, group)
        if kept and "metrics" in kept:
            update[group] = {**kept, "metrics": screened(kept["metrics"], f"{group}/")}
    return record.model_copy(update=update)


def better(metric: str | MetricName, new: float, old: float | None, min_delta: float = 0.0) -> bool:
    return Resolved.of(metric).better(new, old, min_delta)


def curve_means(history: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """`eval_auc/NAME` (CURVE) for every `eval/NAME` in the logged rows: its mean over a run's
    evaluations, the area under its evaluation curve divided by its length (evaluations are evenly
    spaced). Two runs that end at the same value differ in it when one got there sooner."""
    seen: dict[str, list[float]] = {}
    for row in history:
        for key, value in row.items():
            if key.startswith("eval/"):
                seen.setdefault(key, []).append(float(value))
    return {f"{CURVE}/{key.removeprefix('eval/')}": sum(v) / len(v) for key, v in seen.items()}


import_modules(__name__, __path__)  # every module: each registers its metrics
