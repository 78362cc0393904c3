"""Tests that hold at a handful of pairs: Fisher's sign-flip (randomization) test of paired
differences, exact over every assignment of signs where there are few pairs, and its two
one-sided form for equivalence (Schuirmann's TOST against a margin).

A t-test on 2 or 3 pairs that happen to agree gives a tiny p (three differences of -0.0184,
-0.0163, -0.0162 give 0.0018) and one on pairs that agree exactly gives 0. Under the null hypothesis
that a difference is as likely positive as negative, each of the 2^n sign assignments is equally
likely, so no p can fall below 2 / 2^n (two-sided): 0.5 at two pairs, 0.25 at three. p is never 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

EXACT_UP_TO = 32
"""Pairs up to which p is exact: the signed sums of each half of the pairs are enumerated (2^16 at
32 pairs) and met (meet in the middle), which counts all 2^n assignments without listing them.
Past it, MONTE_CARLO_DRAWS drawn assignments give a Monte Carlo p, (count + 1) / (draws + 1),
never 0 either, said as one with its standard error (`monte_carlo_error`)."""
MONTE_CARLO_DRAWS = 1_000_000
SEED = 0
"""Drawn sign assignments are seeded, so a report reads the same every time."""
CHUNK = 65_536
"""Drawn assignments are made this many at a time, so that their signs take a few MiB at once at any n."""


@lru_cache(maxsize=16)
def half_table(n: int) -> np.ndarray:
    """Every sign assignment of n values as rows of +1/-1 (the first row all +1), int8."""
    codes = np.arange(2**n)[:, None] >> np.arange(n)[None, :] & 1
    return (1 - 2 * codes).astype(np.int8)


@lru_cache(maxsize=2)
def drawn_signs(n: int) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The MONTE_CARLO_DRAWS seeded sign assignments of n values, in chunks of CHUNK rows (int8),
    and each one's Σ s_i: the same for every set of n values, so drawn once per n (a comparison
    asks the same n for each difference, metric and margin; 96 MiB at 96 pairs)."""
    rng, chunks, counts = np.random.default_rng(SEED), [], []
    for start in range(0, MONTE_CARLO_DRAWS, CHUNK):
        signs = 1 - 2 * rng.integers(0, 2, (min(CHUNK, MONTE_CARLO_DRAWS - start), n), dtype=np.int8)
        chunks.append(signs)
        counts.append(signs.sum(axis=1, dtype=np.int64))
    return tuple(chunks), np.concatenate(counts)


class SignedSums:
    """Σ s_i (x_i + shift) over the sign assignments s of x, for any shift, from one enumeration:
    each assignment's Σ s_i x_i and Σ s_i are kept apart, so the equivalence tests (x ± margin,
    searched over margins) cost no new enumeration. Exact (two halves met) up to EXACT_UP_TO
    values, else over MONTE_CARLO_DRAWS seeded draws."""

    def __init__(self, x: np.ndarray, exact: bool | None = None):
        """`exact` None: as the pairs allow; False draws at any size (to hold the two methods together)."""
        self.n = x.size
        self.exact = self.n <= EXACT_UP_TO if exact is None else exact
        if self.exact:
            cut = (self.n + 1) // 2
            self.halves = [(half_table(part.size) @ part, half_table(part.size).sum(axis=1, dtype=np.int64))
                           for part in (x[:cut], x[cut:])]
        else:
            chunks, counts = drawn_signs(self.n)
            self.drawn = (np.concatenate([signs @ x for signs in chunks]), counts)

    def at_least(self, threshold: float, shift: float) -> int:
        """How many assignments give Σ s_i (x_i + shift) >= threshold (drawn ones, past EXACT_UP_TO)."""
        if not self.exact:
            sums, counts = self.drawn
            return int(np.count_nonzero(sums + shift * counts >= threshold))
        (first, first_signs), (second, second_signs) = self.halves
        ordered = np.sort(second + shift * second_signs)
        reach = threshold - (first + shift * first_signs)
        return int(ordered.size * first.size - np.searchsorted(ordered, reach, side="left").sum())

    def at_most(self, threshold: float, shift: float) -> int:
        """How many give Σ s_i (x_i + shift) <= threshold: where every assignment is counted, as
        many as give >= -threshold (flipping every sign maps the one set onto the other)."""
        if not self.exact:
            sums, counts = self.drawn
            return int(np.count_nonzero(sums + shift * counts <= threshold))
        return self.at_least(-threshold, shift)

    @property
    def total(self) -> int:
        return 2**self.n if self.exact else MONTE_CARLO_DRAWS


@lru_cache(maxsize=16)
def signed_sums(values: tuple[float, ...]) -> SignedSums:
    """Kept for the last few value sets: a margin search asks one set again some 60 times (16 MiB
    each past EXACT_UP_TO, a few MiB below)."""
    return SignedSums(np.asarray(values, dtype=float))


def tolerance(x: np.ndarray) -> float:
    """Sums this close to the observed one count as equal to it: the same sum in another order."""
    return 1e-12 * max(1.0, float(np.abs(x).sum()))


def shifted_sign_flip_p(values: Sequence[float], alternative: str = "two-sided", shift: float = 0.0) -> float:
    """p of the sign-flip test of values + shift (see `sign_flip_p`), from the values' signed sums."""
    x = np.asarray(values, dtype=float)
    if x.size < 2 or not np.isfinite(x).all() or not math.isfinite(shift):
        return math.nan
    sums, observed = signed_sums(tuple(x.tolist())), float((x + shift).sum())
    slack = tolerance(x + shift)
    if alternative == "greater":
        count = sums.at_least(observed - slack, shift)
    elif alternative == "less":
        count = sums.at_most(observed + slack, shift)
    elif abs(observed) <= slack:
        count = sums.total
    else:
        count = sums.at_least(abs(observed) - slack, shift) + sums.at_most(slack - abs(observed), shift)
    if sums.exact:
        return count / sums.total  # the observed assignment is always among them: never 0
    return (count + 1) / (MONTE_CARLO_DRAWS + 1)


