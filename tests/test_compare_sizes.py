"""Effects across model sizes: each difference at each size, its interaction with size checked
against a hand computation, the verdict, and the by-size plot's Holm marks against the tables."""

import math

import numpy as np
import pytest
import sweepkit
from test_bad_input import cli_error

from zoo.compare import compare
from zoo.compare.agreement import separates
from zoo.compare.comparison import Comparison
from zoo.compare.sections.interactions import by_figure
from zoo.compare.sizes import size_verdict
from zoo.compare.stats import Estimate

SIZES = {"small": {"model.d_model": 16}, "large": {"model.d_model": 32}}
NORM_EFFECT = {"small": 0.05, "large": 0.30}
"""pre − post grows with size: an interaction. gelu − relu is 0.10 at both: it holds."""


def value(a, seed):
    ffn = ["relu", "gelu"].index(a["model.ffn"])
    noise = ((seed * 7 + ffn * 3 + (a["size"] == "large") * 5 + (a["model.norm"] == "pre") * 2) % 4) / 100
    return 0.4 + NORM_EFFECT[a["size"]] * (a["model.norm"] == "pre") + 0.10 * ffn + noise


def sized_sweep(tmp_path):
    return sweepkit.write_sweep(tmp_path, "sized", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]},
                                list(range(6)), lambda a, seed: value(a, seed), sizes=SIZES)


def test_each_effect_at_each_size_and_its_interaction_with_size(tmp_path):
    sweep = sized_sweep(tmp_path)
    assert list(sweep.grid) == ["size", "model.norm", "model.ffn"]
    report = compare(sweep.directory(), wandb_mode="disabled")
    by_label = {e.label: e for e in report.sizes}
    norm, ffn = by_label["norm: pre − post"], by_label["ffn: gelu − relu"]

    def cell(size, norm, ffn, seed):
        return value({"size": size, "model.norm": norm, "model.ffn": ffn}, seed)

    at_large = [cell("large", "pre", f, s) - cell("large", "post", f, s) for f in ("relu", "gelu") for s in range(6)]
    at_small = [cell("small", "pre", f, s) - cell("small", "post", f, s) for f in ("relu", "gelu") for s in range(6)]
    (contrast, _, adjusted), = norm.interactions
    assert contrast.mean == pytest.approx(np.mean(np.subtract(at_large, at_small))) and contrast.n == 12
    assert [d.mean for d, _ in norm.at_size] == pytest.approx([np.mean(at_small), np.mean(at_large)])
    assert separates(contrast, adjusted) and norm.verdict == "depends on size: an interaction separates"
    assert ffn.verdict == "one sign at every size, separated at 2 of 2; no interaction separated (inconclusive)"
    text = report.markdown.read_text()
    assert "## Across sizes" in text and "| norm: pre − post |" in text
    assert "Across size:" in report.effects_text


def test_the_by_size_plot_marks_what_the_tables_separate(tmp_path):
    sweep = sized_sweep(tmp_path)
    report = compare(sweep.directory(), wandb_mode="disabled", by=["norm"])
    names = [p.name for p in report.plots]
    assert "effects_by_norm.png" in names and "effects_by_size.png" in names
    within = [e for e in report.simple if e.given_key == "size"]
    figure = by_figure(Comparison.of(sweep), report.simple, "size")
    for ax, key in zip(figure.axes, ["model.norm", "model.ffn"], strict=True):
        expected = [(d, adjusted) for e in within if e.key == key
                    for (_, d), (_, adjusted) in zip(e.differences, e.tests, strict=True)]
        texts = [t.get_text() for t in ax.texts]
        for (d, adjusted), text in zip(expected, texts, strict=True):
            assert f"Holm p={adjusted:.3g}" in text and text.endswith(" *") == bool(separates(d, adjusted))
        stars = [line for line in ax.lines if line.get_marker() == "*"]
        assert len(stars) == sum(bool(separates(d, a)) for d, a in expected)


def test_by_an_unknown_axis_names_the_choices(tmp_path, capsys):
    sweep = sized_sweep(tmp_path)
    err = cli_error(["compare", str(sweep.directory()), "--by", "nrom", "--wandb-mode", "disabled"], capsys)
    assert "--by nrom: not a grid key of sweep 'sized'; choices: size, norm, ffn" in err


