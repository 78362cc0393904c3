"""Each distinct computation counts once: twins (values the registry declares one function, or
whose runs are bit-identical) are an identity check and one unit in every other axis's test, a
failed check is loud, and near twins are flagged but kept."""

import pytest
import sweepkit

from zoo.compare import compare
from zoo.compare.exact import sign_flip_p
from zoo.compare.load import read_sweep
from zoo.compare.stats import axis_effects, seed_noise
from zoo.compare.units import declared_function

SEEDS = [0, 1, 2, 3, 4, 5]
NOISE = [0.0, 0.03, -0.02, 0.05, -0.04, 0.01]


def norm_effect(a, seed) -> float:
    return 0.5 + 0.1 * (a["model.norm"] == "pre") + NOISE[seed] * (a["model.norm"] == "pre")


def effects_of(tmp_path, name, grid, value):
    sweep = sweepkit.write_sweep(tmp_path, name, grid, SEEDS, value)
    read = read_sweep(sweep.directory())
    return axis_effects(read.comparison, read.records), read


def test_the_registry_declares_which_attention_layouts_compute_one_function():
    assert declared_function("model.attention", ["per_head", "fused", "sdpa", "flex"]) == "softmax attention"
    assert declared_function("model.norm", ["post", "pre"]) is None
    assert declared_function("model.attention", ["fused", "no_such_layout"]) is None
    assert declared_function("train.z_loss", [0.0, 1e-4]) is None


def test_twins_are_an_identity_check_and_one_unit_in_every_other_test(tmp_path):
    """per_head and fused runs identical: norm's pre − post pairs are the 6 seeds, not 12; its p is
    the exact test's on those 6 differences by hand; the pooled noise counts each unit once."""
    effects, read = effects_of(tmp_path, "twins", {"model.norm": ["post", "pre"], "model.attention": ["per_head", "fused"]},
                               norm_effect)
    norm, attention = effects
    (_, difference), = norm.differences
    by_hand = [0.1 + noise for noise in NOISE]
    assert difference.n == 6 and difference.mean == pytest.approx(sum(by_hand) / 6)
    assert norm.tests[0][0] == pytest.approx(sign_flip_p(by_hand))
    assert attention.differences == [] and attention.tests == []
    check = attention.identity
    assert (check.function, check.identical, check.compared, check.holds) == ("softmax attention", 12, 12, True)
    assert check.text().startswith("identity check attention: per_head = fused: identical in 12 of 12 cells")
    assert seed_noise(read.comparison, read.records)[1] == 2 * 5, "two units of 6 seeds, not four variants"


def test_the_same_ledger_without_its_identical_cells_gives_the_same_verdicts(tmp_path):
    both, _ = effects_of(tmp_path / "a", "both", {"model.norm": ["post", "pre"], "model.attention": ["per_head", "fused"]},
                         norm_effect)
    alone, _ = effects_of(tmp_path / "b", "alone", {"model.norm": ["post", "pre"]}, norm_effect)
    (_, twinned), (_, single) = both[0].differences[0], alone[0].differences[0]
    assert (twinned.mean, twinned.low, twinned.high, twinned.n) == pytest.approx((single.mean, single.low, single.high,
                                                                                  single.n))
    assert both[0].tests == alone[0].tests


def test_a_declared_identity_that_fails_is_loud_and_its_cells_still_count_once(tmp_path):
    def drifting(a, seed):  # per_head rounds otherwise: 1e-3 off in every cell
        return norm_effect(a, seed) + 1e-3 * (a["model.attention"] == "per_head")

    sweep = sweepkit.write_sweep(tmp_path, "drift", {"model.norm": ["post", "pre"], "model.attention": ["per_head", "fused"]},
                                 SEEDS, drifting)
    said = []
    report = compare(sweep.directory(), wandb_mode="disabled", echo=said.append)
    warning = next(line for line in said if "IDENTITY CHECK FAILED" in line)
    assert "attention: per_head = fused are declared to compute softmax attention, but differ in 12 of 12 cells" in warning
    assert "IDENTITY CHECK FAILED" in report.markdown.read_text()
    (_, difference), = report.effects[0].differences
    assert difference.n == 6, "still one unit per cell: the mean of its two values"


def test_an_undeclared_key_whose_runs_are_bit_identical_is_an_identity_check(tmp_path):
    effects, _ = effects_of(tmp_path, "inert", {"model.norm": ["post", "pre"], "train.z_loss": [0.0, 1e-4]}, norm_effect)
    check = effects[1].identity
    assert check is not None and check.function is None and check.holds
    assert "bit-identical runs" in check.text() and effects[0].differences[0][1].n == 6


def test_near_twins_are_flagged_and_kept_apart(tmp_path):
    def nearly(a, seed):  # z-loss moves the metric by a relative 1e-5, in alternating directions
        return norm_effect(a, seed) * (1 + 1e-5 * (-1) ** seed * (a["train.z_loss"] > 0))

    sweep = sweepkit.write_sweep(tmp_path, "near", {"model.norm": ["post", "pre"], "train.z_loss": [0.0, 1e-4]}, SEEDS,
                                 nearly)
    said = []
    report = compare(sweep.directory(), wandb_mode="disabled", echo=said.append)
    assert any(line.startswith("zoo compare: warning: near twins z_loss: 0.0001 and 0.0 differ by at most 1e-05")
               for line in said), said
    norm, z_loss = report.effects
    assert z_loss.identity is None and len(z_loss.differences) == 1
    assert norm.differences[0][1].n == 12, "near twins stay separate cells"


def test_a_failed_identity_or_near_twins_never_say_a_gap_that_contradicts_them():
    """A NaN cell "differed ... largest relative difference 0"; equal metrics "differ by at most 0 ...
    not bit for bit": each now says what does differ."""
    import math

    from zoo.compare.units import IdentityCheck, NearTwins, relative

    assert relative(math.nan, math.nan) == 0 and relative(math.nan, 1.0) == math.inf == relative(1.0, math.inf)
    assert relative(2.0, 1.0) == 0.5 and relative(0.0, 0.0) == 0
    assert max([relative(math.nan, 1.0), relative(1.0, 1.0)]) == math.inf, "NaN never hides a difference from max()"
    nan_cell = IdentityCheck("model.attention", "attention", ("per_head", "fused"), "softmax attention", 3, 4, math.inf)
    assert "relative difference" not in nan_cell.text() and "a run's metric is not finite" in nan_cell.text()
    other_values = IdentityCheck("model.attention", "attention", ("per_head", "fused"), "softmax attention", 3, 4, 0.0)
    assert "the metric itself is the same in every cell; they differ in other logged values" in other_values.text()
    same_metric = NearTwins("z_loss", 1e-4, 0.0, 6, 0.0).text()
    assert "differ by at most 0" not in same_metric and "give the same metric in all 6 pairs but other logged values" \
        in same_metric
    assert "differ by at most 1e-05 (relative)" in NearTwins("z_loss", 1e-4, 0.0, 6, 1e-5).text()
