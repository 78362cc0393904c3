"""A power law with an irreducible term, L(C) = E + A C^-alpha (Kaplan et al. 2020; Hoffmann et al.
2022's form in one variable), fitted to one seed's points of one variant, and intervals over
seeds (Student's t with few seeds, the percentile bootstrap with many: over_seeds).

The fit profiles alpha: for each alpha on a log grid (then refined by golden-section search
between its neighbours), E and A are the least squares of a line in C^-alpha, with A >= 0 (the
metric falls with compute) and E at or above the metric's lower bound. C is divided by the
largest C fitted, so every alpha is equally well conditioned. A fit whose exponent runs to the
grid's edge, that finds no falling term, or whose falling term (how far the law falls across the
points) is no larger than its residual, gives no law and says why: nothing is invented. E at the
metric's bound is said to be on its bound: the points do not identify it, so it gets no interval."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

ALPHAS = np.geomspace(1e-3, 3.0, 241)
"""The exponents the profile tries: from nearly flat to steeper than any published scaling law."""
MIN_POINTS = 3
"""Three parameters (E, A, alpha) need three sizes at least."""
BOOTSTRAP_RESAMPLES = 4000


@dataclass(frozen=True)
class PowerLaw:
    irreducible: float
    """E: what the metric tends to at unlimited compute."""
    coefficient: float
    """A, for C in units of `unit`."""
    exponent: float
    """alpha."""
    unit: float
    """The largest C fitted; C / unit is what the law reads."""
    residual: float
    """The root mean square of the fit's residuals."""
    on_bound: bool = False
    """E sits at the metric's lower bound: the points do not identify it (any E from the bound up
    fits nearly as well), so it is said to be on its bound, never given an interval."""

    def __call__(self, c: float | np.ndarray) -> float | np.ndarray:
        return self.irreducible + self.coefficient * (np.asarray(c, dtype=float) / self.unit) ** -self.exponent


@dataclass(frozen=True)
class Fit:
    law: PowerLaw | None
    problem: str | None = None
    """Why there is no law: too few sizes, a metric that does not fall, an exponent the points do not pin."""


def line_fit(z: np.ndarray, y: np.ndarray, floor: float) -> tuple[float, float, float]:
    """(E, A, sum of squared residuals) of y = E + A z with A >= 0 and E >= floor."""
    candidates = []
    design = np.stack([np.ones_like(z), z], axis=1)
    (e, a), *_ = np.linalg.lstsq(design, y, rcond=None)
    if a >= 0 and e >= floor:
        candidates.append((e, a))
    if math.isfinite(floor):  # E on its bound, A the least squares of the rest
        a = max(0.0, float(np.dot(z, y - floor) / np.dot(z, z)))
        candidates.append((floor, a))
    candidates.append((max(floor, float(np.mean(y))), 0.0))  # no falling term
    return min(((e, a, float(np.sum((y - e - a * z) ** 2))) for e, a in candidates), key=lambda c: c[2])


def fit_power_law(compute: Sequence[float], values: Sequence[float], floor: float = -math.inf) -> Fit:
    """The law through one seed's (compute, value) points; `floor`: the metric's lower bound."""
    x, y = np.asarray(compute, dtype=float), np.asarray(values, dtype=float)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0)):
        return Fit(None, "a point is not finite (or its compute is not positive)")
    if len(set(x.tolist())) < MIN_POINTS:
        return Fit(None, f"{len(set(x.tolist()))} distinct sizes; a power law with an irreducible term needs "
                         f"{MIN_POINTS} or more")
    unit = float(x.max())
    u = x / unit

    def loss(alpha: float) -> tuple[float, float, float]:
        return line_fit(u**-alpha, y, floor)

    scores = [loss(a)[2] for a in ALPHAS]
    best = int(np.argmin(scores))
    low, high = ALPHAS[max(best - 1, 0)], ALPHAS[min(best + 1, len(ALPHAS) - 1)]
    alpha = golden_section(lambda a: loss(a)[2], low, high)
    irreducible, coefficient, sse = loss(alpha)
    if coefficient <= 0:
        return Fit(None, "the metric does not fall with compute at these sizes (no falling term fits)")
    if best in (0, len(ALPHAS) - 1):
        return Fit(None, f"the exponent runs to the edge of [{ALPHAS[0]:g}, {ALPHAS[-1]:g}]: the points do not pin it")
    residual = math.sqrt(sse / len(y))
    falling = coefficient * (float(u.min()) ** -alpha - 1.0)  # how far the law falls across the points
    if not falling > residual:
        return Fit(None, f"the falling term ({falling:.3g} across the sizes) is no larger than the residual "
                         f"({residual:.3g}): the points do not show a law")
    return Fit(PowerLaw(irreducible, coefficient, alpha, unit, residual, on_bound=irreducible <= floor))


