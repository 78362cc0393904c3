"""Which way a metric improves, in one place: losses go down, everything else goes up."""

from __future__ import annotations

from typing import Literal

Goal = Literal["min", "max"]


def goal_of(metric: str) -> Goal:
    return "min" if metric.rsplit("/", 1)[-1].endswith("loss") else "max"


def better(metric: str, new: float, old: float | None) -> bool:
    """Whether `new` improves on `old` (None: nothing yet)."""
    return old is None or (new < old if goal_of(metric) == "min" else new > old)