def test_a_size_whose_runs_all_diverged_is_named_as_unmeasured(tmp_path):
    """Every run at the large size diverged: the verdict says nothing is known there, where it read
    "separates at no size" as though both sizes had been measured."""
    statuses = {f"size=large,norm={norm},ffn={ffn},seed={seed}": "diverged"
                for norm in ("post", "pre") for ffn in ("relu", "gelu") for seed in range(6)}
    sweep = sweepkit.write_sweep(tmp_path, "sized", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]},
                                 list(range(6)), value, sizes=SIZES,
                                 statuses=statuses)
    report = compare(sweep.directory(), wandb_mode="disabled")
    by_label = {e.label: e for e in report.sizes}
    assert set(by_label) == {"norm: pre − post", "ffn: gelu − relu"}
    for effect in report.sizes:
        assert effect.at_size[1][0].n == 0, "no finished pair at the large size"
        assert separates(*effect.at_size[0]), "both effects separate at the small size"
        assert effect.verdict == ("unknown across sizes: separates at 1 of the 1 measured, with one sign; not measured "
                                  "at large (fewer than 2 finished pairs)")
    flat = Estimate.of([0.01, -0.01, 0.02])
    assert size_verdict(["small", "large"], [(flat, 1.0), (Estimate.of([]), math.nan)], [(Estimate.of([]), math.nan, math.nan)]) \
        == ("separated at no size measured; no interaction separated (inconclusive); not measured at large (fewer than 2 "
            "finished pairs)")
    assert size_verdict(["small", "large"], [(flat, 1.0), (flat, 1.0)], [(flat, 1.0, 1.0)]) == \
        "separated at no size; no interaction separated (inconclusive)", "the published wording where every size was measured"


def test_a_size_ladder_is_the_design_and_its_tests_are_a_family_of_their_own(tmp_path):
    """With `sizes:`, size's differences and its interactions leave the primary family (Holm over
    the architecture's tests alone), and are adjusted apart; `family:` counts them in again."""
    from zoo.compare.exact import tarone
    from zoo.compare.stats import apart_family, floor_of, holm, p_value, primary_family

    sweep = sized_sweep(tmp_path)
    report = compare(sweep.directory(), wandb_mode="disabled")
    effects = report.analysis["effects"]
    primary, apart = primary_family(effects.effects), apart_family(effects.effects)
    by_key = {e.key: e for e in effects.effects}
    assert not by_key["size"].primary and by_key["model.norm"].primary
    assert len(primary) == 3 and len(apart) == 3, "norm, ffn and norm × ffn; size and its two interactions"
    assert effects.members == 3 and effects.family == sum(tarone([floor_of(e) for e in primary])[0])
    (_, norm), = by_key["model.norm"].differences
    expected = holm([p_value(e) for e in primary], [floor_of(e) for e in primary])
    assert by_key["model.norm"].tests[0][1] == expected[[id(e) for e in primary].index(id(norm))]
    size_holm = holm([p_value(e) for e in apart], [floor_of(e) for e in apart])
    assert by_key["size"].tests[0][1] == size_holm[0]
    text = report.markdown.read_text()
    findings = text.split("## Findings")[1].split("\n## ")[0]
    assert "size: large − small" not in findings and "norm: pre − post" in findings
    assert ("Outside the primary family: 3 of these tests (the sizes' differences and interactions) are a family of "
            "their own") in text
    counted = sweepkit.write_sweep(tmp_path / "counted", "sized", {"model.norm": ["post", "pre"],
                                                                   "model.ffn": ["relu", "gelu"]},
                                   list(range(6)), lambda a, seed: value(a, seed), sizes=SIZES,
                                   family=["size", "model.norm", "model.ffn"])
    again = compare(counted.directory(), wandb_mode="disabled").analysis["effects"]
    assert again.members == 6 and not apart_family(again.effects)


def test_a_family_key_the_grid_lacks_is_refused_with_the_choices():
    from zoo.errors import ConfigError
    from zoo.sweep import SweepSpec

    with pytest.raises(ConfigError, match=r"family: 'model.ffn' is not a grid key; choices: size, model.norm"):
        SweepSpec(name="s", grid={"model.norm": ["post", "pre"]}, sizes=SIZES, seeds=[0], family=["model.ffn"])
    with pytest.raises(ConfigError, match=r"family: it names no grid key; choices: size, model.norm"):
        SweepSpec(name="s", grid={"model.norm": ["post", "pre"]}, sizes=SIZES, seeds=[0], family=[])
