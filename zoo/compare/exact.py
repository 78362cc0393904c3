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

EXACT_UP_TO = 16
"""Pairs up to which every sign assignment is enumerated (65,536 of them); past it, SIGN_FLIP_DRAWS drawn
ones give p as (count + 1) / (SIGN_FLIP_DRAWS + 1), which is never 0 either."""
SIGN_FLIP_DRAWS = 65_535
SEED = 0
"""Drawn sign assignments are seeded, so a report reads the same every time."""


@lru_cache(maxsize=16)
def sign_table(n: int) -> np.ndarray:
    """Every sign assignment of n pairs as rows of +1/-1 (the first row all +1: the data as observed),
    or SIGN_FLIP_DRAWS drawn ones after an all +1 row where n is past EXACT_UP_TO; int8, so that the
    tables kept stay small (1 MiB at 16 pairs, 6 MiB at 100)."""
    if n <= EXACT_UP_TO:
        codes = np.arange(2**n)[:, None] >> np.arange(n)[None, :] & 1
        return (1 - 2 * codes).astype(np.int8)
    drawn = np.random.default_rng(SEED).integers(0, 2, (SIGN_FLIP_DRAWS, n))
    return np.vstack([np.ones((1, n), dtype=np.int8), (1 - 2 * drawn).astype(np.int8)])


def flipped_means(values: Sequence[float]) -> tuple[float, np.ndarray]:
    x = np.asarray(values, dtype=float)
    return float(x.mean()), (sign_table(x.size) @ x) / x.size


def tolerance(observed: float) -> float:
    """Means this close to the observed one count as equal to it: the same sum in another order."""
    return 1e-12 * max(1.0, abs(observed))


def sign_flip_p(values: Sequence[float], alternative: str = "two-sided") -> float:
    """p of the sign-flip test that the differences are symmetric about 0: the share of sign
    assignments whose mean is at least as extreme as the observed one (in the direction of
    `alternative`: two-sided, greater or less). nan below two pairs or for non-finite values."""
    x = np.asarray(values, dtype=float)
    if x.size < 2 or not np.isfinite(x).all():
        return math.nan
    observed, means = flipped_means(x)
    slack = tolerance(observed)
    if alternative == "greater":
        extreme = means >= observed - slack
    elif alternative == "less":
        extreme = means <= observed + slack
    else:
        extreme = np.abs(means) >= abs(observed) - slack
    return int(extreme.sum()) / means.size  # the observed assignment is always among them: never 0


def smallest_p(n: int, sided: int = 2) -> float:
    """The smallest p the sign-flip test can give at n pairs: 2 / 2^n two-sided, 1 / 2^n one-sided
    (past EXACT_UP_TO, where assignments are drawn, that of the draws)."""
    if n < 2:
        return math.nan
    return sided / 2**n if n <= EXACT_UP_TO else 1 / (SIGN_FLIP_DRAWS + 1)


def equivalence_p(values: Sequence[float], margin: float) -> float:
    """Two one-sided sign-flip tests that the mean difference lies inside (-margin, margin): the
    larger of the p that it is not at or below -margin and the p that it is not at or above +margin.
    Below the level, the difference is equivalent to 0 within the margin."""
    x = np.asarray(values, dtype=float)
    return max(sign_flip_p(x + margin, "greater"), sign_flip_p(x - margin, "less"))


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
    return (f"no difference of {' or '.join(map(str, short))} pairs can separate, whatever the data: the exact "
            f"test's smallest p at {n} pairs is {smallest_p(n):.3g}, "
            f"and Holm over {family} tests makes it {min(1.0, family * smallest_p(n)):.3g}, not below {level:g}; "
            f"{pairs_needed(family, level)} pairs (seeds × other cells) could")
