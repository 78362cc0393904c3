"""Each axis's effect: every value's mean over the other grid values and seeds, every paired
difference from the first value and every two-way interaction, with exact sign-flip p-values,
Holm over the primary family, and a verdict (separated, level within a declared margin, or not
separated); the seed-to-seed noise beside them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zoo.compare.exact import unreachable
from zoo.compare.plots import effect_png
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.stats import AxisEffect, axis_effects, primary_family, seed_noise
from zoo.compare.tables import HOLM, effect_lines, effect_table, effects_text, noise_line
from zoo.compare.wandb_run import Rows
from zoo.sweep.names import value_text


@dataclass
class Effects:
    effects: list[AxisEffect]
    noise: tuple[float, int]
    """The metric's seed-to-seed standard deviation within a variant, pooled, and its degrees of freedom."""
    family: int
    """How many tests the primary family holds (Holm's m)."""
    short: str | None
    """Why no test of the family can separate at this many pairs, where none can."""


@register("effects")
class EffectsSection(Section):
    order = 30

    @classmethod
    def compute(cls, analysis: Analysis) -> Effects:
        sweep, records = analysis.comparison, analysis.records
        effects = axis_effects(sweep, records)
        tests = primary_family(effects)
        return Effects(effects, seed_noise(sweep, records), len(tests), unreachable([e.n for e in tests], len(tests)))

    @classmethod
    def warnings(cls, result: Effects, analysis: Analysis) -> list[str]:
        return [result.short] if result.short else []

    @classmethod
    def markdown(cls, result: Effects, analysis: Analysis) -> list[str]:
        return ["## Effect of each axis", "", "Each value's mean over every other grid value and seed; differences are "
                "paired over runs that share every other grid value and the seed.", "", HOLM.format(m=result.family),
                "", noise_line(result.noise), "", *effect_lines(result.effects, analysis.comparison.question.margin)]

    @classmethod
    def console(cls, result: Effects, analysis: Analysis) -> str:
        return effects_text(result.effects, result.noise, analysis.comparison.question.margin)

    @classmethod
    def tables(cls, result: Effects, analysis: Analysis) -> dict[str, Rows]:
        noise = (["metric", "seed_std", "df"], [[analysis.comparison.metric, result.noise[0], result.noise[1]]])
        return {"effects": effect_table(result.effects), "noise": noise}

    @classmethod
    def plots(cls, result: Effects, analysis: Analysis) -> list[Path]:
        sweep, folder, suffix = analysis.comparison, analysis.folder, analysis.suffix
        return [effect_png(sweep, e, folder / f"effect_{value_text(e.label)}{suffix}.png", sweep.question.endpoint)
                for e in result.effects]
