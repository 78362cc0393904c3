"""The experimental units: parts that compute the same function (declared so, or found so by
their identical runs) are one unit, checked for identity, never counted as replicates; near
twins are said."""

from __future__ import annotations

from zoo.compare.sections import Analysis, Section, register
from zoo.compare.stats import units_of
from zoo.compare.units import Units


@register("identity")
class IdentitySection(Section):
    order = 25

    @classmethod
    def compute(cls, analysis: Analysis) -> Units:
        return units_of(analysis.comparison, analysis.records)

    @classmethod
    def notes(cls, result: Units, analysis: Analysis) -> list[str]:
        return result.notes()

    @classmethod
    def warnings(cls, result: Units, analysis: Analysis) -> list[str]:
        return result.warnings()
