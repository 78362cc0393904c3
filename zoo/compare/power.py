"""What a sweep could have found, for the exact sign-flip test the verdicts use (not a normal
approximation to it, which at 8 pairs in a family of 6 promises 1.23 sd where the test needs 1.91):
the smallest difference it detects at 80% power, and the pairs (and seeds) a planned difference
needs, at the Bonferroni level of the family (what Holm asks of its first test).

Power is simulated: differences drawn from N(delta, sd^2) over SAMPLES seeded samples. The
test is scale-free, so power depends on delta / sd, the pairs and the level alone (one table of
factors serves every difference). For one sample z of n standard normals, the two-sided test
rejects a positive delta once delta > -m_k(z) (and the mean is positive), where m_k is the k-th
smallest mean over nonempty subsets of z, k = ceil(level 2^n / 2 - 1): a subset's signs flipped
give a sum at least the observed one exactly when its shifted mean is at most 0. So the delta
detected with 80% power is the 80th percentile of that critical delta over samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.stats import norm

from zoo.compare.exact import SEED, pairs_needed
from zoo.compare.stats import Estimate

POWER = 0.8
SAMPLES = 2000
"""Simulated samples per factor: the power at the factor found is within about ±0.009 (one SE)."""
ENUMERATED_UP_TO = 14
"""Pairs up to which every subset is enumerated (16,383 at 14); past it SUBSET_DRAWS drawn
subsets (seeded) estimate the quantile the exact test's critical value sits at."""
SUBSET_DRAWS = 8_192
MOST_PAIRS = 256
"""The pairs searched for a planned difference; one that needs more is said to need more."""


@dataclass(frozen=True)
class Power:
    detectable: float
    """The smallest |difference| detected with POWER at the current pairs; inf where the exact
    test cannot reach the level at all."""
    pairs_for: int | None
    """Pairs that the `wanted` difference needs (None where the spread is not measured or it is
    0; MOST_PAIRS + 1 where it needs more than MOST_PAIRS)."""
    wanted: float


def subset_members(n: int, rng: np.random.Generator) -> np.ndarray:
    """Rows of 0/1 marking subsets of n pairs: every nonempty one up to ENUMERATED_UP_TO, else drawn."""
    if n <= ENUMERATED_UP_TO:
        codes = np.arange(1, 2**n)[:, None] >> np.arange(n)[None, :] & 1
        return codes.astype(np.float32)
    drawn = rng.integers(0, 2, (SUBSET_DRAWS, n)).astype(np.float32)
    return drawn[drawn.sum(axis=1) > 0]


@lru_cache(maxsize=512)
def detectable_factor(n: int, level: float) -> float:
    """The |delta| / sd the two-sided exact sign-flip test at `level` detects with POWER at n
    pairs; inf where no p at n pairs can fall below the level."""
    rank = math.ceil(level * 2.0 ** (n - 1) - 1)  # reject while fewer than `rank` subset means are at most -delta
    if n < 2 or rank < 1:
        return math.inf
    rng = np.random.default_rng(SEED)
    members = subset_members(n, rng)
    share = rank / (2**n - 1)  # the quantile of subset means the critical value sits at
    order = max(1, math.ceil(share * members.shape[0])) - 1
    sizes = members.sum(axis=1)
    samples = rng.standard_normal((SAMPLES, n), dtype=np.float32)
    critical = np.empty(SAMPLES)
    for start in range(0, SAMPLES, 100):  # 100 samples at a time: a few MiB
        z = samples[start:start + 100]
        means = (z @ members.T) / sizes
        kth = np.partition(means, order, axis=1)[:, order]
        critical[start:start + 100] = np.maximum(-kth, -z.mean(axis=1))
    return float(np.quantile(critical, POWER))


def pairs_for(sd: float, wanted: float, level: float, floor: int) -> int:
    """The fewest pairs (at least `floor`) whose detectable difference is at most |wanted|. The
    factor times sqrt(n) changes slowly with n, so each try moves to the pairs that the last try's
    factor asks for (from the normal approximation's count), and the answer is then checked from
    below; MOST_PAIRS + 1 where even MOST_PAIRS do not reach."""
    def reach(n: int) -> bool:
        return detectable_factor(n, level) * sd <= abs(wanted)

    def asked(spread: float) -> int:
        if not math.isfinite(spread):  # below the exact test's floor: no factor to move by
            return MOST_PAIRS
        return min(max(math.ceil((spread * sd / abs(wanted)) ** 2), floor), MOST_PAIRS)

    n = asked(norm.ppf(1 - level / 2) + norm.ppf(POWER))
    for _ in range(4):
        following = asked(detectable_factor(n, level) * math.sqrt(n))
        if following == n:
            break
        n = following
    if not reach(n):
        while n < MOST_PAIRS and not reach(n):
            n += 1
        return n if reach(n) else MOST_PAIRS + 1
    while n > floor and reach(n - 1):
        n -= 1
    return n


def power_of(e: Estimate, family: int, wanted: float, level: float = 0.05) -> Power:
    """Power figures of one paired difference: `wanted` is the difference to plan for (a declared
    margin, or the observed mean)."""
    if e.n < 2 or not math.isfinite(e.std):
        return Power(math.nan, None, wanted)
    bonferroni, floor = level / max(family, 1), pairs_needed(family, level)
    detectable = detectable_factor(e.n, bonferroni) * e.std
    if e.std == 0:
        return Power(0.0 if e.n >= floor else math.inf, floor, wanted)
    return Power(detectable, pairs_for(e.std, wanted, bonferroni, floor) if wanted else None, wanted)


def power_text(label: str, e: Estimate, power: Power, pairs_per_seed: float) -> str:
    """One line: what the difference could detect, and the seeds its planned size would need."""
    if math.isnan(power.detectable):
        return f"{label}: power not measured (fewer than two pairs)"
    detect = ("nothing at this many pairs (the exact test's floor)" if math.isinf(power.detectable)
              else f"±{power.detectable:.3g}")
    if power.pairs_for is None:
        need = ""
    elif power.pairs_for > MOST_PAIRS:
        need = f"; a difference of {abs(power.wanted):.3g} needs more than {MOST_PAIRS} pairs"
    else:
        need = (f"; a difference of {abs(power.wanted):.3g} needs {power.pairs_for} pairs "
                f"({math.ceil(power.pairs_for / pairs_per_seed)} seeds)")
    return f"{label}: detectable at {POWER:.0%} power: {detect}{need}"
