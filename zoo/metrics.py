"""Which way a metric improves, in one place: losses and perplexities go down, everything else up. And the
curve metrics: how fast a run learned, not only where it ended."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Literal

Goal = Literal["min", "max"]


def goal_of(metric: str) -> Goal:
    return "min" if metric.rsplit("/", 1)[-1].endswith(("loss", "perplexity")) else "max"


RANGES = {"exact_match": (0.0, 1.0), "token_acc": (0.0, 1.0), "bleu": (0.0, 100.0), "loss": (0.0, math.inf),
          "perplexity": (1.0, math.inf), "lr_sensitivity": (0.0, math.inf)}
"""What values a metric can take, by its last name part; an interval is held inside it."""


def range_of(metric: str) -> tuple[float, float]:
    return RANGES.get(metric.rsplit("/", 1)[-1], (-math.inf, math.inf))


def better(metric: str, new: float, old: float | None) -> bool:
    """Whether `new` improves on `old` (None: nothing yet)."""
    return old is None or (new < old if goal_of(metric) == "min" else new > old)


CURVE = "eval_auc"
"""`eval_auc/NAME` is the mean of `eval/NAME` over a run's evaluations: the area under its
evaluation curve divided by its length (evaluations are evenly spaced). Two runs that end at the
same value differ in it when one got there sooner."""


def curve_means(history: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """`eval_auc/NAME` for every `eval/NAME` in the logged rows."""
    seen: dict[str, list[float]] = {}
    for row in history:
        for key, value in row.items():
            if key.startswith("eval/"):
                seen.setdefault(key, []).append(float(value))
    return {f"{CURVE}/{key.removeprefix('eval/')}": sum(v) / len(v) for key, v in seen.items()}
