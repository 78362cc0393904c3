"""What a difference that does not separate may be called. "Level" needs two one-sided tests
against a margin the sweep declares for the metric (`margins:`), Holm-adjusted over the same family
as the differences; anything else is "not separated (inconclusive)", with the smallest margin the
pairs could have excluded, so that silence is never read as equality."""

from __future__ import annotations

import math
from collections.abc import Sequence

from zoo.compare.agreement import LEVEL, separates
from zoo.compare.exact import equivalence_p, smallest_margin
from zoo.compare.stats import Estimate, floor_of, holm


def tost_holm(differences: Sequence[tuple[Estimate, float]], margin: float | None) -> list[float]:
    """Each difference's two one-sided tests against the margin, Holm-adjusted over the family of
    them that can reach its share of the level (nan without a margin or pairs)."""
    tost = [equivalence_p(e.values, margin) if margin and e.n >= 2 else math.nan for e, _ in differences]
    return holm(tost, [floor_of(e, sided=1) for e, _ in differences])


def verdicts(differences: Sequence[tuple[Estimate, float]], margin: float | None) -> list[str]:
    """Each (difference, its Holm p)'s verdict, in order: separated, level within the margin, or
    not separated (inconclusive) with what margin its pairs could have excluded."""
    said = []
    for (e, holm_p), tost_holm_p in zip(differences, tost_holm(differences, margin), strict=True):
        if separates(e, holm_p):
            said.append("separated")
        elif math.isnan(holm_p) and e.n >= 2 and math.isfinite(e.mean):
            said.append(f"not separated (inconclusive: left the family, {e.n} pairs cannot reach their share of the level)")
        elif margin and tost_holm_p < LEVEL:
            said.append(f"level within ±{margin:g} (TOST Holm p {tost_holm_p:.2g})")
        else:
            could = smallest_margin(e.values) if e.n >= 2 else None
            reach = (f"its pairs exclude no margin narrower than ±{could:.3g}" if could is not None
                     else "too few pairs to exclude any margin")
            declared = f"not level within ±{margin:g}; " if margin else ""
            said.append(f"not separated (inconclusive: {declared}{reach})")
    return said
