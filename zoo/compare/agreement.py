"""Whether a ranking transfers from one task to another: Kendall's tau of the variants' scores,
with a permutation p-value and a bootstrap interval, and each axis effect's verdict across tasks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from zoo.compare.stats import Estimate
from zoo.errors import ConfigError


@dataclass(frozen=True)
class RankAgreement:
    tau: float
    """Kendall's tau-b of the scores on A and on B (ties counted as ties)."""
    p_value: float
    """Two-sided, under random pairings of the scores: exact where n! <= `resamples` (up to 7
    variants at the default), else from that many random pairings."""
    low: float
    high: float
    """The 95% percentile bootstrap interval of tau, resampling variants."""
    n: int
    resamples: int


def tau_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b over the last axis, for any leading batch shape (resamples at once):
    concordant minus discordant pairs over the root of the product of the pairs untied in each
    score; nan where one side is all ties."""
    dx = np.sign(x[..., :, None] - x[..., None, :])
    dy = np.sign(y[..., :, None] - y[..., None, :])
    untied = (dx * dx).sum((-1, -2)) * (dy * dy).sum((-1, -2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(untied > 0, (dx * dy).sum((-1, -2)) / np.sqrt(untied), np.nan)


def rank_agreement(a: Sequence[float], b: Sequence[float], resamples: int = 10_000, seed: int = 0) -> RankAgreement:
    """Agreement of two score lists, one score per variant in the same order, higher is better on
    both (a loss enters negated). Seeded, so a report reads the same every time."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 3:
        raise ConfigError(f"rank agreement needs the same 3 or more variants on both sides, got {x.size} and {y.size}")
    tau = float(tau_b(x, y))
    exact = math.factorial(x.size) <= resamples
    test = stats.permutation_test((x,), lambda p, axis=-1: tau_b(np.moveaxis(p, axis, -1), y), permutation_type="pairings",
                                  vectorized=True, n_resamples=np.inf if exact else resamples,
                                  rng=np.random.default_rng(seed))
    rows = np.random.default_rng(seed + 1).integers(0, x.size, (resamples, x.size))
    draws = tau_b(x[rows], y[rows])
    draws = draws[~np.isnan(draws)]  # a draw of one repeated variant has no ranking
    low, high = np.percentile(draws, [2.5, 97.5]) if draws.size else (math.nan, math.nan)
    return RankAgreement(tau, float(test.pvalue), float(low), float(high), int(x.size), resamples)


ROUNDING = 1e-12
"""A mean difference this close to zero is float rounding of equal values, not an effect."""


LEVEL = 0.05
"""The one decision rule of every comparison: a difference separates where its Holm-adjusted p
(over its sweep's family of paired differences) is below this; bold and verdicts read it alone."""


def separates(e: Estimate, holm_p: float) -> int:
    """+1 or -1, the difference's sign, where its Holm-adjusted p is below LEVEL, else 0."""
    if not holm_p < LEVEL or abs(e.mean) <= ROUNDING:
        return 0
    return 1 if e.mean > 0 else -1


def transfer_verdict(a: Estimate, b: Estimate, holm_a: float, holm_b: float) -> str:
    """How one paired effect (on the same oriented scale: positive is better) fares across two
    tasks, each side judged by its Holm-adjusted p."""
    sa, sb = separates(a, holm_a), separates(b, holm_b)
    if sa and sb:
        return "transfers" if sa == sb else "reverses"
    if sa or sb:
        return "separates on A only (B not separated, inconclusive)" if sa else \
            "separates on B only (A not separated, inconclusive)"
    return "not separated on either (inconclusive)"


def oriented(e: Estimate, goal: str) -> Estimate:
    """The estimate on a scale where higher is better: a loss's is negated."""
    if goal == "max":
        return e
    return Estimate(-e.mean, e.std, e.n, -e.high, -e.low, tuple(-v for v in e.values))
