"""A pairwise covering array: rows of one value per axis such that every pair of values of any two
axes meets in some row. It grows with the square of the largest axes, not their product, so the
test grid stays within the CI budget as parts are added."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any


def pairs_of(row: Mapping[str, Any], axes: Sequence[str]) -> set[tuple[str, Any, str, Any]]:
    return {(a, row[a], b, row[b]) for a, b in itertools.combinations(axes, 2) if a in row and b in row}


def pairwise(values: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Rows covering every pair; greedy and deterministic: each row starts from the first pair not
    yet covered, then takes, axis by axis, the value that covers the most new pairs."""
    axes = sorted(values, key=lambda a: -len(values[a]))
    uncovered = {(a, x, b, y) for a, b in itertools.combinations(axes, 2) for x in values[a] for y in values[b]}
    rows = []
    while uncovered:
        a, x, b, y = min(uncovered, key=lambda p: (axes.index(p[0]), axes.index(p[2]), values[p[0]].index(p[1]),
                                                   values[p[2]].index(p[3])))
        row = {a: x, b: y}
        for axis in axes:
            if axis not in row:
                row[axis] = max(values[axis], key=lambda v: len(pairs_of({**row, axis: v}, axes) & uncovered))
        uncovered -= pairs_of(row, axes)
        rows.append({axis: row[axis] for axis in values})
    return rows
