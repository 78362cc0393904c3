"""Whether an effect holds across model sizes: each axis's paired difference at each size (the
simple effects, Holm over every simple difference of the sweep), and its interaction with size,
the difference of differences against the smallest size listed, paired by seed and every other
grid value (Holm over every interaction of the table). One sign at every size with no interaction
separated is said as that, inconclusive on the interaction: that the effect holds across sizes
would need an equivalence test of the interactions against a declared margin."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zoo.compare.agreement import separates
from zoo.compare.comparison import Comparison
from zoo.compare.stats import Estimate, SimpleEffect, floor_of, holm, interaction, p_value, units_of
from zoo.records import RunRecord
from zoo.sweep.names import value_text
from zoo.sweep.spec import SIZE_KEYS


def size_keys(sweep: Comparison) -> list[str]:
    return [key for key in sweep.grid if key in SIZE_KEYS]


@dataclass
class AcrossSizes:
    label: str
    """`ffn: gelu − relu`"""
    size_label: str
    sizes: list[Any]
    at_size: list[tuple[Estimate, float]]
    """The difference at each size, and its Holm p over the sweep's simple differences."""
    interactions: list[tuple[Estimate, float, float]]
    """At each size after the first: the difference there minus at the first, its p and Holm p."""
    verdict: str = ""


def size_verdict(sizes: Sequence[Any], at_size: Sequence[tuple[Estimate, float]],
            interactions: Sequence[tuple[Estimate, float, float]]) -> str:
    """How the difference runs across sizes: an interaction that separates says it depends on size;
    else the same sign at every size is said as such, with the interactions not separated
    (inconclusive), never as a difference that holds. A size without
    two finished pairs (its runs diverged or failed) is named: nothing is known there."""
    unmeasured = [value_text(size) for size, (e, _) in zip(sizes, at_size, strict=True) if e.n < 2]
    missing = f"; not measured at {', '.join(unmeasured)} (fewer than 2 finished pairs)" if unmeasured else ""
    if any(separates(e, adjusted) for e, _, adjusted in interactions):
        return "depends on size: an interaction separates" + missing
    count = sum(bool(separates(e, adjusted)) for e, adjusted in at_size)
    if not count:
        return (f"separated at no size{' measured' if unmeasured else ''}; no interaction separated "
                f"(inconclusive){missing}")
    signs = {np.sign(e.mean) for e, _ in at_size if math.isfinite(e.mean)}
    if len(signs) > 1:
        return (f"changes sign across sizes (separated at {count} of {len(at_size)}); no interaction "
                f"separated (inconclusive){missing}")
    if unmeasured:
        measured = len(at_size) - len(unmeasured)
        return f"unknown across sizes: separates at {count} of the {measured} measured, with one sign{missing}"
    return (f"one sign at every size, separated at {count} of {len(at_size)}; no interaction separated "
            "(inconclusive)")


def across_sizes(sweep: Comparison, records: Sequence[RunRecord], simple: list[SimpleEffect]) -> list[AcrossSizes]:
    units, labels, out = units_of(sweep, records), sweep.labels(), []
    for given in size_keys(sweep):
        sizes = list(sweep.grid[given])
        for key, values in sweep.grid.items():
            if key == given:
                continue
            at = [e for e in simple if e.key == key and e.given_key == given]
            if not at:  # an axis whose values compute alike (zoo.compare.units): an identity, not an effect
                continue
            for index, value in enumerate(values[1:]):
                at_size = [(e.differences[index][1], e.tests[index][1]) for e in at]
                contrasts = [interaction(units.view(key, given), key, value, values[0], given, size, sizes[0],
                                         sweep.resolved_metric.bounds) for size in sizes[1:]]
                out.append(AcrossSizes(f"{labels[key]}: {value_text(value)} − {value_text(values[0])}", labels[given],
                                       sizes, at_size, [(e, p_value(e), math.nan) for e in contrasts]))
    contrasts = [(p, floor_of(e)) for effect in out for e, p, _ in effect.interactions]
    adjusted = iter(holm([p for p, _ in contrasts], [floor for _, floor in contrasts]))
    for effect in out:
        effect.interactions = [(e, p, next(adjusted)) for e, p, _ in effect.interactions]
        effect.verdict = size_verdict(effect.sizes, effect.at_size, effect.interactions)
    return out
