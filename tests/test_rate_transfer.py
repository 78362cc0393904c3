"""The best rate across widths (zoo.compare.sections.rate_transfer): from a synthetic tuned ladder
whose best rate per seed and width is known, each variant's slope is recovered, a flat one is
called held only inside the declared margin, a falling one falls, a best rate at the grid's end
leaves its variant without a verdict, a seed not yet trained is named, and the declaration is
refused where nothing can be fitted."""

import math

import pytest
import sweepkit
import yaml
from test_bad_input import cli_error

from zoo.compare import compare
from zoo.compare.sections import SECTIONS
from zoo.compare.sections.rate_transfer import best_log_rate
from zoo.sweep import SweepSpec

RATES = [0.001, 0.003, 0.01, 0.03, 0.1]
WIDTHS = {"d32": 32, "d64": 64, "d128": 128}
SLOPES = {"standard": -0.3, "mup": 0.0}
"""Decades the best rate moves per doubling of width."""
WOBBLE = {0: 0.02, 1: -0.01, 2: -0.01}
"""Each seed's own shift of its slope (zero mean): the seeds do not agree exactly."""


def best_of(row: str, size: str, seed: int, slopes=SLOPES) -> float:
    """The seed's true best log10 rate at the size: -2 at d32, moving by its slope per doubling."""
    return -2.0 + (slopes[row] + WOBBLE[seed]) * math.log2(WIDTHS[size] / 32)


def write_ladder(tmp_path, slopes=SLOPES, declared: dict | None = None, **fields) -> SweepSpec:
    sweep = SweepSpec.model_validate({
        "name": "rates", "rows": {"standard": {}, "mup": {"model.parametrization": "mup"}},
        "sizes": {name: {"model.d_model": width} for name, width in WIDTHS.items()},
        "tune": {"train.optimizer.lr": RATES}, "seeds": [0, 1, 2], "metric": "test/loss", "out_dir": str(tmp_path),
        "rate_slope_margin": 0.1, **fields})
    # a parabola in log10(rate) around the seed's best: the refinement finds it exactly
    sweepkit.finished_tuned(sweep, lambda a, seed: 2.0 + (math.log10(a["train.optimizer.lr"])
                                                           - best_of(a["row"], a["size"], seed, slopes)) ** 2,
                            declared)
    return sweep


def test_each_variants_slope_is_recovered_and_judged_against_the_margin(tmp_path):
    report = compare(write_ladder(tmp_path).directory(), wandb_mode="disabled")
    found = {f.variant: f for f in report.analysis["rate_transfer"].slopes}
    for row, slope in SLOPES.items():
        assert found[f"row={row}"].slopes == pytest.approx({seed: slope + WOBBLE[seed] for seed in WOBBLE}, abs=1e-9)
        assert found[f"row={row}"].estimate.mean == pytest.approx(slope, abs=1e-9)
    assert found["row=standard"].verdict.startswith("falls with width (t-test Holm p")
    assert found["row=mup"].verdict.startswith("holds: level within ±0.1 decades per doubling (TOST Holm p")
    text = report.markdown.read_text()
    section = SECTIONS.get("rate_transfer")
    assert "\n".join(section.markdown(report.analysis["rate_transfer"], report.analysis)) in text
    assert section.console(report.analysis["rate_transfer"], report.analysis) in report.table_text
    ((columns, rows),) = section.tables(report.analysis["rate_transfer"], report.analysis).values()
    assert [len(row) for row in rows] == [len(columns)] * 2
    assert "## The best rate across widths" in text
    assert "| row=standard | 3 | -0.300 [-0.343, -0.257] | 0.0022 | 1 | falls with width (t-test Holm p 0.0022) | — |" in text
    assert "| row=mup | 3 | +0.000 [-0.043, +0.043] | 1 | 0.0099 | holds: level within ±0.1 decades per doubling" in text


