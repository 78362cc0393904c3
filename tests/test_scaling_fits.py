"""Fits across scale (zoo.compare.power_law, zoo.compare.scaling): a known power law is recovered
from a synthetic ledger within its intervals, each difference is carried past the largest size
with the verdict the laws imply, and degenerate ladders are refused in plain words."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import sweepkit
import yaml

from trainkit import offline_run
from zoo.compare import compare
from zoo.compare.power_law import bootstrap, fit_power_law, over_seeds
from zoo.errors import ConfigError
from zoo.sweep import SweepSpec
from zoo.sweep.loading import load_sweep

SIZES = {f"s{i}": {"model.d_model": 16 * 2**i} for i in range(5)}
COMPUTE = {f"s{i}": 1e12 * 4**i for i in range(5)}
LAWS = {"post": (2.0, 1.5, 0.30), "pre": (1.7, 1.5, 0.40)}
"""(E, A, alpha) per norm, C in units of 1e12: pre lies below post and its lead grows with compute."""
SEEDS = list(range(6))


def law(norm: str, compute: float) -> float:
    e, a, alpha = LAWS[norm]
    return e + a * (compute / 1e12) ** -alpha


def noise(a: dict, seed: int) -> float:
    """A small deterministic wobble per run, zero-mean over the seeds."""
    return 0.004 * math.sin(1.7 * seed + 2.3 * list(SIZES).index(a["size"]) + (a["model.norm"] == "pre"))


def ladder(tmp_path, laws=LAWS, **settings) -> SweepSpec:
    def value(a, seed):
        e, coefficient, alpha = laws[a["model.norm"]]
        return e + coefficient * (COMPUTE[a["size"]] / 1e12) ** -alpha + noise(a, seed)

    return sweepkit.write_sweep(tmp_path, "ladder", {"model.norm": ["post", "pre"]}, SEEDS, value, metric="test/loss",
                                sizes=SIZES, fields=lambda a, seed: {"flops": COMPUTE[a["size"]],
                                                                     "tokens": 20 * 1000 * 4 ** int(a["size"][1])},
                                **settings)


def test_a_known_law_is_recovered_within_its_intervals(tmp_path):
    report = compare(ladder(tmp_path).directory())
    fits = {v.label: v for v in report.scaling.variants}
    for norm, (e, _, alpha) in LAWS.items():
        variant = fits[f"norm={norm}"]
        assert len(variant.laws) == 6 and not variant.problems()
        exponent, irreducible = variant.exponent(), variant.irreducible()
        assert exponent.low - 0.02 <= alpha <= exponent.high + 0.02 and abs(exponent.mean - alpha) < 0.03
        assert abs(irreducible.mean - e) < 0.03
    (gap,) = report.scaling.differences
    largest = COMPUTE["s4"]
    assert gap.largest == largest and gap.target == 10 * largest
    truth_now, truth_far = law("pre", largest) - law("post", largest), law("pre", 10 * largest) - law("post", 10 * largest)
    assert gap.at_largest.mean == pytest.approx(truth_now, abs=0.01)
    assert gap.at_target.mean == pytest.approx(truth_far, abs=0.02)
    assert gap.label == "norm: pre − post" and gap.verdict.startswith("shrinks")  # the gap narrows towards E's
    assert truth_far > truth_now  # -0.37 at the largest, -0.32 ten times past it: closer to zero


def test_curves_that_cross_past_the_largest_size_reverse_and_say_where(tmp_path):
    laws = {"post": (2.0, 1.0, 0.25), "pre": (1.0, 3.5, 0.25)}  # pre worse at small compute, better at large
    report = compare(ladder(tmp_path, laws).directory(), wandb_mode="disabled")
    (gap,) = report.scaling.differences
    # 1 + 3.5 x = 2 + x at x = 0.4, x = c^-0.25: c = 0.4^-4 = 39.06 (in units of 1e12)
    assert gap.crossing == pytest.approx(0.4**-4 * 1e12, rel=0.05)
    assert gap.crossing < gap.largest and gap.at_largest.mean < 0  # they crossed inside the ladder
    laws = {"post": (2.0, 1.0, 0.25), "pre": (1.5, 3.81, 0.25)}  # cross at x = 0.5 / 2.81: c = 998, past s4's 256
    report = compare(ladder(tmp_path / "far", laws).directory(), wandb_mode="disabled")
    (gap,) = report.scaling.differences
    assert gap.at_largest.mean > 0 and gap.at_target.high < 0
    assert gap.verdict.startswith("reverses; the curves cross at")
    assert gap.crossing == pytest.approx((0.5 / 2.81) ** -4 * 1e12, rel=0.05)


def test_report_plot_and_wandb_hold_the_ladder_the_laws_and_the_differences(tmp_path):
    sweep = ladder(tmp_path)
    report = compare(sweep.directory())
    text = report.markdown.read_text()
    assert "## Across scale: fitted laws" in text and "| size=s4 | norm=pre | — | 1,001 | 2.56e+14 | 5,120,000 |" in text
    assert "| norm: pre − post |" in text and "![scaling](scaling.png)" in text
    assert (sweep.directory() / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    info, _ = offline_run(sweep.directory())
    assert info["summary"]["ladder"]["nrows"] == 10 and info["summary"]["scaling_laws"]["nrows"] == 12
    differences = info["summary"]["scaling_differences"]
    written = json.loads((Path(report.wandb_run) / "files" / differences["path"]).read_text())
    (row,) = written["data"]
    assert row[0] == "norm: pre − post" and row[-1] == report.scaling.differences[0].verdict
    assert "Across scale:" in report.effects_text


def test_two_sizes_a_flat_metric_and_uncounted_compute_are_said_plainly(tmp_path):
    two = {name: SIZES[name] for name in ("s0", "s1")}
    sweep = sweepkit.write_sweep(tmp_path, "two", {"model.norm": ["post", "pre"]}, [0, 1], lambda a, s: 1.0,
                                 metric="test/loss", sizes=two, fields=lambda a, s: {"flops": COMPUTE[a["size"]]})
    report = compare(sweep.directory(), wandb_mode="disabled")
    assert report.scaling.notes == ["no fit: 2 sizes; a power law with an irreducible term needs 3 or more"]
    assert report.scaling.differences == [] and "no fit: 2 sizes" in report.markdown.read_text()
    flat = sweepkit.write_sweep(tmp_path, "flat", {"model.norm": ["post", "pre"]}, [0, 1],
                                lambda a, s: 1.0 + 0.01 * list(SIZES).index(a["size"]), metric="test/loss",
                                sizes=SIZES, fields=lambda a, s: {"flops": COMPUTE[a["size"]]})
    report = compare(flat.directory(), wandb_mode="disabled")
    assert all(v.problems() == [f"seed {s}: the metric does not fall with compute at these sizes (no falling term "
                                "fits)" for s in (0, 1)] for v in report.scaling.variants)
    assert report.scaling.differences == []
    uncounted = sweepkit.write_sweep(tmp_path, "uncounted", {"model.norm": ["post", "pre"]}, [0], lambda a, s: 1.0,
                                     metric="test/loss", sizes=SIZES)
    notes = compare(uncounted.directory(), wandb_mode="disabled").scaling.notes
    assert notes == ["10 finished runs left out: their compute was not counted (a part without forward_flops, or a "
                     "resume from a checkpoint that did not count it)"]


@pytest.mark.parametrize("fields, text", [
    ({"sizes": {"a": {"model.d_model": 16}, "b": {"model.d_model": 32}}, "metric": "test/loss", "fit": {}},
     "fit: a power law with an irreducible term needs 3 or more sizes; grid key(s) size give 2"),
    ({"grid": {"model.norm": ["post", "pre"]}, "metric": "test/loss", "fit": {}}, "the grid has no size key"),
    ({"sizes": SIZES, "metric": "test/exact_match", "fit": {}}, "rises with compute"),
    ({"sizes": SIZES, "metric": "test/loss", "fit": {"extrapolate": 1}}, "extrapolate"),
    ({"sizes": SIZES, "metric": "test/loss", "fit": {"against": "tokens"}}, "'compute' or 'parameters'"),
    ({"sizes": SIZES, "metric": "test/loss", "fit": {"check": ["s9"]}}, "fit.check: 's9' is not a size of the sweep"),
    ({"sizes": {k: SIZES[k] for k in ("s0", "s1", "s2")}, "metric": "test/loss", "fit": {"check": ["s2"]}},
     "grid key(s) size give 2 beside fit.check"),
    ({"sizes": SIZES, "metric": "test/loss", "fit": {"check": ["s2", "s2"]}}, "fit.check lists 's2' twice"),
    ({"grid": {"model.d_model": [16, 32, 64], "model.n_decoder_layers": [1, 2]}, "metric": "test/loss",
      "fit": {"check": [2, 32]}}, "give 2 beside fit.check"),  # 2 widths x 1 depth was counted 3 x 2 - 2 = 4
    ({"sizes": {"h1": {"model.n_heads": 1}, "h2": {"model.n_heads": 2}, "h4": {"model.n_heads": 4}},
      "metric": "eval/loss", "fit": {}}, "the sizes give 1 distinct point(s), and a power law with an irreducible "
                                         "term needs 3 or more; size=h1 and size=h2 and size=h4 have one compute"),
])
def test_a_fit_asked_of_too_few_sizes_or_a_rising_metric_fails_before_anything_runs(tmp_path, fields, text):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", **fields}))
    with pytest.raises(ConfigError, match=re.escape(text)) as caught:
        load_sweep(path)
    assert "\n" not in str(caught.value)


def test_fits_against_parameters_read_each_runs_parameter_count(tmp_path):
    sweep = ladder(tmp_path, fit={"against": "parameters", "extrapolate": 4})
    # every run has 1000 or 1001 parameters here: one distinct size per variant, so nothing is fitted
    report = compare(sweep.directory(), wandb_mode="disabled")
    assert report.scaling.against == "parameters" and report.scaling.multiple == 4
    assert all("distinct sizes" in p for v in report.scaling.variants for p in v.problems())


def test_the_fit_recovers_exact_laws_and_refuses_degenerate_points():
    compute = np.array([1e9, 1e10, 1e11, 1e12])
    exact = fit_power_law(compute, 0.5 + 2.0 * (compute / 1e12) ** -0.2, floor=0.0)
    assert exact.law.exponent == pytest.approx(0.2, rel=1e-3) and exact.law.irreducible == pytest.approx(0.5, abs=1e-3)
    assert exact.law(1e13) == pytest.approx(0.5 + 2.0 * 10**-0.2, rel=1e-4)
    assert fit_power_law(compute, [1.0, math.nan, 0.5, 0.4]).problem.startswith("a point is not finite")
    assert fit_power_law([1e9, 1e9, 1e10], [2, 2, 1]).problem.startswith("2 distinct sizes")
    assert "does not fall" in fit_power_law(compute, [1.0, 1.1, 1.2, 1.3], 0.0).problem
    interval = bootstrap([1.0, 2.0, 3.0])
    assert interval.mean == 2.0 and 1.0 <= interval.low < 2.0 < interval.high <= 3.0 and interval.seeds == 3
    assert not exact.law.on_bound, "E = 0.5 above the floor 0 is identified"


def test_a_law_needs_a_falling_term_above_its_residual_and_an_e_on_its_bound_is_said_so():
    """Points whose best law falls by 0.022 with residuals of 0.034 show no law (scale_ladder's
    post-norm seed: 0.034 against 0.0625); points that fall towards a negative E, under a floor of
    0, put E on its bound, where the points do not identify it: the laws table says so and gives no
    interval."""
    from types import SimpleNamespace

    from zoo.compare.sections.laws import irreducible_text

    ladder = np.array([1e9, 3e9, 1e10, 3e10, 1e11])
    noisy = 3.0 + 0.3 * (ladder / 1e11) ** -0.1 + np.array([-0.125, -0.043, -0.010, 0.076, 0.008])
    said = fit_power_law(ladder, noisy, floor=0.0)
    assert said.law is None and re.fullmatch(r"the falling term \(\S+ across the sizes\) is no larger than the "
                                             r"residual \(\S+\): the points do not show a law", said.problem), said
    compute = np.array([1e9, 1e10, 1e11, 1e12])
    below = fit_power_law(compute, -0.5 + 2.0 * (compute / 1e12) ** -0.05, floor=0.0)
    assert below.law.on_bound and below.law.irreducible == 0.0
    free = fit_power_law(compute, 0.5 + 2.0 * (compute / 1e12) ** -0.2, floor=0.0).law
    shown = irreducible_text(SimpleNamespace(laws={0: below.law, 1: free}, bounded=lambda: 1))
    assert shown == "0: on its bound in 1 of 2 seed(s), not identified, no interval"


def test_a_size_held_out_of_the_fits_checks_their_prediction(tmp_path):
    report = compare(ladder(tmp_path, fit={"check": ["s4"]}).directory())
    (gap,) = report.scaling.differences
    assert gap.largest == COMPUTE["s3"], "the held-out size is not fitted"
    checks = {c.label: c for c in report.scaling.checks}
    assert list(checks) == ["norm=post", "norm=pre", "norm: pre − post"]
    for norm in ("post", "pre"):
        check = checks[f"norm={norm}"]
        assert check.size == "s4" and check.measured.mean == pytest.approx(law(norm, COMPUTE["s4"]), abs=0.005)
        assert check.predicted.mean == pytest.approx(law(norm, COMPUTE["s4"]), abs=0.02)
        assert check.verdict == "not separated from the prediction (inconclusive)"
    truth = law("pre", COMPUTE["s4"]) - law("post", COMPUTE["s4"])
    assert checks["norm: pre − post"].predicted.mean == pytest.approx(truth, abs=0.02)
    assert "### The fits checked at sizes they left out" in report.markdown.read_text()
    wrong = {"post": (2.0, 1.5, 0.30), "pre": (1.7, 1.5, 0.40)}

    def bent(a, seed):  # the largest rung falls off the law: a fit of the others must say so
        e, coefficient, alpha = wrong[a["model.norm"]]
        c = COMPUTE[a["size"]] / 1e12
        return e + coefficient * c**-alpha + noise(a, seed) - (0.2 if a["size"] == "s4" else 0.0)

    sweep = sweepkit.write_sweep(tmp_path / "bent", "bent", {"model.norm": ["post", "pre"]}, SEEDS, bent,
                                 metric="test/loss", sizes=SIZES, fields=lambda a, s: {"flops": COMPUTE[a["size"]]},
                                 fit={"check": ["s4"]})
    checks = {c.label: c for c in compare(sweep.directory(), wandb_mode="disabled").scaling.checks}
    assert checks["norm=post"].verdict == "off: measured below the prediction"
    assert checks["norm: pre − post"].verdict == "not separated from the prediction (inconclusive)"  # both fell alike


def test_few_seeds_get_students_interval_many_the_bootstrap_and_one_no_verdict(tmp_path):
    three = over_seeds([1.0, 2.0, 3.0])
    assert (three.low, three.high) == pytest.approx((2 - 4.303 / math.sqrt(3), 2 + 4.303 / math.sqrt(3)), abs=1e-3)
    assert three.method == "t" and three.low < 1.0  # wider than the seeds' range, which the bootstrap would give
    many = over_seeds(list(range(12)))
    assert many.method == "bootstrap" and 0 < many.low < many.mean < many.high < 11
    one = over_seeds([0.5])
    assert one.seeds == 1 and math.isnan(one.low) and not one.excludes_zero()
    sweep = sweepkit.write_sweep(tmp_path, "one", {"model.norm": ["post", "pre"]}, [0],
                                 lambda a, s: law(a["model.norm"], COMPUTE[a["size"]]), metric="test/loss",
                                 sizes=SIZES, fields=lambda a, s: {"flops": COMPUTE[a["size"]]})
    (gap,) = compare(sweep.directory(), wandb_mode="disabled").scaling.differences
    assert gap.verdict.startswith("no verdict: fewer than 2 seeds fitted")


@pytest.mark.parametrize("flops", [0.0, -1e12, 1e308])
def test_a_count_no_run_can_record_is_refused_naming_the_ledger_and_cell(tmp_path, flops, capsys):
    """0 and 1e308 FLOPs crashed the fit in numpy (geomspace, LinAlgError); a negative count only warned."""
    from zoo.cli import main

    sweep = sweepkit.write_sweep(tmp_path, "ladder", {"model.norm": ["post", "pre"]}, SEEDS,
                                 lambda a, seed: law(a["model.norm"], COMPUTE[a["size"]]), metric="test/loss", sizes=SIZES,
                                 fields=lambda a, seed: {"flops": flops if (a["size"], seed) == ("s2", 1) else
                                                         COMPUTE[a["size"]]})
    with pytest.raises(SystemExit) as stop:
        main(["compare", str(sweep.directory())])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert err.count("\n") == 1 and re.search(r"ledger\.jsonl: cell .*size=s2.*seed=1: flops .* is not a count a "
                                              r"run can record", err), err


def test_another_metric_that_rises_is_compared_on_a_sweep_with_a_fit_and_said_unfitted(tmp_path):
    """`zoo compare --metric test/token_acc` was refused on any sweep with fit: (its loss fitted)."""
    sweep = ladder(tmp_path, fit={"extrapolate": 10})
    ledger = sweep.directory() / "ledger.jsonl"
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    for line in lines:
        if line["status"] == "finished":
            line["metrics"]["test/token_acc"] = 0.5 + 0.01 * list(SIZES).index(line["assignment"]["size"])
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = compare(sweep.directory(), metric="test/token_acc", wandb_mode="disabled")
    assert report.markdown.name == "report-test_token_acc.md"
    assert report.scaling is None or not report.scaling.differences
    assert {row.metric.mean for row in report.rows} and all(0.5 <= row.metric.mean <= 0.55 for row in report.rows)


def test_a_change_past_the_largest_size_holds_only_inside_a_declared_margin():
    """Two one-sided t-tests at 5% on the per-seed change: level where its 90% interval lies inside
    the declared margin; without a margin, or outside it, inconclusive with the narrowest margin
    the seeds could call level (what the 90% interval reaches)."""
    from scipy.stats import t as student_t

    from zoo.compare.power_law import over_seeds
    from zoo.compare.scaling import equivalence_bound, law_verdict

    change = np.array([0.004, -0.002, 0.001])
    half = student_t.ppf(0.95, 2) * change.std(ddof=1) / math.sqrt(3)
    assert equivalence_bound(change) == pytest.approx(abs(change.mean()) + half)
    at_target, interval = over_seeds(np.array([-0.1, -0.12, -0.11])), over_seeds(change)
    bound = equivalence_bound(change)
    assert law_verdict(at_target, interval, -1.0, None, bound, 0.02) == \
        f"holds: the change is level within ±0.02 (two one-sided t-tests at 5%: its 90% interval lies inside ±{bound:.3g})"
    assert law_verdict(at_target, interval, -1.0, None, bound, None) == ("not separated (inconclusive): the change is "
                                                                         "not separated from zero; its seeds exclude no "
                                                                         f"margin narrower than ±{bound:.3g}")
    assert law_verdict(at_target, interval, -1.0, None, bound, 0.001).startswith(
        "not separated (inconclusive): the change is not separated from zero; not level within the declared ±0.001; ")
    assert math.isnan(equivalence_bound(np.array([0.1])))


def test_the_plot_draws_only_the_laws_its_table_accepts_and_says_why_of_the_rest(tmp_path):
    from zoo.compare.sections.laws import law_label

    laws = {"post": (2.0, 0.0, 0.30), "pre": (1.7, 1.5, 0.40)}  # post does not fall with compute
    report = compare(ladder(tmp_path, laws).directory(), wandb_mode="disabled")
    flat, falling = report.scaling.variants
    assert not flat.laws and law_label(flat).startswith("norm=post: no law (seed 0: the metric does not fall with compute")
    assert law_label(falling) == f"norm=pre: alpha {falling.exponent().mean:.3g} [{falling.exponent().low:.3g}, " \
                                 f"{falling.exponent().high:.3g}]"
    assert (tmp_path / "ladder" / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
