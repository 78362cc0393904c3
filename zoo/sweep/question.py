"""What a comparison asks of a sweep's runs, apart from the design that trained them: the metric
(with the direction and bounds its registry entry declares), the target, the equivalence
margins, the fit across sizes, the metric that chooses a tuned value, and the sweep's own metric
(its primary endpoint). A sweep file carries the first question in its own fields; `asking`
makes another, its goal taken from the metric, never typed again by hand."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from zoo.metrics import Goal, Resolved

if TYPE_CHECKING:
    from zoo.sweep.spec import FitSettings, SweepSpec


@dataclass(frozen=True)
class Question:
    metric: str
    goal: Goal
    bounds: tuple[float, float]
    """What the metric can take: an interval is held inside it."""
    primary: str
    """The sweep's own metric, its primary endpoint: any other is secondary (exploratory)."""
    target: float | None = None
    margins: Mapping[str, float] = field(default_factory=dict)
    fit: FitSettings | None = None
    choose_on: str | None = None
    """The validation metric a tuned sweep chooses its values on (None: nothing is tuned)."""
    distinct: tuple[str, ...] = ()
    """Grid keys whose values count as separate units even where they are correlated twins
    (zoo.compare.units)."""
    family: tuple[str, ...] = ()
    """Grid keys whose differences and two-way interactions make the primary family (SweepSpec.primary_keys);
    () counts every key."""
    rate_slope_margin: float | None = None
    """Decades per doubling of width inside which the best rate's slope counts as held (TOST)."""

    @classmethod
    def of(cls, sweep: SweepSpec) -> Question:
        """The question the sweep file asks, validated with it (its goal is the metric's)."""
        resolved = sweep.resolved_metric
        return cls(sweep.metric, resolved.goal, resolved.bounds, sweep.metric, sweep.target, dict(sweep.margins),
                   sweep.fit, sweep.choose_on, tuple(sweep.distinct), tuple(sweep.primary_keys),
                   sweep.rate_slope_margin)

    def asking(self, metric: str) -> Question:
        """The same question of another metric: its goal and bounds from its registry entry (an
        unknown name is refused with the choices); the target, set for the first metric, is
        dropped, and so is a fit where the new metric does not fall."""
        if metric == self.metric:
            return self
        resolved = Resolved.of(metric)
        return replace(self, metric=metric, goal=resolved.goal, bounds=resolved.bounds, target=None,
                       fit=self.fit if resolved.goal == "min" else None)

    @property
    def resolved_metric(self) -> Resolved:
        return Resolved.of(self.metric)

    @property
    def resolved_choose_on(self) -> Resolved | None:
        return None if self.choose_on is None else Resolved.of(self.choose_on)

    @property
    def margin(self) -> float | None:
        """The equivalence margin declared for this metric, if any: "level" needs one."""
        return self.margins.get(self.metric)

    @property
    def exploratory(self) -> bool:
        return self.metric != self.primary

    @property
    def endpoint(self) -> str:
        """"" for the primary endpoint; else what the page and the plots say of a secondary one."""
        return "" if not self.exploratory else (f"secondary (exploratory): {self.metric}; the primary endpoint is "
                                                f"{self.primary}")


DECLARED = ("metric", "margins", "family", "target", "fit", "choose_on", "distinct", "reuses", "rate_slope_margin")
"""The fields of a declaration that make the question: a change to any after cells ran makes the
study exploratory (the sweep file's hash is kept beside them, for provenance only)."""


UNDECLARED: dict[str, Any] = {"distinct": [], "reuses": [], "rate_slope_margin": None}
"""What a declaration recorded before a field existed meant by its absence: the field's default."""


def declaration(sweep: SweepSpec) -> dict[str, Any]:
    """What `zoo sweep` records with every cell: the question as the sweep file declares it when
    the cell runs (its primary metric, margins, family: the grid keys whose differences and
    two-way interactions the family holds, target, fit, choose_on, the keys declared distinct, the
    sweeps whose runs it counts where its own are the same computations) and
    the SHA-256 of the sweep file as validated, its fields at their defaults left out (so a field
    added to the zoo later, at its default, leaves the hash of an unchanged file as it was)."""
    dumped = sweep.model_dump(mode="json")
    hashed = sweep.model_dump(mode="json", exclude_defaults=True)
    return {"metric": sweep.metric, "margins": dict(sweep.margins), "family": sweep.primary_keys,
            "target": sweep.target, "fit": dumped.get("fit"), "choose_on": sweep.choose_on,
            "distinct": list(sweep.distinct), "reuses": list(sweep.reuses), "rate_slope_margin": sweep.rate_slope_margin,
            "sweep_sha256": hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()}


def declaration_changes(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """Each question field that differs between a recorded declaration and the current one."""
    was = {key: recorded.get(key, UNDECLARED.get(key)) for key in DECLARED}
    return [f"{key}: {was[key]!r} when cells ran, {now.get(key)!r} now" for key in DECLARED if was[key] != now.get(key)]
