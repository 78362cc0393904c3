"""Each distinct computation counts once: twins (values the registry declares one function, or
whose runs are bit-identical) are an identity check and one unit in every other axis's test, a
failed check is loud, near twins are flagged, and correlated twins are one unit in the other axes'
tests unless the sweep declares them distinct."""

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


def nearly(a, seed):  # z-loss moves the metric by a relative 1e-5, in alternating directions
    return norm_effect(a, seed) * (1 + 1e-5 * (-1) ** seed * (a["train.z_loss"] > 0))


@pytest.mark.parametrize("distinct", [[], ["train.z_loss"]])
def test_near_twins_are_flagged_and_correlated_twins_count_once_unless_declared_distinct(tmp_path, distinct):
    """z-loss 1e-4 copies z-loss 0 up to 1e-5: norm's pre − post at the two correlate 1.00 over the
    6 seeds. Counted once, norm has the 6 seeds' pairs, each the mean of its two twins; declared
    distinct, 12, and either way the report says so. z-loss's own difference is tested over 12."""
    sweep = sweepkit.write_sweep(tmp_path, "near", {"model.norm": ["post", "pre"], "train.z_loss": [0.0, 1e-4]}, SEEDS,
                                 nearly, distinct=distinct)
    said = []
    report = compare(sweep.directory(), wandb_mode="disabled", echo=said.append)
    assert any(line.startswith("zoo compare: warning: near twins z_loss: 0.0001 and 0.0 differ by at most 1e-05")
               for line in said), said
    twins = [line for line in said if "correlated twins z_loss: 0.0001 and 0.0" in line]
    assert len(twins) == 1 and "(Pearson r above 0.9: norm 1.00 over 5 degrees of freedom)" in twins[0], said
    norm, z_loss = report.effects
    assert z_loss.identity is None and z_loss.differences[0][1].n == 12, "a twin's own difference is still tested"
    pre_minus_post = norm.differences[0][1]
    if distinct:
        assert "kept as separate units, as the sweep declares" in twins[0] and pre_minus_post.n == 12
    else:
        assert "one unit (their mean) in every other axis's test" in twins[0] and pre_minus_post.n == 6
        by_hand = [nearly({"model.norm": "pre", "train.z_loss": z}, s) - nearly({"model.norm": "post", "train.z_loss": z}, s)
                   for s in SEEDS for z in (0.0, 1e-4)]
        assert pre_minus_post.mean == pytest.approx(sum(by_hand) / 12), "each unit the mean of its twins"


def test_axes_whose_differences_do_not_correlate_stay_apart_and_few_cells_decide_nothing(tmp_path):
    """norm and ffn with effects of their own and noise of each run's own: neither is a twin of the
    other. Where ffn's differences at post and pre are one number per seed (the seed's noise alone),
    and norm's values lie nearer each other than ffn's, norm's two values are one unit in ffn's
    test (its 12 pairs hold 6 values), while ffn, far apart, stays two units in norm's. Under
    TWIN_DEGREES degrees of freedom (seeds less one) no correlation is read at all."""
    from zoo.compare.units import TWIN_DEGREES

    def crossed(a, seed):
        run = [0.03, -0.05, 0.02, 0.04, -0.01, -0.03, 0.05, 0.0][(seed * 3 + 2 * (a["model.norm"] == "pre")
                                                                  + (a["model.ffn"] == "gelu")) % 8]
        return norm_effect(a, seed) + 0.05 * (a["model.ffn"] == "gelu") + run

    effects, read = effects_of(tmp_path, "apart", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]}, crossed)
    assert [e.differences[0][1].n for e in effects] == [12, 12]

    def shared(a, seed):  # the seed's noise moves norm's difference alike at both ffn values
        return norm_effect(a, seed) + 0.3 * (a["model.ffn"] == "gelu") * (1 + NOISE[seed])

    effects, read = effects_of(tmp_path / "seed_noise", "seed-noise", {"model.norm": ["post", "pre"],
                                                               "model.ffn": ["relu", "gelu"]}, shared)
    assert [e.differences[0][1].n for e in effects] == [12, 6], "norm twins for ffn's test, never the reverse"
    few = SEEDS[:TWIN_DEGREES]
    sweep = sweepkit.write_sweep(tmp_path / "few", "few", {"model.norm": ["post", "pre"], "train.z_loss": [0.0, 1e-4]},
                                 few, nearly)
    read = read_sweep(sweep.directory())
    assert [e.differences[0][1].n for e in axis_effects(read.comparison, read.records)] == [2 * len(few)] * 2


def test_a_distinct_key_the_grid_lacks_is_refused_by_name(tmp_path):
    from zoo.errors import ConfigError

    with pytest.raises(ConfigError, match=r"distinct: 'train\.z_loss' is not a grid key; choices: model\.norm"):
        sweepkit.write_sweep(tmp_path, "bad", {"model.norm": ["post", "pre"]}, SEEDS, norm_effect,
                             distinct=["train.z_loss"])


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
