"""Many axes and values make some intervals exclude zero by chance: `zoo compare` reports each
paired difference's p-value beside its Holm-adjusted one, and the seed-to-seed noise floor."""

import math

import pytest
import sweepkit
from scipy import stats

from zoo.compare.load import read_sweep
from zoo.compare.stats import Estimate, axis_effects, holm, p_value, seed_noise


def test_holm_adjusts_a_known_family():
    """m = 4: sorted 0.005, 0.01, 0.03, 0.04 become 4 x 0.005, 3 x 0.01, 2 x 0.03, and 1 x 0.04
    raised to the 0.06 before it (the adjustment never falls with rank)."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.2, math.nan, 0.9]) == pytest.approx([0.4, math.nan, 0.9], nan_ok=True), "nan is not counted"
    assert holm([0.5, 0.6]) == [1.0, 1.0], "capped at 1"
    assert holm([]) == []


def test_the_p_value_is_the_exact_sign_flip_test():
    """Of the 32 sign assignments of these five differences (sum 1.05), the observed one and the one
    that flips -0.1 (sum 1.25) reach |sum| >= 1.05, and so do their two mirrors: p = 4 / 32."""
    differences = [0.3, -0.1, 0.4, 0.2, 0.25]
    assert p_value(Estimate.of(differences)) == 4 / 32
    assert math.isnan(p_value(Estimate.of([0.2]))), "one pair tests nothing"
    assert p_value(Estimate.of([0.0, 0.0, 0.0])) == 1.0
    assert p_value(Estimate.of([0.2, 0.2, 0.2])) == 2 / 8, "three pairs that agree exactly: 0.25, never 0"


def test_compare_adjusts_over_every_difference_of_the_sweep_and_measures_the_seed_noise(tmp_path):
    """Three axes; seeds move the metric by (seed - 1.5) / 10 in every variant, so the pooled
    seed-to-seed standard deviation is that of (-0.15, -0.05, 0.05, 0.15). Position changes nothing,
    so its runs are bit-identical: an identity check, each pair of its cells one unit. The family is
    the 1 + 2 paired differences of the other axes and their 2 interactions; the interactions' 4
    pairs cannot reach a share of the level (smallest p 0.125), so they leave it before Holm and the
    3 differences share it; the noise has 6 units x 3 degrees of freedom."""
    def value(a, seed):  # an exact match, so within [0, 1]: 0.25 to 0.87
        return (0.4 + 0.3 * (a["model.norm"] == "pre") + 0.01 * ["relu", "gelu", "swish"].index(a["model.ffn"])
                + 0.0 * (a["model.position"] == "learned") + (seed - 1.5) / 10)

    sweep = sweepkit.write_sweep(tmp_path, "holm", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu", "swish"],
                                                     "model.position": ["sinusoidal", "learned"]}, [0, 1, 2, 3], value)
    read = read_sweep(sweep.directory())
    effects = axis_effects(read.comparison, read.records)
    raw = [p for e in effects for p, _ in e.tests] + [i.test[0] for e in effects for i in e.interactions]
    adjusted = [a for e in effects for _, a in e.tests] + [i.test[1] for e in effects for i in e.interactions]
    assert len(raw) == 3 + 2, "norm, ffn's two, and norm x ffn at gelu and at swish"
    assert adjusted[:3] == pytest.approx(holm(raw[:3])), "one family: the differences that can reach the level"
    assert all(math.isnan(a) for a in adjusted[3:]) and not any(math.isnan(p) for p in raw[3:]), "tested, not adjusted"
    assert effects[2].identity is not None and effects[2].identity.identical == 24 and not effects[2].interactions
    pairs = [d.n for e in effects[:2] for _, d in e.differences]
    assert pairs == [3 * 4, 2 * 4, 2 * 4], "each distinct computation once: 3 ffn (or 2 norms) x 4 seeds, not x 2 positions"
    std, df = seed_noise(read.comparison, read.records)
    assert df == 6 * 3 and std == pytest.approx(stats.tstd([-0.15, -0.05, 0.05, 0.15]))


def test_one_decision_rule_a_difference_separates_by_its_holm_p_alone():
    """An interval clear of zero whose Holm p is 0.095 (the issue's example) does not separate:
    bold, `separates` and the transfer verdicts read Holm p < 0.05, nothing else."""
    from zoo.compare.agreement import separates, transfer_verdict

    clear = Estimate(0.0145, 0.01, 16, 0.00261, 0.0263)
    assert separates(clear, 0.095) == 0 and separates(clear, 0.049) == 1
    assert separates(Estimate(-0.2, 0.01, 4, -0.3, -0.1), 0.01) == -1
    assert separates(Estimate(0.0, 0.0, 4, 0.0, 0.0), 0.0) == 0, "a certain zero separates nothing"
    assert separates(clear, math.nan) == 0, "one pair: no test, no separation"
    assert transfer_verdict(clear, clear, 0.01, 0.01) == "transfers"
    assert transfer_verdict(clear, clear, 0.01, 0.095) == "separates on A only (B not separated, inconclusive)"
    assert transfer_verdict(clear, Estimate(-0.1, 0.01, 4, -0.2, -0.05), 0.01, 0.02) == "reverses"
    assert transfer_verdict(clear, clear, 0.2, 0.095) == "not separated on either (inconclusive)"


def test_a_constant_difference_below_float32s_resolution_is_no_difference(tmp_path):
    """Two values of an axis whose runs differ by 1e-9 in every seed (rounding, not a change) get
    the difference 0 and p 1, not a certain difference of p 0 that the noise line contradicts;
    a constant difference float32 resolves stays certain."""
    def value(a, seed):
        return 0.5 + seed / 10 + {"relu": 0.0, "gelu": 1e-9, "swish": 0.01}[a["model.ffn"]]

    sweep = sweepkit.write_sweep(tmp_path, "tiny-gap", {"model.ffn": ["relu", "gelu", "swish"]}, [0, 1, 2], value)
    read = read_sweep(sweep.directory())
    (effect,) = axis_effects(read.comparison, read.records)
    (_, gelu), (_, swish) = effect.differences
    assert gelu.mean == 0.0 and effect.tests[0][0] == 1.0
    assert math.isnan(effect.tests[0][1]), "three pairs (smallest p 0.25) leave the family: no Holm p"
    assert swish.mean == pytest.approx(0.01) and effect.tests[1][0] == 2 / 2**3, "the smallest p of three pairs"


def test_each_effect_plot_writes_the_holm_p_of_the_tables_and_stars_what_separates(tmp_path):
    """The plot's marks are the tables' rule: pre separates from post (a 0.3 shift), gelu and swish
    from relu do not (0.01 and 0.02 under seed noise 0.13); each difference carries its Holm p."""
    from zoo.compare.agreement import separates
    from zoo.compare.sections.effects import effect_figure

    def value(a, seed):
        return 0.3 * (a["model.norm"] == "pre") + 0.01 * ["relu", "gelu", "swish"].index(a["model.ffn"]) + (
            (seed * 7919 + ["relu", "gelu", "swish"].index(a["model.ffn"]) * 13) % 5) / 10

    sweep = sweepkit.write_sweep(tmp_path, "marks", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu", "swish"]},
                                 [0, 1, 2, 3], value)
    read = read_sweep(sweep.directory())
    starred = {}
    for effect in axis_effects(read.comparison, read.records):
        figure = effect_figure(read.comparison, effect)
        right = figure.axes[1]
        texts = [t.get_text() for t in right.texts]
        tested = texts[:len(effect.differences)]
        for (_, estimate), (_, adjusted), text in zip(effect.differences, effect.tests, tested, strict=True):
            assert f"Holm p={adjusted:.3g}" in text and text.endswith(" *") == bool(separates(estimate, adjusted))
        assert all("Holm" not in text for text in texts[len(effect.differences):]), "the other pairs carry no test"
        stars = [line for line in right.lines if line.get_marker() == "*"]
        starred[effect.key] = len(stars)
        assert right.get_ylabel() == f"difference in {read.comparison.metric}"
        figure.canvas.draw()
        for ax in figure.axes:  # every title inside the figure, none cut at its edge
            box, page = ax.title.get_window_extent(), figure.bbox
            assert page.x0 <= box.x0 and box.x1 <= page.x1, ax.get_title()
    assert starred == {"model.norm": 1, "model.ffn": 0}
    ffn = next(e for e in axis_effects(read.comparison, read.records) if e.key == "model.ffn")
    (a, b, swish_gelu), = ffn.other_pairs
    assert (a, b) == ("gelu", "swish"), "a three-valued axis shows its third pair too"
    pairs = [value({"model.norm": n, "model.ffn": "swish"}, s) - value({"model.norm": n, "model.ffn": "gelu"}, s)
             for n in ("post", "pre") for s in range(4)]
    assert swish_gelu.mean == pytest.approx(sum(pairs) / len(pairs)) and swish_gelu.n == 8
    labels = [t.get_text() for t in effect_figure(read.comparison, ffn).axes[1].get_xticklabels()]
    assert labels == ["gelu − relu", "swish − relu", "swish − gelu\n(not tested)"]
