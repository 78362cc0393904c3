"""Two variants' laws fitted together, one seed at a time, with one irreducible term and one
exponent, so that they differ in their coefficient alone: L_a(C) = E + a C^-alpha and
L_b(C) = E + b C^-alpha. Variant b's curve is then a's moved along compute: b at compute C reaches
what a reaches at k C, with k = (a / b)^(1/alpha) at every compute, a compute multiplier (b is worth
k times a's compute; k > 1 where b is the better). Four parameters fit both variants' points (10 on a
5-size ladder), where one law per variant fits three to each variant's own. Over seeds, log k gets
Student's t: its interval and the one-sample t-test of log k = 0 (k = 1x), unadjusted for any family."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

from zoo.compare.power_law import ALPHAS, MIN_POINTS, golden_section


@dataclass(frozen=True)
class JointLaw:
    irreducible: float
    coefficients: tuple[float, float]
    """a and b, for C in units of `unit`."""
    exponent: float
    unit: float
    residual: float
    on_bound: bool

    @property
    def multiplier(self) -> float:
        """k: b at compute C reaches what a reaches at k C."""
        a, b = self.coefficients
        return (a / b) ** (1 / self.exponent)


def least_squares(za: np.ndarray, zb: np.ndarray, y: np.ndarray, floor: float) -> tuple[float, float, float, float]:
    """(E, a, b, sum of squared residuals) of y = E + a za + b zb (za zero on b's points, zb on
    a's), with E at or above `floor`; a or b may come out at or below 0 (no falling term)."""
    design = np.stack([np.ones_like(y), za, zb], axis=1)
    (e, a, b), *_ = np.linalg.lstsq(design, y, rcond=None)
    if e < floor:  # E on its bound: each coefficient the least squares of its own points
        e = floor
        a, b = (float(np.dot(z, y - floor) / np.dot(z, z)) for z in (za, zb))
    return float(e), float(a), float(b), float(np.sum((y - e - a * za - b * zb) ** 2))


def fit_joint(a_points: Sequence[tuple[float, float]], b_points: Sequence[tuple[float, float]],
              floor: float = -math.inf) -> tuple[JointLaw | None, str | None]:
    """One seed's joint law through each variant's (compute, value) points, or None and why."""
    points = [*a_points, *b_points]
    x = np.array([c for c, _ in points], dtype=float)
    y = np.array([v for _, v in points], dtype=float)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(x > 0)):
        return None, "a point is not finite (or its compute is not positive)"
    if min(len({c for c, _ in a_points}), len({c for c, _ in b_points})) < MIN_POINTS:
        return None, f"a variant has fewer than {MIN_POINTS} sizes"
    unit = float(x.max())
    u = x / unit
    of_a = np.arange(len(points)) < len(a_points)

    def fitted(alpha: float) -> tuple[float, float, float, float]:
        z = u**-alpha
        return least_squares(np.where(of_a, z, 0.0), np.where(of_a, 0.0, z), y, floor)

    scores = [fitted(alpha)[3] for alpha in ALPHAS]
    best = int(np.argmin(scores))
    alpha = golden_section(lambda s: fitted(s)[3], ALPHAS[max(best - 1, 0)], ALPHAS[min(best + 1, len(ALPHAS) - 1)])
    e, a, b, sse = fitted(alpha)
    if min(a, b) <= 0:
        return None, "a variant's metric does not fall with compute under the shared law"
    if best in (0, len(ALPHAS) - 1):
        return None, f"the shared exponent runs to the edge of [{ALPHAS[0]:g}, {ALPHAS[-1]:g}]: the points do not pin it"
    residual = math.sqrt(sse / len(y))
    falling = min(coefficient * (float(u[mask].min()) ** -alpha - 1.0) for coefficient, mask in ((a, of_a), (b, ~of_a)))
    if not falling > residual:
        return None, (f"a variant's falling term ({falling:.3g} across its sizes) is no larger than the residual "
                      f"({residual:.3g}): the points do not show a shared law")
    return JointLaw(e, (a, b), alpha, unit, residual, on_bound=e <= floor), None


@dataclass(frozen=True)
class Multiplier:
    label: str
    first: str
    second: str
    """The variants: L_a is the first's law, L_b the second's."""
    laws: dict[int, JointLaw]
    problems: dict[int, str]
    """Seeds without a joint law, and why."""

    def log_k(self) -> np.ndarray:
        return np.array([math.log(law.multiplier) for law in self.laws.values()])

    def interval(self) -> tuple[float, float, float]:
        """k (the geometric mean over seeds) and its 95% t-interval, from log k (nan under 2 seeds)."""
        logs = self.log_k()
        if len(logs) < 2:
            return (math.exp(logs.mean()) if len(logs) else math.nan), math.nan, math.nan
        half = float(student_t.ppf(0.975, len(logs) - 1)) * float(logs.std(ddof=1)) / math.sqrt(len(logs))
        return math.exp(logs.mean()), math.exp(logs.mean() - half), math.exp(logs.mean() + half)

    def p(self) -> float:
        """The two-sided one-sample t-test of log k = 0 (nan under 2 seeds; 0 spread gives 0 or 1)."""
        logs = self.log_k()
        if len(logs) < 2:
            return math.nan
        spread = float(logs.std(ddof=1))
        if spread == 0:
            return 1.0 if logs.mean() == 0 else 0.0
        statistic = float(logs.mean()) / (spread / math.sqrt(len(logs)))
        return float(2 * student_t.sf(abs(statistic), len(logs) - 1))

    @property
    def verdict(self) -> str:
        k, low, high = self.interval()
        if len(self.laws) < 2:
            return "no verdict: fewer than 2 seeds fitted, so no interval"
        test = f"t-test on log k over {len(self.laws)} seeds, p {self.p():.2g}, unadjusted"
        bounded = sum(law.on_bound for law in self.laws.values())
        caveat = (f"; E on the metric's bound in {bounded} of {len(self.laws)} seeds, not identified: k is the "
                  "multiplier under that E" if bounded else "")
        if low > 1 or high < 1:
            return (f"{'above' if k > 1 else 'below'} 1x: {self.second} at compute C reaches what {self.first} reaches "
                    f"at {k:.3g} C ({test}){caveat}")
        return f"not separated from 1x (inconclusive; {test}){caveat}"


def multiplier(label: str, first: str, second: str, a_points: dict[int, list[tuple[float, float]]],
               b_points: dict[int, list[tuple[float, float]]], floor: float) -> Multiplier:
    """The joint law of every seed both variants ran."""
    laws, problems = {}, {}
    for seed in sorted(set(a_points) & set(b_points)):
        law, problem = fit_joint(a_points[seed], b_points[seed], floor)
        if law is None:
            problems[seed] = problem or "no law"
        else:
            laws[seed] = law
    return Multiplier(label, first, second, laws, problems)