def test_a_margin_narrower_than_the_seeds_spread_is_inconclusive_not_held(tmp_path):
    report = compare(write_ladder(tmp_path, rate_slope_margin=0.01).directory(), wandb_mode="disabled")
    (mup,) = [f for f in report.analysis["rate_transfer"].slopes if f.variant == "row=mup"]
    assert mup.verdict.startswith("not separated (inconclusive: not level within ±0.01")


def test_a_best_rate_at_the_grids_end_leaves_its_variant_without_a_verdict(tmp_path):
    steep = {"standard": -0.6, "mup": 0.0}  # d128's best rate falls past the smallest rate tried
    sweep = write_ladder(tmp_path, slopes=steep)
    ledger = sweep.directory() / "ledger.jsonl"
    lines = ledger.read_text().splitlines()
    ledger.write_text("\n".join(line for line in lines if "row=mup,size=d64,lr=0.1,seed=2" not in line) + "\n")
    report = compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)
    standard, mup = report.analysis["rate_transfer"].slopes
    assert standard.edges == [(0, 128), (1, 128), (2, 128)] and math.isnan(standard.tost_p)
    assert standard.verdict == ("no verdict: the best rate sits at the end of the tried rates (seed 0 at d=128, "
                                "seed 1 at d=128, seed 2 at d=128)")
    assert mup.missing == [(2, 64)] and sorted(mup.slopes) == [0, 1] and mup.estimate.n == 2
    assert ("row=mup: seed 2 at d=64 is left out of the best rate across widths (a tried rate has no run yet)"
            in report.analysis.notes())


def test_without_the_declaration_the_report_has_no_such_section(tmp_path):
    report = compare(write_ladder(tmp_path, rate_slope_margin=None).directory(), wandb_mode="disabled")
    assert report.analysis["rate_transfer"] is None and "best rate across widths" not in report.markdown.read_text()


@pytest.mark.parametrize(("fields", "said"), [
    ({"tune": {}}, "tune: names 0 learning rates (none), one is fitted"),
    ({"sizes": {"d32": {"model.d_model": 32}}}, "the sweep's sizes and grid give 1 width(s) (model.d_model)")])
def test_a_slope_that_cannot_be_fitted_is_refused_by_name(tmp_path, capsys, fields, said):
    sweep = {"name": "rates", "sizes": {"d32": {"model.d_model": 32}, "d64": {"model.d_model": 64}},
             "tune": {"train.optimizer.lr": RATES}, "metric": "test/loss", "rate_slope_margin": 0.1,
             "base": {"task": {"name": "reverse"}}, **fields}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sweep))
    err = cli_error(["sweep", str(tmp_path / "s.yaml"), "--dry-run"], capsys)
    assert ("rate_slope_margin: the best learning rate is fitted against width, which needs one tuned learning rate "
            f"and two or more widths; {said}") in err


def test_a_rate_that_diverged_counts_as_the_worst_and_the_parabola_is_read_on_the_log_grid():
    rates = [0.001, 0.01, 0.1, 1.0]
    assert best_log_rate([3.0, 2.0, 3.0, math.nan], rates, "min") == (pytest.approx(-2.0), False)
    assert best_log_rate([1.0, math.nan, 2.0, 3.0], rates, "min") == (-3.0, True)
    assert best_log_rate([0.5, 0.9, 0.7, 0.1], rates, "max")[0] == pytest.approx(-2 + 0.5 * (0.2 - 0.4) / -0.6)


@pytest.mark.parametrize("recorded, exploratory", [(0.1, False), (0.2, True)])
def test_the_slopes_margin_is_part_of_the_question_the_runs_recorded(tmp_path, recorded, exploratory):
    """A tuned comparison chooses its rates away, and the slope's margin with them; the question it
    is held to is still the sweep file's, margin included."""
    from zoo.sweep.question import declaration

    planned = write_ladder(tmp_path / "planned", rate_slope_margin=recorded)
    report = compare(write_ladder(tmp_path, declared=declaration(planned)).directory(), wandb_mode="disabled")
    declared = report.analysis["declaration"]
    assert declared.undeclared == 0 and declared.exploratory == exploratory
    assert declared.changes == (["rate_slope_margin: 0.2 when cells ran, 0.1 now"] if exploratory else [])
