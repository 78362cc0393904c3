"""The finding first: each difference of the primary family with its verdict, the exact test and
pairs behind it, its Holm p and what the design could detect, then the caveats every other
section raised (rates at the grid's edge, choices that flip with the seed, fits without a verdict,
a question changed after cells ran). Computed after the other sections, shown before them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from zoo.compare.agreement import separates
from zoo.compare.power import power_of
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.stats import Estimate, sides
from zoo.compare.tables import effect_verdicts, interval, number, tested


@dataclass
class Finding:
    label: str
    estimate: Estimate
    p: float
    holm_p: float
    verdict: str
    detectable: float
    """The |difference| the test detects at 80% power at these pairs (nan where it was not tested)."""

    def text(self) -> str:
        e, bold = self.estimate, "**" if self.verdict == "separated" else ""
        said = f"{bold}{self.label}: {number(e.mean, 3)} {interval(e)}, {self.verdict}{bold}"
        if math.isnan(self.holm_p):
            return said
        return (f"{said} (exact sign-flip test, p {number(self.p, 2)} over {e.n} pairs, Holm p {number(self.holm_p, 2)}; "
                f"detectable at 80% power: ±{number(self.detectable, 2)})")


@dataclass
class Findings:
    metric: str
    endpoint: str
    family: int
    members: int
    findings: list[Finding]
    caveats: list[str]


@register("findings")
class FindingsSection(Section):
    order, computed_after, stream = 1, 99, "table"

    @classmethod
    def compute(cls, analysis: Analysis) -> Findings | None:
        effects = analysis["effects"]
        if effects is None or not effects.effects:
            return None
        margin, found = analysis.comparison.question.margin, []
        rows = [zip(tested(effect), sides(effect), strict=True) for effect in effects.effects]
        for row, said in zip(rows, effect_verdicts(effects.effects, margin), strict=True):
            for ((axis, what, e, (p, holm_p)), primary), verdict in zip(row, said, strict=True):
                if not primary:
                    continue  # a size ladder's tests: their own family, in the effects section
                if " × " in axis and not separates(e, holm_p):
                    continue  # an interaction is a finding where it separates; the effects section lists the rest
                detectable = math.nan if math.isnan(holm_p) else power_of(e, effects.family, 0.0).detectable
                found.append(Finding(f"{axis}: {what}", e, p, holm_p, verdict, detectable))
        caveats = analysis.warnings()
        return Findings(analysis.comparison.metric, analysis.comparison.question.endpoint, effects.family,
                        effects.members, found, caveats)

    @classmethod
    def markdown(cls, result: Findings, analysis: Analysis) -> list[str]:
        endpoint = result.endpoint or "the primary endpoint"
        lines = ["## Findings", "", f"On `{result.metric}` ({endpoint}): each difference of the primary family (and each "
                 f"interaction that separates), Holm over the {result.family} of its {result.members} tests that can reach "
                 "their share of the level; \"not separated\" is never \"no difference\".", "",
                 *(f"- {finding.text()}" for finding in result.findings), ""]
        if result.caveats:
            lines += ["Caveats:", "", *(f"- {caveat}" for caveat in result.caveats), ""]
        return lines

    @classmethod
    def console(cls, result: Findings, analysis: Analysis) -> str:
        lines = [f"findings on {result.metric}:", *(f"  {f.text().replace('**', '')}" for f in result.findings),
                 *(f"  caveat: {caveat}" for caveat in result.caveats)]
        return "\n".join(lines) + "\n"
