"""What a sweep could have found: from the observed spread of each paired difference, the smallest
difference it would detect at 80% power, and the pairs (and seeds) a difference of a given size
would need. A normal approximation to the paired test at the Bonferroni level of the family (what
Holm asks of its first test), floored by the exact test's own limit: at n pairs no p is below
2 / 2^n, so no power at all below the pairs that floor allows."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import norm

from zoo.compare.exact import pairs_needed
from zoo.compare.stats import Estimate

POWER = 0.8


@dataclass(frozen=True)
class Power:
    detectable: float
    """The smallest |difference| detected with POWER at the current pairs; inf where the exact
    test cannot reach the level at all."""
    pairs_for: int | None
    """Pairs that the `wanted` difference needs (None where the spread is not measured)."""
    wanted: float


def power_of(e: Estimate, family: int, wanted: float, level: float = 0.05) -> Power:
    """Power figures of one paired difference: `wanted` is the difference to plan for (a declared
    margin, or the observed mean)."""
    if e.n < 2 or not math.isfinite(e.std):
        return Power(math.nan, None, wanted)
    z = norm.ppf(1 - level / (2 * max(family, 1))) + norm.ppf(POWER)
    floor = pairs_needed(family, level)
    detectable = z * e.std / math.sqrt(e.n) if e.n >= floor else math.inf
    if e.std == 0:
        return Power(detectable, floor, wanted)
    needed = math.ceil((z * e.std / abs(wanted)) ** 2) if wanted else None
    return Power(detectable, None if needed is None else max(needed, floor), wanted)


def power_text(label: str, e: Estimate, power: Power, pairs_per_seed: float) -> str:
    """One line: what the difference could detect, and the seeds its planned size would need."""
    if math.isnan(power.detectable):
        return f"{label}: power not measured (fewer than two pairs)"
    detect = ("nothing at this many pairs (the exact test's floor)" if math.isinf(power.detectable)
              else f"±{power.detectable:.3g}")
    need = "" if power.pairs_for is None else (
        f"; a difference of {abs(power.wanted):.3g} needs {power.pairs_for} pairs "
        f"({math.ceil(power.pairs_for / pairs_per_seed)} seeds)")
    return f"{label}: detectable at {POWER:.0%} power: {detect}{need}"
