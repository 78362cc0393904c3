"""The grid as a randomized block design, against the classical two-way analysis with blocks
computed by hand, and each difference's power against the exact test's own rejections; both in the report and in W&B."""

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import sweepkit
from scipy import stats
from scipy.stats import norm

from trainkit import offline_run
from zoo.compare import compare
from zoo.compare.exact import pairs_needed, sign_flip_p
from zoo.compare.factorial import factorial
from zoo.compare.load import read_sweep
from zoo.compare.power import MOST_PAIRS, detectable_factor, power_of
from zoo.compare.stats import Estimate, units_of

SEEDS = [0, 1, 2]
BLOCK = [0.0, 0.05, -0.03]
NOISE = {(a, b, s): 0.01 * math.sin(7 * a + 3 * b + 11 * s) for a, b, s in itertools.product(range(2), range(2), SEEDS)}


def value(a, seed):
    pre, gelu = a["model.norm"] == "pre", a["model.ffn"] == "gelu"
    return 0.5 + 0.2 * pre + 0.03 * gelu + 0.04 * pre * gelu + BLOCK[seed] + NOISE[(int(pre), int(gelu), seed)]


def hand_anova(y: np.ndarray) -> dict[str, tuple[float, int]]:
    """y[a, b, s] of a balanced 2 x 2 grid in blocks: the textbook sums of squares and degrees of freedom."""
    grand = y.mean()
    ss_block = 4 * ((y.mean(axis=(0, 1)) - grand) ** 2).sum()
    ss_a = 6 * ((y.mean(axis=(1, 2)) - grand) ** 2).sum()
    ss_b = 6 * ((y.mean(axis=(0, 2)) - grand) ** 2).sum()
    cells = y.mean(axis=2)
    ss_ab = 3 * ((cells - cells.mean(axis=1, keepdims=True) - cells.mean(axis=0, keepdims=True) + grand) ** 2).sum()
    ss_total = ((y - grand) ** 2).sum()
    return {"seed (block)": (ss_block, 2), "norm": (ss_a, 1), "ffn": (ss_b, 1), "norm × ffn": (ss_ab, 1),
            "residual": (ss_total - ss_block - ss_a - ss_b - ss_ab, 12 - 1 - 2 - 1 - 1 - 1)}


def test_the_factorial_analysis_is_the_two_way_analysis_with_blocks(tmp_path):
    sweep = sweepkit.write_sweep(tmp_path, "blocks", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]}, SEEDS,
                                 value)
    read = read_sweep(sweep.directory())
    result = factorial(units_of(read.comparison, read.records).finished, list(read.comparison.grid), read.comparison.labels())
    y = np.array([[[value({"model.norm": n, "model.ffn": f}, s) for s in SEEDS] for f in ("relu", "gelu")]
                  for n in ("post", "pre")])
    hand = hand_anova(y)
    residual_ss, residual_df = hand["residual"]
    assert (result.residual_df, result.units) == (residual_df, 12) and result.residual_ss == pytest.approx(residual_ss)
    for term in result.terms:
        ss, df = hand[term.name]
        f = (ss / df) / (residual_ss / residual_df)
        assert (term.df, term.ss, term.f, term.p) == pytest.approx((df, ss, f, stats.f.sf(f, df, residual_df))), term.name
    tested = [t for t in result.terms if t.name != "seed (block)"]
    order = np.argsort([t.p for t in tested])
    assert tested[order[0]].holm_p == pytest.approx(3 * tested[order[0]].p), "Holm over the 3 terms, not the block"


def test_a_design_without_residual_degrees_of_freedom_tests_nothing_and_says_why(tmp_path):
    sweep = sweepkit.write_sweep(tmp_path, "one", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]}, [0],
                                 lambda a, s: value(a, 0))
    read = read_sweep(sweep.directory())
    result = factorial(units_of(read.comparison, read.records).finished, list(read.comparison.grid), read.comparison.labels())
    assert result.terms == [] and "4 units and 4 parameters leave no residual degrees of freedom" in result.note


def test_power_is_the_exact_tests_not_the_normal_approximations():
    """8 pairs in a family of 6: the normal approximation promises 1.23 sd, the exact sign-flip
    test at the Bonferroni level needs about 1.91 sd (an independent re-analysis, 2026-12-06)."""
    normal = (norm.ppf(1 - 0.05 / 12) + norm.ppf(0.8)) / math.sqrt(8)
    assert normal == pytest.approx(1.23, abs=0.005)
    assert detectable_factor(8, 0.05 / 6) == pytest.approx(1.91, abs=0.06)
    e = Estimate.of([0.05, 0.02, 0.04, 0.03, 0.06, 0.01, 0.05, 0.04, 0.02, 0.03])
    assert power_of(e, 3, 0.0).detectable == detectable_factor(10, 0.05 / 3) * e.std


@pytest.mark.parametrize("n, family", [(6, 1), (9, 4), (20, 2)])
def test_at_the_detectable_difference_the_exact_test_rejects_four_times_in_five(n, family):
    """Drawn afresh (another seed than the factor's) and tested by the very sign_flip_p the
    verdicts use: the share of rejections at the factor found is 80%, within sampling error."""
    factor, rng = detectable_factor(n, 0.05 / family), np.random.default_rng(1234)
    rejected = [sign_flip_p(rng.normal(factor, 1.0, n)) < 0.05 / family for _ in range(1500)]
    assert np.mean(rejected) == pytest.approx(0.8, abs=0.04)


def test_the_pairs_a_difference_needs_are_the_fewest_that_reach_it():
    e = Estimate.of([0.05, 0.02, 0.04, 0.03, 0.06, 0.01, 0.05, 0.04, 0.02, 0.03])
    needed = power_of(e, 3, 0.01).pairs_for
    assert detectable_factor(needed, 0.05 / 3) * e.std <= 0.01 < detectable_factor(needed - 1, 0.05 / 3) * e.std
    assert power_of(e, 3, 1e-4).pairs_for == MOST_PAIRS + 1, "more than the search goes to: said so"
    assert power_of(Estimate.of([0.05, 0.02, 0.04]), 3, 0.01).detectable == math.inf, "3 pairs: the exact test cannot"
    assert power_of(Estimate.of([0.05, 0.05, 0.05, 0.05]), 3, 0.05).pairs_for == pairs_needed(3) == 7


@pytest.mark.slow
def test_the_report_and_wandb_hold_the_factorial_analysis_and_the_power(tmp_path):
    sweep = sweepkit.write_sweep(tmp_path, "blocks", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]}, SEEDS,
                                 value)
    report = compare(sweep.directory())
    text = report.markdown.read_text()
    assert "## Factorial analysis (seed as block; secondary, decides nothing)" in text
    assert "| norm × ffn | 1 |" in text and "| residual | 6 |" in text
    assert "- norm: pre − post: left the family (6 pairs cannot reach their share of the level)" in text, \
        "two 6-pair differences (smallest p 2 / 64 each) cannot both reach a share of 0.05: none is tested"
    assert "Factorial analysis of 12 units" in report.effects_text
    info, _ = offline_run(sweep.directory())
    table = info["summary"]["factorial"]
    written = json.loads((Path(report.wandb_run) / "files" / table["path"]).read_text())
    assert [row[0] for row in written["data"]] == ["seed (block)", "norm", "ffn", "norm × ffn", "residual"]
    assert written["data"][-1][1] == 6