def golden_section(f: Callable[[float], float], low: float, high: float, iterations: int = 60) -> float:
    """The minimum of a unimodal f on [low, high], searched on a log scale."""
    a, b = math.log(low), math.log(high)
    ratio = (math.sqrt(5) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    for _ in range(iterations):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(math.exp(d))
    return math.exp((a + b) / 2)


@dataclass(frozen=True)
class Interval:
    """A mean over seeds and its 95% interval (over_seeds: Student's t, or the percentile bootstrap)."""

    mean: float
    low: float
    high: float
    seeds: int
    method: str = "t"

    def excludes_zero(self) -> bool:
        """Separated from zero; never with fewer than 2 seeds, which give no interval."""
        return self.seeds >= 2 and (self.low > 0 or self.high < 0)


BOOTSTRAP_SEEDS = 10
"""Seeds from which the percentile bootstrap's interval is used: below, it undercovers badly (with
3 seeds every resample's mean lies within the seeds' range, and the 95% interval is that range,
whose coverage is 1 - 2 (1/2)^3 = 75%), so Student's t on the per-seed values is used instead."""


def over_seeds(per_seed: Sequence[float]) -> Interval:
    """The mean of per-seed values and its 95% interval: Student's t below BOOTSTRAP_SEEDS seeds (exact
    for normal per-seed errors), the percentile bootstrap from there; no interval under 2 seeds."""
    values = np.asarray(per_seed, dtype=float)
    if len(values) >= BOOTSTRAP_SEEDS:
        return bootstrap(values)
    if len(values) < 2:
        mean = float(values.mean()) if len(values) else math.nan
        return Interval(mean, math.nan, math.nan, len(values))
    half = float(student_t.ppf(0.975, len(values) - 1)) * float(values.std(ddof=1)) / math.sqrt(len(values))
    mean = float(values.mean())
    return Interval(mean, mean - half, mean + half, len(values))


def bootstrap(per_seed: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Interval:
    """The mean of per-seed values and the 2.5% and 97.5% percentiles of the means of `resamples`
    resamples of the seeds (with replacement; a fixed generator, so a report is reproducible).
    With n seeds there are only C(2n - 1, n) distinct resamples (10 for 3): the interval is coarse."""
    values = np.asarray(per_seed, dtype=float)
    if len(values) == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return Interval(float(values.mean()), float(low), float(high), len(values), "bootstrap")


def crossing(difference: Callable[[np.ndarray], np.ndarray], start: float, stop: float) -> float | None:
    """The smallest compute in [start, stop] where a difference of two laws changes sign (found on
    a log grid, refined by bisection), or None."""
    grid = np.geomspace(start, stop, 400)
    signs = np.sign(difference(grid))
    changes = np.nonzero(signs[1:] * signs[:-1] < 0)[0]
    if len(changes) == 0:
        return None
    a, b = math.log(grid[changes[0]]), math.log(grid[changes[0] + 1])
    for _ in range(60):
        middle = (a + b) / 2
        if np.sign(difference(np.array([math.exp(middle)]))[0]) == signs[changes[0]]:
            a = middle
        else:
            b = middle
    return math.exp((a + b) / 2)
