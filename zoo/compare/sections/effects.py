"""Each axis's effect: every value's mean over the other grid values and seeds, every paired
difference from the first value and every two-way interaction, with exact sign-flip p-values,
Holm over the primary family, and a verdict (separated, level within a declared margin, or not
separated); the seed-to-seed noise beside them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from zoo.compare.comparison import Comparison
from zoo.compare.exact import drawn_note, smallest_p, tarone, unreachable
from zoo.compare.plots import marked, plot_differences, plot_estimates, pyplot
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.stats import AxisEffect, apart_family, axis_effects, floor_of, left_the_family, primary_family, seed_noise, sides
from zoo.compare.tables import HOLM, effect_lines, effect_table, effects_text, noise_line, tested
from zoo.compare.wandb_run import Rows
from zoo.files import save_figure
from zoo.sweep.names import value_text


def effect_figure(sweep: Comparison, effect: AxisEffect):
    """Left: each value's mean with its 95% interval; right: each paired difference from the first
    value, with a line at zero, its Holm-adjusted p written beside it and, where that p separates it
    (zoo.compare.agreement.separates, the tables' rule), drawn filled red with a star; a declared
    equivalence margin shaded around zero. Points, not bars, so small differences near 1.0 stay visible."""
    from zoo.compare.agreement import LEVEL

    plt = pyplot()
    columns = len(effect.values) + len(effect.other_pairs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(3.6 + 1.4 * columns, 4.0),
                                      gridspec_kw={"width_ratios": [len(effect.values), max(1, columns - 1)]})
    plot_estimates(left, [value_text(v) for v in effect.values], effect.estimates)
    left.set_ylabel(sweep.metric)
    left.set_title(f"{effect.label}\nmean, 95% CI", fontsize=10)
    if effect.identity is not None:  # one computation: its check, never a difference with a p
        import textwrap

        right.axis("off")
        right.text(0.0, 0.5, textwrap.fill(effect.identity.text(), 40), fontsize=8, va="center",
                   color="#333333" if effect.identity.holds else "#c44e52")
        right.set_title("identity check, not an effect", fontsize=10)
        fig.tight_layout()
        return fig
    first = value_text(effect.values[0])
    differences = [e for _, e in effect.differences]
    tests = effect.tests or [(math.nan, math.nan)] * len(differences)
    tested = [f"{value_text(v)} − {first}" for v, _ in effect.differences]
    plot_differences(right, tested, differences, [holm for _, holm in tests], sweep.metric)
    margin = sweep.question.margin
    if margin:  # the declared equivalence margin: what "level" is judged against
        right.axhspan(-margin, margin, color="#4c72b0", alpha=0.12, zorder=0, label=f"margin ±{margin:g}")
        right.legend(fontsize=7, loc="best")
    if effect.other_pairs:  # a third value's difference from the second too: shown, never tested
        shown = [f"{value_text(b)} − {value_text(a)}\n(not tested)" for a, b, _ in effect.other_pairs]
        plot_estimates(right, shown, [e for _, _, e in effect.other_pairs], colour="#999999", start=len(tested))
        right.set_xticks(range(len(tested) + len(shown)), tested + shown, fontsize=8)
        right.set_xlim(-0.6, len(tested) + len(shown) - 0.4)
    right.set_title(f"paired difference,\nunadjusted 95% CI\n* Holm p < {LEVEL}", fontsize=10)
    fig.tight_layout()
    return fig


def effect_png(sweep: Comparison, effect: AxisEffect, path: Path, note: str = "") -> Path:
    return save_figure(marked(effect_figure(sweep, effect), note), path, dpi=110)


@dataclass
class Effects:
    effects: list[AxisEffect]
    noise: tuple[float, int]
    """The metric's seed-to-seed standard deviation within a variant, pooled, and its degrees of freedom."""
    family: int
    """How many tests the primary family holds (Holm's m): those that can reach their share of the level."""
    short: str | None
    """Why no test of the family can separate at this many pairs, where none can."""
    drawn: str | None = None
    """Which p-values are Monte Carlo (over zoo.compare.exact.EXACT_UP_TO pairs), where any is."""
    left: str | None = None
    """Which tests left the family before Holm, and why (Tarone), where any did."""
    members: int = 0
    apart: int = 0
    """How many tests the family apart from the primary one holds (a size ladder's), where there is one."""
    """Every difference and two-way interaction of the metric, those that left the family included."""


def left_note(effects: list[AxisEffect], share: int) -> str | None:
    """The tests whose exact p cannot reach their share of the level (their Holm p is nan while
    their p is not), grouped by their pairs: said where they are, so a dash is never a mystery."""
    by_pairs: dict[int, list[str]] = {}
    for effect in effects:  # the primary family's: a size ladder's own family says its own in its table
        for (axis, what, e, (p, holm_p)), primary in zip(tested(effect), sides(effect), strict=True):
            if primary and left_the_family(p, holm_p):
                by_pairs.setdefault(e.n, []).append(f"{axis}: {what}")
    if not by_pairs:
        return None
    groups = "; ".join(f"{', '.join(names)} ({n} pairs: smallest p {smallest_p(n):.3g})"
                       for n, names in sorted(by_pairs.items()))
    return (f"Left the family before Holm (Tarone 1990), since their exact test cannot reach their share of the "
            f"level, 0.05 / {share} = {0.05 / share:.3g}, whatever the data: {groups}. Their Holm p is —; "
            "they are not separated (inconclusive), and more pairs would test them.")


@register("effects")
class EffectsSection(Section):
    order = 30

    @classmethod
    def compute(cls, analysis: Analysis) -> Effects:
        sweep, records = analysis.comparison, analysis.records
        effects = axis_effects(sweep, records)
        tests, apart = primary_family(effects), apart_family(effects)
        pairs = [e.n for e in tests]
        kept, share = tarone([floor_of(e) for e in tests])
        short = unreachable(pairs, share) if not any(kept) else None
        return Effects(effects, seed_noise(sweep, records), sum(kept), short, drawn_note(pairs + [e.n for e in apart]),
                       left_note(effects, share), len(tests), sum(tarone([floor_of(e) for e in apart])[0]))

    @classmethod
    def warnings(cls, result: Effects, analysis: Analysis) -> list[str]:
        return [result.short] if result.short else []

    @classmethod
    def markdown(cls, result: Effects, analysis: Analysis) -> list[str]:
        said = [part for line in (result.left, result.drawn) if line for part in (line, "")]
        holm = HOLM.format(m=result.family, members=result.members)
        return ["## Effect of each axis", "", "Each value's mean over every other grid value and seed; differences are "
                "paired over runs that share every other grid value and the seed.", "", holm,
                "", *said, noise_line(result.noise), "", *effect_lines(result.effects, analysis.comparison.question.margin)]

    @classmethod
    def console(cls, result: Effects, analysis: Analysis) -> str:
        said = "".join(f"\n{line}" for line in (result.left, result.drawn) if line)
        return effects_text(result.effects, result.noise, analysis.comparison.question.margin) + said

    @classmethod
    def scalars(cls, result: Effects, analysis: Analysis) -> dict[str, float]:
        """Each paired difference's mean and Holm p, as `effect/KEY=VALUE-vs-REFERENCE/difference`
        and `.../holm_p` (nan, where a test left the family, as no number)."""
        out = {}
        for effect in result.effects:
            for (value, estimate), (_, holm_p) in zip(effect.differences, effect.tests, strict=True):
                name = f"effect/{effect.label}={value_text(value)}-vs-{value_text(effect.values[0])}"
                out[f"{name}/difference"], out[f"{name}/holm_p"] = estimate.mean, holm_p
        return out

    @classmethod
    def tables(cls, result: Effects, analysis: Analysis) -> dict[str, Rows]:
        noise = (["metric", "seed_std", "df"], [[analysis.comparison.metric, result.noise[0], result.noise[1]]])
        return {"effects": effect_table(result.effects, analysis.comparison.question.margin), "noise": noise}

    @classmethod
    def plots(cls, result: Effects, analysis: Analysis) -> list[Path]:
        sweep, folder, suffix = analysis.comparison, analysis.folder, analysis.suffix
        return [effect_png(sweep, e, folder / f"effect_{value_text(e.label)}{suffix}.png", sweep.question.endpoint)
                for e in result.effects]
