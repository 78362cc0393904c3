"""The grid as a randomized block design: every grid key's main effect and every two-way
interaction, with the seed as a block, fitted by least squares on the distinct computations and
tested by F against the residual, each term with its degrees of freedom.

Paired differences answer one contrast at a time; this answers "does the key matter at all, and
does it depend on another" with the seed's shared luck taken out once for the whole grid. Terms are
coded sum-to-zero and each is tested by dropping it from the full model (Type III), so an
unbalanced grid (a diverged cell) is still read correctly. Where the model leaves no residual
degrees of freedom (one seed, or as many terms as units) nothing is tested, and that is said.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from zoo.compare.stats import holm
from zoo.records import RunRecord


@dataclass(frozen=True)
class Term:
    name: str
    df: int
    ss: float
    f: float
    p: float
    holm_p: float = math.nan
    """Adjusted over the grid's terms (the seed block is no hypothesis and is not counted)."""


@dataclass(frozen=True)
class Factorial:
    terms: list[Term]
    residual_df: int
    residual_ss: float
    units: int
    note: str | None = None
    """Why nothing was tested, where nothing was."""


def coded(levels: Sequence[str], column: Sequence[str]) -> np.ndarray:
    """Sum-to-zero columns of a factor: one per level but the last, which is -1 in all of them."""
    out = np.zeros((len(column), len(levels) - 1))
    for row, level in enumerate(column):
        index = levels.index(level)
        out[row] = -1.0 if index == len(levels) - 1 else np.eye(len(levels) - 1)[index]
    return out


def residual(design: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    """The residual sum of squares of the least-squares fit and the design's rank."""
    fitted = design @ np.linalg.lstsq(design, y, rcond=None)[0]
    return float(((y - fitted) ** 2).sum()), int(np.linalg.matrix_rank(design))


def factorial(finished: list[tuple[RunRecord, float]], keys: Sequence[str], labels: dict[str, str]) -> Factorial:
    """Main effects of `keys`, their two-way interactions, and the seed block, over the finished
    units (each distinct computation once: zoo.compare.units)."""
    rows = [(r, v) for r, v in finished if math.isfinite(v)]
    y = np.array([v for _, v in rows])
    factors = {}
    for key in keys:
        column = [repr(r.assignment[key]) for r, _ in rows]
        levels = list(dict.fromkeys(column))
        if len(levels) > 1:
            factors[labels[key]] = coded(levels, column)
    seeds = [repr(r.seed) for r, _ in rows]
    block = coded(list(dict.fromkeys(seeds)), seeds) if len(set(seeds)) > 1 else np.zeros((len(rows), 0))
    terms = {name: columns for name, columns in factors.items()}
    for (a, ca), (b, cb) in itertools.combinations(factors.items(), 2):
        terms[f"{a} × {b}"] = np.einsum("ni,nj->nij", ca, cb).reshape(len(rows), -1)
    parts = {"seed (block)": block, **terms}

    def design(without: str | None = None) -> np.ndarray:
        return np.hstack([np.ones((len(rows), 1)), *(c for name, c in parts.items() if name != without)])

    full_ss, rank = residual(design(), y)
    residual_df = len(rows) - rank
    why = ("no grid key has two values" if not terms else
           f"{len(rows)} units and {rank} parameters leave no residual degrees of freedom (more seeds would)"
           if residual_df <= 0 else
           "the model fits every unit exactly: no residual variance to test against"
           if full_ss <= 1e-24 * max(1.0, float((y**2).sum())) else None)
    if why:
        return Factorial([], max(residual_df, 0), full_ss, len(rows), why)
    tested = []
    for name in parts:
        ss, reduced_rank = residual(design(name), y)
        df = rank - reduced_rank
        if df <= 0:
            continue
        f = ((ss - full_ss) / df) / (full_ss / residual_df)
        tested.append(Term(name, df, ss - full_ss, f, float(stats.f.sf(f, df, residual_df))))
    hypotheses = [t for t in tested if t.name != "seed (block)"]
    adjusted = dict(zip([t.name for t in hypotheses], holm([t.p for t in hypotheses]), strict=True))
    return Factorial([Term(t.name, t.df, t.ss, t.f, t.p, adjusted.get(t.name, math.nan)) for t in tested],
                     residual_df, full_ss, len(rows))
