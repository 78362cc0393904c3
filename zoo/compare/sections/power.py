"""Each paired difference's power: the size it detects at 80% and the seeds its planned size
(the declared margin, else the observed difference) needs."""

from __future__ import annotations

from zoo.compare.comparison import Comparison
from zoo.compare.power import SAMPLES, power_of, power_text
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.stats import AxisEffect, left_the_family
from zoo.sweep.names import value_text


def power_lines(sweep: Comparison, effects: list[AxisEffect], family: int, apart: int = 0) -> list[str]:
    """Each paired difference's detectable size at 80% power and the seeds its planned size needs:
    the declared margin where there is one, else the observed difference; `family`, the tests that
    Holm adjusts over (those that can reach their share of the level), `apart` those of the family
    apart from the primary one (a size ladder's)."""
    margin = sweep.margins.get(sweep.metric)
    lines = []
    for effect in effects:
        for (value, e), (p, holm_p) in zip(effect.differences, effect.tests, strict=True):
            label = f"{effect.label}: {value_text(value)} − {value_text(effect.values[0])}"
            if left_the_family(p, holm_p):
                lines.append(f"{label}: left the family ({e.n} pairs cannot reach their share of the level)")
                continue
            wanted = margin if margin else e.mean
            lines.append(power_text(label, e, power_of(e, family if effect.primary else apart, wanted),
                                    e.n / max(len(sweep.seeds), 1)))
    return lines


@register("power")
class PowerSection(Section):
    order = 50

    @classmethod
    def compute(cls, analysis: Analysis) -> list[str]:
        effects = analysis["effects"]
        return power_lines(analysis.comparison, effects.effects, effects.family, effects.apart)

    @classmethod
    def markdown(cls, result: list[str], analysis: Analysis) -> list[str]:
        return ["## Power", "", "From each difference's observed spread over its pairs, for the exact sign-flip test at "
                f"the Bonferroni level of the family (simulated over {SAMPLES:,} samples of normal differences with "
                "that spread):", "",
                *(f"- {line}" for line in result), ""]

    @classmethod
    def console(cls, result: list[str], analysis: Analysis) -> str:
        return "".join(f"\n{line}" for line in result)