def sign_flip_p(values: Sequence[float], alternative: str = "two-sided") -> float:
    """p of the sign-flip test that the differences are symmetric about 0: the share of sign
    assignments whose sum is at least as extreme as the observed one (in the direction of
    `alternative`: two-sided, greater or less). Exact up to EXACT_UP_TO pairs, a Monte Carlo p
    past it. nan below two pairs or for non-finite values."""
    return shifted_sign_flip_p(values, alternative)


def is_monte_carlo(n: int) -> bool:
    """Whether the p of n pairs is drawn (Monte Carlo) rather than exact."""
    return n > EXACT_UP_TO


def drawn_note(pairs: Sequence[int]) -> str | None:
    """Said beside the p-values where some are Monte Carlo (a difference over EXACT_UP_TO pairs)."""
    drawn = sorted({n for n in pairs if is_monte_carlo(n)})
    if not drawn:
        return None
    return (f"p of a difference over {EXACT_UP_TO} pairs ({', '.join(map(str, drawn))} here) is a Monte Carlo p from "
            f"{MONTE_CARLO_DRAWS:,} seeded sign assignments, not an exact one: its standard error is "
            f"sqrt(p (1 − p) / {MONTE_CARLO_DRAWS:,}), {monte_carlo_error(0.05):.1g} at p 0.05.")


def monte_carlo_error(p: float) -> float:
    """The standard error of a Monte Carlo p from MONTE_CARLO_DRAWS draws: sqrt(p (1 - p) / draws)."""
    return math.sqrt(p * (1 - p) / MONTE_CARLO_DRAWS)


def smallest_p(n: int, sided: int = 2) -> float:
    """The smallest p the sign-flip test can give at n pairs: 2 / 2^n two-sided, 1 / 2^n one-sided
    (past EXACT_UP_TO, where assignments are drawn, that of the draws)."""
    if n < 2:
        return math.nan
    return sided / 2**n if n <= EXACT_UP_TO else 1 / (MONTE_CARLO_DRAWS + 1)


def equivalence_p(values: Sequence[float], margin: float) -> float:
    """Two one-sided sign-flip tests that the mean difference lies inside (-margin, margin): the
    larger of the p that it is not at or below -margin and the p that it is not at or above +margin.
    Below the level, the difference is equivalent to 0 within the margin."""
    return max(shifted_sign_flip_p(values, "greater", margin), shifted_sign_flip_p(values, "less", -margin))


def smallest_margin(values: Sequence[float], level: float = 0.05) -> float | None:
    """The smallest margin that the two one-sided tests exclude at `level`: what these pairs could
    call level. None where no margin can be (too few pairs: 1 / 2^n is not below the level)."""
    x = np.asarray(values, dtype=float)
    if x.size < 2 or not np.isfinite(x).all() or not smallest_p(x.size, sided=1) < level:
        return None
    low, high = abs(float(x.mean())), abs(float(x.mean())) + 2 * float(np.abs(x).max()) + 1e-12
    for _ in range(64):  # doubling cannot be needed for exact tables; guards drawn ones
        if not math.isfinite(high):  # values near float's end: no margin to search (never a loop to infinity)
            return None
        if equivalence_p(x, high) < level:
            break
        high *= 2
    else:
        return None
    for _ in range(60):  # bisection: p falls as the margin widens
        middle = (low + high) / 2
        low, high = (low, middle) if equivalence_p(x, middle) < level else (middle, high)
        if high - low <= 1e-6 * max(high, 1e-12):
            break
    return high


def tarone(floors: Sequence[float], level: float = 0.05) -> tuple[list[bool], int]:
    """Which tests of a family of discrete tests stay in it (Tarone 1990), and K: the smallest count
    such that at most K tests have a smallest attainable p (`smallest_p` of their pairs) below
    level / K. Those stay; the rest can never reach their share of the level and would only widen
    Holm's correction for the others. The floors are fixed by the design (the pairs), not by the
    data, so leaving them out keeps the chance of any false discovery within the level. A nan floor
    (no test) stays out."""
    tested = [f for f in floors if not math.isnan(f)]
    for k in range(1, len(tested) + 1):
        kept = [not math.isnan(f) and f < level / k for f in floors]
        if sum(kept) <= k:
            return kept, k
    return [False] * len(floors), 0


def pairs_needed(family: int, level: float = 0.05) -> int:
    """The fewest pairs at which a difference can separate after Holm over `family` tests: the
    smallest p, 2 / 2^n, times the family must fall below the level."""
    n = 2
    while not family * smallest_p(n) < level and n <= EXACT_UP_TO:
        n += 1
    return n


def unreachable(pairs: Sequence[int], family: int, level: float = 0.05) -> str | None:
    """Said before any verdict where the design cannot separate: with n pairs the smallest p is
    2 / 2^n, and Holm multiplies the smallest of a family of m by m."""
    short = sorted({n for n in pairs if n >= 2 and not family * smallest_p(n) < level})
    if not short:
        return None
    n = short[-1]
    holm = f", and Holm over {family} tests makes it {min(1.0, family * smallest_p(n)):.3g}" if family > 1 else ""
    return (f"no difference of {' or '.join(map(str, short))} pairs can separate, whatever the data: the exact "
            f"test's smallest p at {n} pairs is {smallest_p(n):.3g}{holm}, not below {level:g}; "
            f"{pairs_needed(family, level)} pairs (seeds × other cells) could")
