"""Each variant's law across the sweep's sizes, each difference carried past the largest, and
the predictions at sizes held out of the fits."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo.compare.comparison import Comparison
from zoo.compare.plots import pyplot
from zoo.compare.power_law import BOOTSTRAP_SEEDS, Interval, over_seeds
from zoo.compare.scaling import Scaling, scaling
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.tables import markdown_table, text_table
from zoo.compare.wandb_run import Rows
from zoo.files import save_figure
from zoo.sweep.names import value_text


def fit_interval(i: Interval, digits: int = 4) -> str:
    if not i.seeds:
        return "—"
    return f"{i.mean:.{digits}g} [{i.low:.{digits}g}, {i.high:.{digits}g}]" if i.seeds >= 2 else \
        f"{i.mean:.{digits}g} (one seed)"


def irreducible_text(v) -> str:
    """E over seeds; where a seed's E sits on the metric's bound, said so, with no interval (the
    points do not identify it: an interval over seeds would be of the bound)."""
    bounded = v.bounded()
    if not bounded:
        return fit_interval(v.irreducible())
    floor = next(law.irreducible for law in v.laws.values() if law.on_bound)
    return f"{floor:.4g}: on its bound in {bounded} of {len(v.laws)} seed(s), not identified, no interval"


def law_rows(s: Scaling) -> tuple[list[str], list[list[str]]]:
    columns = ["variant", "seeds fitted", "exponent alpha", "irreducible E", "fit RMS (mean)", "not fitted"]
    rows = [[v.label, str(len(v.laws)), fit_interval(v.exponent(), 3), irreducible_text(v),
             f"{np.mean([law.residual for law in v.laws.values()]):.3g}" if v.laws else "—",
             "; ".join(v.problems()) or "—"] for v in s.variants]
    return columns, rows


def difference_rows(s: Scaling) -> tuple[list[str], list[list[str]]]:
    columns = ["difference (paired by seed)", "at largest compute", f"at {s.multiple:g}x", "change away from 0",
               "verdict"]
    rows = [[d.label, f"{fit_interval(d.at_largest)} at {d.largest:.3g}", f"{fit_interval(d.at_target)} at {d.target:.3g}",
             fit_interval(d.change), d.verdict] for d in s.differences]
    return columns, rows


def multiplier_rows(s: Scaling) -> tuple[list[str], list[list[str]]]:
    columns = ["difference", "seeds fitted", "compute multiplier k [95% t-interval, "
               "unadjusted]", "shared exponent alpha", "shared E", "fit RMS (mean)", "verdict", "not fitted"]
    rows = []
    for m in s.multipliers:
        k, low, high = m.interval()
        laws = list(m.laws.values())
        bounded = sum(law.on_bound for law in laws)
        shown = (f"{k:.3g}x [{low:.3g}, {high:.3g}]" if len(laws) >= 2 else f"{k:.3g}x (one seed)" if laws else "—")
        rows.append([m.label, str(len(laws)), shown,
                     fit_interval(over_seeds([law.exponent for law in laws]), 3) if laws else "—",
                     (f"{laws[0].irreducible:.4g}: on its bound in {bounded} of {len(laws)} seed(s), no interval" if bounded
                      else fit_interval(over_seeds([law.irreducible for law in laws]))) if laws else "—",
                     f"{np.mean([law.residual for law in laws]):.3g}" if laws else "—", m.verdict,
                     "; ".join(f"seed {seed}: {why}" for seed, why in m.problems.items()) or "—"])
    return columns, rows


def check_rows(s: Scaling) -> tuple[list[str], list[list[str]]]:
    columns = ["held out of the fits", "size", "predicted", "measured", "measured − predicted (paired)", "verdict"]
    rows = [[c.label, value_text(c.size), fit_interval(c.predicted), fit_interval(c.measured), fit_interval(c.error), c.verdict]
            for c in s.checks]
    return columns, rows


def scaling_lines(s: Scaling, sweep: Comparison) -> list[str]:
    variable = "training FLOPs" if s.against == "compute" else "parameters"
    out = ["## Across scale: fitted laws", "",
           f"Each variant's `{sweep.metric}` fitted per seed as L(C) = E + A C^-alpha, C its {variable}; intervals "
           f"are 95% over seeds: Student's t on the per-seed values below {BOOTSTRAP_SEEDS} seeds (the percentile "
           "bootstrap undercovers there: with 3 seeds it is their range, 75% coverage), the percentile bootstrap "
           "from there; under 2 seeds, none, and no verdict. "
           "Each difference is paired by seed and carried from the largest compute measured to "
           f"{s.multiple:g} times it; the verdict: reverses where the extrapolated difference is separated on the "
           "other side of zero, grows or shrinks where its change is separated from zero, holds where two one-sided "
           "t-tests on the change exclude the margin the sweep declares (level), else not separated (inconclusive).", "",
           *(f"- Note: {note}" for note in s.notes), *([""] if s.notes else []),
           *(["### The ladder", "", *markdown_table(s.ladder_columns, s.ladder), ""] if s.ladder else [])]
    if s.variants and any(v.fits for v in s.variants):
        out += ["### Laws", "", *markdown_table(*law_rows(s)), ""]
    if s.differences:
        out += ["### Differences carried past the largest size", "", *markdown_table(*difference_rows(s)), ""]
    if s.multipliers:
        out += ["### One law for both: the compute multiplier", "",
                "Each difference's two variants fitted together per seed, with one irreducible term E and one exponent "
                "alpha, so that they differ in their coefficient alone (L = E + a C^-alpha and E + b C^-alpha): the "
                "second variant at compute C reaches what the first reaches at k C, k = (a / b)^(1/alpha), at every "
                "compute; k above 1x where the second is the better. k is the geometric mean over seeds, its interval "
                "Student's t on log k, its test the one-sample t-test of log k = 0, unadjusted for any family.", "",
                *markdown_table(*multiplier_rows(s)), ""]
    if s.checks:
        out += ["### The fits checked at sizes they left out", "",
                "Each variant's law (and each difference of laws) predicts the held-out size at its runs' compute; "
                "the error is paired by seed, and agrees where its interval holds zero.", "",
                *markdown_table(*check_rows(s)), ""]
    return out


def scaling_text(s: Scaling) -> str:
    parts = [*(f"Note: {note}" for note in s.notes), *(["Ladder:\n" + text_table(s.ladder_columns, s.ladder)]
                                                      if s.ladder else [])]
    if any(v.fits for v in s.variants):
        parts.append("Laws:\n" + text_table(*law_rows(s)))
    if s.differences:
        parts.append(f"Differences at {s.multiple:g}x the largest compute:\n" + text_table(*difference_rows(s)))
    if s.multipliers:
        parts.append("One law for both (compute multiplier):\n" + text_table(*multiplier_rows(s)))
    if s.checks:
        parts.append("Checked at sizes left out of the fits:\n" + text_table(*check_rows(s)))
    return "\n\n".join(parts)


def scaling_tables(s: Scaling) -> dict[str, Rows]:
    tables: dict[str, Rows] = {"ladder": (s.ladder_columns, s.ladder)}
    tables["scaling_laws"] = (["variant", "seed", "exponent", "irreducible", "coefficient", "unit", "rms", "problem"],
                              [[v.label, seed, *((f.law.exponent, f.law.irreducible, f.law.coefficient, f.law.unit,
                                                  f.law.residual) if f.law else (None,) * 5), f.problem]
                               for v in s.variants for seed, f in v.fits.items()])
    tables["scaling_differences"] = (
        ["difference", "largest", "target", "at_largest", "at_largest_low", "at_largest_high", "at_target",
         "at_target_low", "at_target_high", "change", "change_low", "change_high", "crossing", "verdict"],
        [[d.label, d.largest, d.target, d.at_largest.mean, d.at_largest.low, d.at_largest.high, d.at_target.mean,
          d.at_target.low, d.at_target.high, d.change.mean, d.change.low, d.change.high, d.crossing, d.verdict]
         for d in s.differences])
    if s.multipliers:
        tables["scaling_multipliers"] = (
            ["difference", "seed", "multiplier", "exponent", "irreducible", "coefficient_first", "coefficient_second",
             "rms", "problem"],
            [[m.label, seed, *((law.multiplier, law.exponent, law.irreducible, *law.coefficients, law.residual)
                              if (law := m.laws.get(seed)) else (None,) * 6), m.problems.get(seed)]
             for m in s.multipliers for seed in sorted({*m.laws, *m.problems})])
    if s.checks:
        tables["scaling_checks"] = (["checked", "size", "predicted", "predicted_low", "predicted_high", "measured",
                                     "error", "error_low", "error_high", "verdict"],
                                    [[c.label, value_text(c.size), c.predicted.mean, c.predicted.low, c.predicted.high,
                                      c.measured.mean, c.error.mean, c.error.low, c.error.high, c.verdict]
                                     for c in s.checks])
    return tables


def law_label(variant) -> str:
    """What the laws table accepts of a variant's law, said in its legend entry."""
    if not variant.laws:
        return f"{variant.label}: no law ({(variant.problems() or ['no run fitted'])[0]})"
    said = f"{variant.label}: alpha {fit_interval(variant.exponent(), 3)}"
    if variant.bounded():
        said += ", E on its bound"
    return said


