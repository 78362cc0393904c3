"""The exact tests behind every verdict, against hand computations, scipy's permutation test and a
brute-force count of every sign assignment: p is never 0, its floor at n pairs is 2 / 2^n, it is
exact to EXACT_UP_TO pairs and a Monte Carlo p (with its standard error) past them, and
equivalence (TOST) needs a margin and pairs."""

import math

import numpy as np
import pytest
from scipy import stats

from zoo.compare.exact import (
    EXACT_UP_TO,
    MONTE_CARLO_DRAWS,
    SignedSums,
    equivalence_p,
    is_monte_carlo,
    monte_carlo_error,
    sign_flip_p,
    smallest_margin,
    smallest_p,
)


def scipy_sign_flip(values, alternative="two-sided") -> float:
    """scipy's permutation test of one sample (it flips signs), exact."""
    return float(stats.permutation_test((np.asarray(values),), np.mean, permutation_type="samples",
                                        alternative=alternative, n_resamples=np.inf).pvalue)


@pytest.mark.parametrize("values", [[0.3, -0.1, 0.4, 0.2, 0.25], [-0.0184, -0.0163, -0.0162], [1.0, -1.0, 2.0, 0.5],
                                    [0.01 * k - 0.03 for k in range(9)], [5.0, 5.0]])
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_the_sign_flip_p_is_scipys_exact_permutation_p(values, alternative):
    assert sign_flip_p(values, alternative) == pytest.approx(scipy_sign_flip(values, alternative), rel=1e-12)


def test_p_is_never_zero_and_its_floor_is_two_over_two_to_the_n():
    """Narang's SwiGLU differences: a t-test gives 0.0018 from three pairs; no assignment of signs
    can make three pairs more extreme than 'all as observed' and its mirror, so p is 2 / 8."""
    swiglu = [-0.0184, -0.0163, -0.0162]
    assert stats.ttest_1samp(swiglu, 0.0).pvalue == pytest.approx(0.0018, abs=1e-4)
    assert sign_flip_p(swiglu) == 0.25 == smallest_p(3)
    assert sign_flip_p([0.2, 0.2]) == 0.5 == smallest_p(2), "zero variance, two pairs"
    assert sign_flip_p([0.2] * 8) == 2 / 256 == smallest_p(8)
    assert sign_flip_p([0.0, 0.0, 0.0]) == 1.0
    assert smallest_p(3, sided=1) == 1 / 8
    assert math.isnan(sign_flip_p([0.2])) and math.isnan(sign_flip_p([0.1, math.nan]))


def brute_force_p(values, alternative="two-sided") -> float:
    """Every sign assignment listed, in chunks: the count meet-in-the-middle must reproduce."""
    x, count = np.asarray(values, dtype=float), 0
    observed, n = x.sum(), x.size
    for start in range(0, 2**n, 2**16):
        codes = np.arange(start, min(start + 2**16, 2**n))[:, None] >> np.arange(n)[None, :] & 1
        sums = (1 - 2 * codes) @ x
        slack = 1e-12 * max(1.0, np.abs(x).sum())
        count += int({"greater": sums >= observed - slack, "less": sums <= observed + slack,
                      "two-sided": np.abs(sums) >= abs(observed) - slack}[alternative].sum())
    return count / 2**n


@pytest.mark.parametrize("n", [17, 21])
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_meeting_in_the_middle_counts_every_assignment_exactly(n, alternative):
    """Past 16 pairs the two halves' sums are met, not listed: the p must be the full count's,
    to the last assignment (kinds-matched's 24 pairs printed a drawn 0.00015 where this is exact)."""
    values = np.random.default_rng(n).normal(0.15, 1.0, n)
    values[3] = values[5]  # a tie among the pairs, and a value shared in both halves
    assert sign_flip_p(values, alternative) == brute_force_p(values, alternative)


def test_exact_to_thirty_two_pairs_then_a_monte_carlo_p_that_says_so():
    assert EXACT_UP_TO >= 30 and not is_monte_carlo(EXACT_UP_TO) and is_monte_carlo(EXACT_UP_TO + 1)
    assert sign_flip_p([0.3] * EXACT_UP_TO) == 2 / 2**EXACT_UP_TO == smallest_p(EXACT_UP_TO), "exact: no draws"
    n = EXACT_UP_TO + 4
    p = sign_flip_p([0.3] * n)
    assert 0 < p == smallest_p(n) == 1 / (MONTE_CARLO_DRAWS + 1) and MONTE_CARLO_DRAWS >= 10**6
    assert sign_flip_p([0.3] * n) == p, "seeded: the same every time"
    noisy = np.random.default_rng(1).normal(0.4, 1.0, n)
    drawn = sign_flip_p(noisy)
    assert drawn == pytest.approx(stats.ttest_1samp(noisy, 0.0).pvalue, abs=0.01), "many pairs: near t"
    error = monte_carlo_error(drawn)
    assert error == pytest.approx(math.sqrt(drawn * (1 - drawn) / MONTE_CARLO_DRAWS)) and 0 < error < 5e-4


def test_the_exact_count_and_the_drawn_one_agree_where_both_can_be_made():
    """The Monte Carlo p of n pairs is within a few standard errors of the exact p of the same
    pairs (counted by halves): the two methods measure one thing."""
    values = np.random.default_rng(5).normal(0.2, 1.0, EXACT_UP_TO)
    exact = sign_flip_p(values)
    drawn = SignedSums(values, exact=False)
    observed = values.sum()
    count = drawn.at_least(abs(observed) - 1e-9, 0.0) + drawn.at_most(1e-9 - abs(observed), 0.0)
    monte_carlo = (count + 1) / (MONTE_CARLO_DRAWS + 1)
    assert abs(monte_carlo - exact) < 5 * monte_carlo_error(exact)


def test_equivalence_is_the_larger_of_two_one_sided_p():
    """Differences 0.01, -0.02, 0.015, 0, 0.005, -0.01 against a margin of 0.1: shifted by +0.1 all
    are positive and by -0.1 all negative, so each one-sided p is 1 / 64; against 0.008 the
    shifted values straddle 0 and the pairs cannot call it level."""
    values = [0.01, -0.02, 0.015, 0.0, 0.005, -0.01]
    assert equivalence_p(values, 0.1) == 1 / 64
    x = np.asarray(values)
    hand = max(scipy_sign_flip(x + 0.008, "greater"), scipy_sign_flip(x - 0.008, "less"))
    assert equivalence_p(values, 0.008) == pytest.approx(hand) and hand > 0.05


def test_the_smallest_margin_is_where_the_two_tests_start_to_pass():
    values = [0.01, -0.02, 0.015, 0.0, 0.005, -0.01]
    margin = smallest_margin(values)
    assert equivalence_p(values, margin) < 0.05 <= equivalence_p(values, margin * (1 - 1e-4))
    assert smallest_margin([0.01, -0.02, 0.015, 0.0]) is None, "1 / 16 is not below 0.05: four pairs call nothing level"
    assert smallest_margin([0.01, -0.02, 0.015, 0.0, 0.003]) is not None, "1 / 32 is"
