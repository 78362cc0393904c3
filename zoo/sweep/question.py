"""What a comparison asks of a sweep's runs, apart from the design that trained them: the metric
(with the direction and bounds its registry entry declares), the target, the equivalence
margins, the fit across sizes, the metric that chooses a tuned value, and whether the metric is
the sweep's primary endpoint. A sweep file carries the first question in its own fields;
`asking` makes another, its goal taken from the metric, never typed again by hand."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from zoo.metrics import Goal, Resolved

if TYPE_CHECKING:
    from zoo.sweep.spec import FitSettings, SweepSpec


@dataclass(frozen=True)
class Question:
    metric: Resolved
    primary: str
    """The sweep's own metric, its primary endpoint: any other is secondary (exploratory)."""
    target: float | None = None
    margins: Mapping[str, float] = field(default_factory=dict)
    fit: FitSettings | None = None
    choose_on: Resolved | None = None
    """The validation metric a tuned sweep chooses its values on (None: nothing is tuned)."""

    @classmethod
    def of(cls, sweep: SweepSpec) -> Question:
        """The question the sweep file asks, validated with it (its goal is the metric's)."""
        return cls(sweep.resolved_metric, sweep.metric, sweep.target, dict(sweep.margins), sweep.fit,
                   sweep.resolved_choose_on)

    def asking(self, metric: str) -> Question:
        """The same question of another metric: its goal and bounds from its registry entry (an
        unknown name is refused with the choices); the target, set for the first metric, is
        dropped, and so is a fit where the new metric does not fall."""
        if metric == str(self.metric):
            return self
        resolved = Resolved.of(metric)
        return replace(self, metric=resolved, target=None, fit=self.fit if resolved.goal == "min" else None)

    @property
    def name(self) -> str:
        return str(self.metric)

    @property
    def goal(self) -> Goal:
        return self.metric.goal

    @property
    def bounds(self) -> tuple[float, float]:
        return self.metric.bounds

    @property
    def margin(self) -> float | None:
        """The equivalence margin declared for this metric, if any: "level" needs one."""
        return self.margins.get(self.name)

    @property
    def exploratory(self) -> bool:
        return self.name != self.primary

    @property
    def endpoint(self) -> str:
        """"" for the primary endpoint; else what the page and the plots say of a secondary one."""
        return "" if not self.exploratory else (f"secondary (exploratory): {self.name}; the primary endpoint is "
                                                f"{self.primary}")
