"""Families a discrete test can use (Tarone 1990): a test whose smallest attainable p cannot reach
its share of the level leaves the family before Holm, the report names it, and the tests that stay
keep the level; the family-wise error stays within it (simulated under the null)."""

import math

import numpy as np
import pytest
import sweepkit

from zoo.compare.exact import sign_flip_p, smallest_p, tarone
from zoo.compare.sections import SECTIONS, analyse
from zoo.compare.stats import holm


def test_a_test_that_cannot_reach_its_share_leaves_the_family():
    """transfer-sort's design: pre − post over 6 pairs (smallest p 0.031), two ffn differences over
    4 (0.125) and two interactions over 2 (0.5). With K = 1 only pre − post is below 0.05 / 1."""
    floors = [smallest_p(n) for n in (6, 4, 4, 2, 2)]
    assert tarone(floors) == ([True, False, False, False, False], 1)
    assert holm([0.03125, 0.125, 0.125, 0.5, 0.5], floors)[0] == 0.03125, "alone in its family: p itself"
    assert all(math.isnan(p) for p in holm([0.03125, 0.125, 0.125, 0.5, 0.5], floors)[1:])
    assert holm([0.03125, 0.125, 0.125, 0.5, 0.5])[0] == pytest.approx(5 * 0.03125), "plain Holm pays for all five"


def test_tests_with_pairs_enough_all_stay_and_holm_is_unchanged():
    floors, p = [smallest_p(12)] * 4, [0.001, 0.02, 0.3, 0.04]
    assert tarone(floors) == ([True] * 4, 4)
    assert holm(p, floors) == holm(p)


def test_the_smallest_k_is_taken_and_nan_floors_stay_out():
    """Six tests at 8 pairs (floor 0.0078) and three at 5 (0.0625): at K = 6 the six are below
    0.05 / 6 = 0.0083 and M(6) = 6, so the 5-pair tests leave; no K < 6 holds them all."""
    floors = [smallest_p(8)] * 6 + [smallest_p(5)] * 3 + [math.nan]
    kept, k = tarone(floors)
    assert k == 6 and kept == [True] * 6 + [False] * 4
    assert tarone([smallest_p(3), smallest_p(2)]) == ([False, False], 1), "none can reach even the whole level"


def test_the_family_wise_error_stays_within_the_level_under_the_null():
    """Every difference symmetric about 0, a family of two 7-pair and three 4-pair tests: the share
    of simulated families with any separation stays at most 0.05 (within sampling error), while the
    two 7-pair tests, which plain Holm over all five can never separate (5 × 2/128 = 0.078),
    become testable."""
    rng, any_false, n_sim = np.random.default_rng(3), 0, 2000
    floors = [smallest_p(n) for n in (7, 7, 4, 4, 4)]
    assert tarone(floors)[0] == [True, True, False, False, False]
    for _ in range(n_sim):
        p = [sign_flip_p(rng.normal(0.0, 1.0, n)) for n in (7, 7, 4, 4, 4)]
        any_false += any(q < 0.05 for q in holm(p, floors) if not math.isnan(q))
    assert any_false / n_sim <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / n_sim)


def transfer_like(norm, ffn, seed):
    """pre − post positive in every pair (6 pairs: 3 feed-forwards × 2 seeds); the ffn values
    differ by small, mixed amounts."""
    return 0.5 + (0.05 + 0.01 * seed if norm == "pre" else 0.0) + {"relu": 0.0, "gelu": 0.003, "swiglu": -0.002}[ffn] \
        * (1 if seed else -1)


def test_the_report_names_what_left_and_the_one_member_separates(tmp_path):
    sweep = sweepkit.write_sweep(tmp_path, "transfer-like", {"model.norm": ["post", "pre"],
                                                              "model.ffn": ["relu", "gelu", "swiglu"]},
                                 [0, 1], lambda a, seed: transfer_like(a["model.norm"], a["model.ffn"], seed))
    analysis = analyse(sweep.directory())
    effects = analysis["effects"]
    assert (effects.family, effects.members) == (1, 5)
    norm = next(e for e in effects.effects if e.key == "model.norm")
    assert norm.tests[0] == (2 / 64, 2 / 64), "the family's one member keeps the whole level"
    text = "\n".join(SECTIONS.get("effects").markdown(effects, analysis))
    assert "Left the family before Holm (Tarone 1990)" in text and "(4 pairs: smallest p 0.125)" in text
    assert "| pre − post | 0.055 | [0.04925, 0.06075] | 6 | 0.0312 | 0.0312 | separated |" in text
    assert "the sweep's 5 paired differences and two-way interactions on its metric, the 1 whose" in text
    assert "left the family, 4 pairs cannot reach their share of the level" in text
    power = "\n".join(SECTIONS.get("power").markdown(analysis["power"], analysis))
    assert "ffn: gelu − relu: left the family (4 pairs cannot reach their share of the level)" in power
