"""An axis whose effect depends on another (Post-LN needs warmup, Pre-LN does not): the report
gives each axis's paired effect within each value of the other, and each variant's interval."""

import json
from pathlib import Path

import pytest
import sweepkit

from trainkit import offline_run
from zoo.compare import Estimate, compare

NOISE = [0.0, 0.04, -0.03, 0.02, -0.01, 0.05, -0.04, 0.01]
"""Eight seeds: over a family of 4 simple differences the exact test can separate (4 x 2 / 2^8 < 0.05)."""


def interacting(a, seed):
    """Pre-LN adds 0.6 without warmup and 0.3 with it; warmup adds 0.3 to Post-LN and nothing to
    Pre-LN; every cell of a seed shares that seed's noise, so paired differences are exact."""
    pre, warmed = a["model.norm"] == "pre", a["train.warmup_steps"] == 100
    return 0.3 + NOISE[seed] + (0.6 if pre else 0.3 if warmed else 0.0)


def write(tmp_path):
    return sweepkit.write_sweep(tmp_path, "inter", {"model.norm": ["post", "pre"], "train.warmup_steps": [0, 100]},
                                list(range(len(NOISE))), interacting)


def test_effects_within_each_value_of_the_other_axis(tmp_path):
    report = compare(write(tmp_path).directory(), wandb_mode="disabled")
    found = {(e.label, e.given_value): e.differences for e in report.simple}
    expected = {("norm", 0): ("pre", 0.6), ("norm", 100): ("pre", 0.3),
                ("warmup_steps", "post"): (100, 0.3), ("warmup_steps", "pre"): (100, 0.0)}
    assert set(found) == set(expected)
    for at, (value, difference) in expected.items():
        (got_value, e), = found[at]
        assert got_value == value and e.n == 8
        assert (e.mean, e.low, e.high) == pytest.approx((difference,) * 3, abs=1e-12), at
    (_, marginal), = report.effects[0].differences
    assert marginal.mean == pytest.approx(0.45) and marginal.n == 16, "the marginal effect averages the two"


@pytest.mark.slow
def test_report_and_wandb_hold_the_interactions_and_variant_intervals(tmp_path):
    sweep = write(tmp_path)
    report = compare(sweep.directory())
    text = report.markdown.read_text()
    lines = {tuple(line.split(" | ")[:3]): line for line in text.splitlines() if line.startswith("| norm |")
             or line.startswith("| warmup_steps |")}
    assert lines["| norm", "pre − post", "warmup_steps=0"].startswith("| norm | pre − post | warmup_steps=0 | 0.6 | "
                                                                       "[0.6, 0.6] | 8 | ")
    assert lines["| norm", "pre − post", "warmup_steps=0"].endswith(" * |"), "the same in every pair: separated"
    assert lines["| warmup_steps", "100 − 0", "norm=pre"].endswith("| 0 | [0, 0] | 8 | 1 | 1 |"), "none: not starred"
    assert "| warmup_steps | 100 − 0 | norm=pre | " in text
    row = next(r for r in report.rows if r.variant == "norm=pre,warmup_steps=0")
    interval = Estimate.of([0.9 + n for n in NOISE])
    assert (row.metric.low, row.metric.high) == pytest.approx((interval.low, interval.high))
    assert f"[{interval.low:.4g}, {interval.high:.4g}]" in report.table_text
    info, _ = offline_run(sweep.directory())
    table = info["summary"]["interactions"]
    assert table["nrows"] == 4, "two axes, each at two values of the other"
    written = json.loads((Path(report.wandb_run) / "files" / table["path"]).read_text())
    at_warmup = next(r for r in written["data"] if r[:3] == ["norm", "pre − post", "warmup_steps=100"])
    # the exact test's smallest p at 8 pairs, 2 / 2^8; three of the four simple differences have it, so Holm
    # multiplies the smallest by 4 and the next two keep that (the adjustment never falls with rank)
    assert at_warmup[3:] == pytest.approx([0.3, 0.3, 0.3, 8, 2 / 2**8, 4 * 2 / 2**8], abs=1e-12), "with its p and Holm p"


def test_one_axis_has_no_interactions(tmp_path):
    sweep = sweepkit.write_sweep(tmp_path, "one", {"model.norm": ["post", "pre"]}, [0, 1], lambda a, seed: 0.5)
    report = compare(sweep.directory(), wandb_mode="disabled")
    assert report.simple == [] and "at each value of another" not in report.markdown.read_text()


def test_an_interactions_interval_is_held_to_what_a_contrast_of_the_metric_can_be(tmp_path):
    """Exact match lies in [0, 1], so an interaction (a difference of two differences) lies in
    [-2, 2]: from two seeds of +2 and -2 its t-interval reaches ±25, which no contrast can."""
    from zoo.compare.sections import analyse

    def flipping(a, seed):
        both = (a["model.norm"] == "pre") == (a["train.warmup_steps"] == 100)
        return float(both) if seed == 0 else float(not both)

    sweep = sweepkit.write_sweep(tmp_path, "bounded", {"model.norm": ["post", "pre"], "train.warmup_steps": [0, 100]},
                                 [0, 1], flipping)
    (crossed,) = [i for e in analyse(sweep.directory())["effects"].effects for i in e.interactions]
    assert crossed.estimate.values == (2.0, -2.0) and crossed.estimate.mean == 0.0
    assert (crossed.estimate.low, crossed.estimate.high) == (-2.0, 2.0), "clipped to the contrast's range"