def scaling_png(s: Scaling, sweep: Comparison, path: str | Path) -> Path | None:
    """Every run's point, and each variant's mean of its per-seed laws where the laws table gives it
    one: solid across the sizes fitted, dashed past them to the extrapolation (and through a size
    held out). A variant without a law has its points alone, its legend saying why."""
    if not s.variants:
        return None
    plt = pyplot()
    fig, axis = plt.subplots(figsize=(7, 6))
    xs = [x for v in s.variants for _, x, _ in [*v.points, *(p for ps in v.held_out.values() for p in ps)]]
    largest = max((x for v in s.variants for _, x, _ in v.points), default=max(xs))  # the largest fitted
    measured, past = np.geomspace(min(xs), largest, 120), np.geomspace(largest, s.multiple * largest, 80)
    for index, variant in enumerate(s.variants):
        colour = f"C{index % 10}"
        axis.scatter([x for _, x, _ in variant.points], [y for _, _, y in variant.points], s=12, alpha=0.5,
                     color=colour, label=None if variant.laws else law_label(variant))
        held = [point for points in variant.held_out.values() for point in points]
        if held:
            axis.scatter([x for _, x, _ in held], [y for _, _, y in held], s=24, facecolors="none", edgecolors=colour,
                         label=f"{variant.label}: held out of the fit")
        if variant.laws:
            laws = list(variant.laws.values())
            axis.plot(measured, np.mean([law(measured) for law in laws], axis=0), color=colour, label=law_label(variant))
            axis.plot(past, np.mean([law(past) for law in laws], axis=0), color=colour, linestyle="--")
    axis.axvline(largest, color="grey", linestyle=":", label="largest fitted (dashed past it: extrapolated)")
    axis.set(xscale="log", xlabel="training FLOPs" if s.against == "compute" else "parameters", ylabel=sweep.metric,
             title=f"{sweep.name}: fitted laws, extrapolated to {s.multiple:g}x")
    axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    fig.tight_layout()
    return save_figure(fig, path)


@register("scaling")
class ScalingSection(Section):
    order = 80

    @classmethod
    def compute(cls, analysis: Analysis) -> Scaling | None:
        return scaling(analysis.comparison, analysis.records)

    @classmethod
    def markdown(cls, result: Scaling, analysis: Analysis) -> list[str]:
        return scaling_lines(result, analysis.comparison)

    @classmethod
    def console(cls, result: Scaling, analysis: Analysis) -> str:
        return f"\n\nAcross scale:\n{scaling_text(result)}"

    @classmethod
    def tables(cls, result: Scaling, analysis: Analysis) -> dict[str, Rows]:
        return scaling_tables(result)

    @classmethod
    def plots(cls, result: Scaling, analysis: Analysis) -> list[Path]:
        drawn = scaling_png(result, analysis.comparison, analysis.folder / f"scaling{analysis.suffix}.png")
        return [drawn] if drawn else []
