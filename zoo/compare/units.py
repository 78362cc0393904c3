"""The experimental unit of a comparison: each distinct computation counted once.

`fused` and `per_head` attention compute the same function from the same weights, and their runs
are bit-identical. Counted as two cells, every other axis's "16 pairs" are 8 distinct pairs counted
twice: the standard error shrinks by a factor 0.68 and the degrees of freedom double, for nothing.
A grid key whose values the registry declares to compute the same function (a part's `computes`),
or whose runs are bit-identical in every cell, is therefore an identity check, not an effect: its
cells become one unit (their mean) in every other axis's test, and the check says in how many cells
they were identical. Values that nearly copy each other (z-loss 1e-4 beside 0) are flagged; where
every other axis's paired differences at the two values move together from seed to seed (their
seed deviations correlate above TWIN_CORRELATION), and the two values lie nearer each other than
that axis's do, they are correlated twins: one
unit (their mean) in every other axis's test, since their pairs are not independent replicates,
while their own difference is still tested. A sweep that declares the key `distinct` keeps them
apart, and the report says so either way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zoo.compare.comparison import Comparison
from zoo.errors import ZooError
from zoo.records import RunRecord
from zoo.specs.choices import validate_choice
from zoo.specs.registries import AXES, registry
from zoo.sweep.names import assignment_text, value_text
from zoo.sweep.record_differences import timing

NEAR = 1e-3
"""Values whose metric differs by less than this (relative) in every pair nearly copy each other."""
TWIN_CORRELATION = 0.9
"""Another axis's paired differences at two values of a key whose seed-to-seed deviations
correlate above this (Pearson, pooled over the cells they share) come from runs that copy each
other: z-loss 1e-4 against 0 on lr_sensitivity."""
TWIN_DEGREES = 4
"""The fewest degrees of freedom a correlation of seed deviations is read over (a cell of n seeds
gives n - 1): below 4, one above 0.9 is too likely by chance alone (2% at 4, as for 5 independent
pairs)."""


def computed(key: str) -> bool:
    """Whether a logged value says what was computed: not a timing (`_s`: seconds and rates differ
    between identical computations), nor the gradient norm, summed over the parameters as a layout
    holds them (per_head's heads apart), which rounds differently for the same gradient."""
    return not timing(key) and "grad_norm" not in key


def final_metrics(record: RunRecord) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in record.metrics.items()))


def computation(record: RunRecord) -> tuple:
    """What a run computed: its final metrics and every computed value it logged."""
    rows = tuple(tuple(sorted((k, repr(v)) for k, v in row.items() if computed(k))) for row in record.history)
    return final_metrics(record), rows


def one_computation(records: Sequence[RunRecord]) -> bool:
    """Whether the runs computed the same: their final metrics first (a few values, where runs of
    different functions already differ), then every value they logged."""
    return len(set(map(final_metrics, records))) == 1 and len(set(map(computation, records))) == 1


def declared_function(key: str, values: Sequence[Any]) -> str | None:
    """The function every value of a model axis is declared to compute (the parts' `computes`), or None."""
    prefix, _, axis = key.rpartition(".")
    if prefix != "model" or axis not in AXES:
        return None
    declared = set()
    for value in values:
        try:
            declared.add(getattr(registry(axis).get(validate_choice(axis, value).name), "computes", None))
        except (ZooError, ValueError):  # not a part of the axis (pydantic's errors are ValueErrors)
            return None
    return declared.pop() if len(declared) == 1 and None not in declared else None


@dataclass(frozen=True)
class IdentityCheck:
    """A grid key whose values are one computation, checked cell by cell instead of tested."""

    key: str
    label: str
    values: tuple[Any, ...]
    function: str | None
    """What the registry declares the values to compute; None where they were found bit-identical."""
    identical: int
    compared: int
    """Cells (every other grid value and the seed) where all values finished, and of those, how many
    hold bit-identical runs."""
    largest: float
    """The largest relative difference of the metric between the values within a cell."""

    @property
    def holds(self) -> bool:
        return self.identical == self.compared

    def text(self) -> str:
        names = " = ".join(value_text(v) for v in self.values)
        why = f"declared to compute {self.function}" if self.function else "bit-identical runs"
        if self.holds:
            return (f"identity check {self.label}: {names}: identical in {self.identical} of {self.compared} cells "
                    f"({why}); each cell counts once in every other axis's test")
        return (f"IDENTITY CHECK FAILED {self.label}: {names} are {why}, but differ in "
                f"{self.compared - self.identical} of {self.compared} cells ({gap_text(self.largest)}; attention dropout "
                "or a kernel that rounds otherwise would do it); each cell still counts once, as the mean of its values")


@dataclass(frozen=True)
class NearTwins:
    """Two values of a key whose runs nearly copy each other: separate cells, flagged."""

    label: str
    value: Any
    reference: Any
    pairs: int
    largest: float

    def text(self) -> str:
        how = (f"give the same metric in all {self.pairs} pairs but other logged values" if self.largest == 0 else
               f"differ by at most {self.largest:.2g} (relative) in the metric over {self.pairs} pairs")
        return (f"near twins {self.label}: {value_text(self.value)} and {value_text(self.reference)} {how}, not bit "
                "for bit: kept as separate cells, but their pairs are not independent replicates of the other axes' "
                "effects")


@dataclass(frozen=True)
class CorrelatedTwins:
    """Two values of a key at which every other axis's paired differences move together from seed to
    seed (correlated_twins): one unit in the other axes' tests unless the sweep declares the key distinct."""

    key: str
    label: str
    value: Any
    reference: Any
    correlations: tuple[tuple[str, float, int], ...]
    """(other axis, Pearson correlation of its differences' seed deviations at the two values, their
    degrees of freedom)."""
    distinct: bool
    """The sweep declares the key's values distinct units: kept apart, and flagged."""

    def text(self) -> str:
        seen = ", ".join(f"{axis} {r:.2f} over {n}" for axis, r, n in self.correlations)
        said = (f"correlated twins {self.label}: {value_text(self.value)} and {value_text(self.reference)}: every other "
                f"axis's paired differences at the two move together from seed to seed (Pearson r above "
                f"{TWIN_CORRELATION}: {seen} degrees of freedom), and the two lie nearer each other than that axis's "
                "values")
        if self.distinct:
            return (said + f"; kept as separate units, as the sweep declares (`distinct: [{self.key}]`), though their "
                    "pairs are not independent replicates of the other axes' effects")
        return (said + "; one unit (their mean) in every other axis's test, their own difference still tested "
                f"(declare `distinct: [{self.key}]` in the sweep to count them apart)")


def gap_text(largest: float) -> str:
    """How far a failed identity's runs are apart in the metric, without contradicting the failure:
    apart in other logged values alone, or apart where a run's metric is not finite."""
    if math.isinf(largest):
        return "a run's metric is not finite where its twin's is, or the two are not finite alike"
    if largest == 0:
        return "the metric itself is the same in every cell; they differ in other logged values"
    return f"largest relative difference of the metric {largest:.2g}"


@dataclass
class Units:
    finished: list[tuple[RunRecord, float]]
    """One (record, metric) per distinct computation: twins merged into their mean."""
    identities: dict[str, IdentityCheck] = field(default_factory=dict)
    near: list[NearTwins] = field(default_factory=list)
    twins: dict[str, CorrelatedTwins] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    def notes(self) -> list[str]:
        return [check.text() for check in self.identities.values() if check.holds]

    def warnings(self) -> list[str]:
        return [*(c.text() for c in self.identities.values() if not c.holds), *(n.text() for n in self.near),
                *(t.text() for t in self.twins.values())]

    def view(self, *keep: str) -> list[tuple[RunRecord, float]]:
        """The units a test of the keys `keep` reads: every correlated twin apart from them merged
        into one unit (the keys a test compares keep their values)."""
        finished = self.finished
        for key, twin in self.twins.items():
            if key not in keep and not twin.distinct:
                finished = merged(finished, key, [twin.reference, twin.value], self.labels)
        return finished


def cells_across(finished: list[tuple[RunRecord, float]], key: str) -> dict[tuple, dict[str, tuple[RunRecord, float]]]:
    """The finished runs grouped by every other grid value and the seed, each group by its value of key."""
    groups: dict[tuple, dict[str, tuple[RunRecord, float]]] = {}
    for record, value in finished:
        rest = tuple(sorted((k, repr(v)) for k, v in record.assignment.items() if k != key)), record.seed
        groups.setdefault(rest, {})[repr(record.assignment[key])] = (record, value)
    return groups


def relative(a: float, b: float) -> float:
    """|a - b| relative to the larger; 0 for the same value (NaN and NaN included), inf where only
    one is finite or they are infinities apart (never NaN, which max() would pass over)."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    scale = max(abs(a), abs(b))
    if not (math.isfinite(a) and math.isfinite(b)) or not scale:
        return math.inf
    return abs(a - b) / scale


def check_identity(finished, key: str, label: str, values: Sequence[Any]) -> IdentityCheck | None:
    """The identity check of key, where its values are declared one function or every cell holds
    bit-identical runs of them; None where they are an effect to test."""
    function = declared_function(key, values)
    full = [g for g in cells_across(finished, key).values() if all(repr(v) in g for v in values)]
    identical = sum(one_computation([g[repr(v)][0] for v in values]) for g in full)
    if function is None and not (full and identical == len(full)):
        return None
    largest = max((relative(g[repr(v)][1], g[repr(values[0])][1]) for g in full for v in values), default=0.0)
    return IdentityCheck(key, label, tuple(values), function, identical, len(full), largest)


def near_twins(finished, key: str, label: str, values: Sequence[Any]) -> list[NearTwins]:
    found = []
    groups = cells_across(finished, key).values()
    for value in values[1:]:
        gaps = [relative(g[repr(value)][1], g[repr(values[0])][1]) for g in groups
                if repr(value) in g and repr(values[0]) in g]
        if gaps and max(gaps) < NEAR:
            found.append(NearTwins(label, value, values[0], len(gaps), max(gaps)))
    return found


def differences_across(finished, key: str, value: Any, reference: Any, other: str, other_values: Sequence[Any]
                       ) -> tuple[list[float], list[float], int, list[float], list[float]]:
    """`other`'s paired differences (each of its values from its first) at key=reference and at
    key=value, matched by the seed and every remaining grid value, each as its seed's deviation
    from the mean over seeds of its cell (what moves with the seed alone, not with the other grid
    values, whose interactions would correlate the two anyway) with their degrees of freedom; key's
    own differences (value − reference) in the same runs; and `other`'s differences as they are."""
    at: dict[tuple, dict[str, float]] = {}
    for record, x in finished:
        rest = tuple(sorted((k, repr(v)) for k, v in record.assignment.items() if k not in (key, other)))
        at.setdefault((rest, record.seed), {})[f"{record.assignment[key]!r}|{record.assignment[other]!r}"] = x
    by_cell: dict[tuple, list[tuple[float, float]]] = {}
    own, raw = [], []
    for (rest, _seed), cell in at.items():
        for o in other_values[1:]:
            corners = [cell.get(f"{k!r}|{v!r}") for k in (reference, value) for v in (o, other_values[0])]
            if None not in corners and all(map(math.isfinite, corners)):
                by_cell.setdefault((rest, repr(o)), []).append((corners[0] - corners[1], corners[2] - corners[3]))
                own += [corners[2] - corners[0], corners[3] - corners[1]]
                raw += [corners[0] - corners[1], corners[2] - corners[3]]
    first, second, degrees = [], [], 0
    for pairs in by_cell.values():
        if len(pairs) > 1:
            means = np.mean(pairs, axis=0)
            first += [a - means[0] for a, _ in pairs]
            second += [b - means[1] for _, b in pairs]
            degrees += len(pairs) - 1
    return first, second, degrees, own, raw


def correlated_twins(finished, sweep: Comparison, key: str, others: Sequence[str]) -> CorrelatedTwins | None:
    """key's two values as correlated twins, where every other tested axis's differences at them
    move together from seed to seed (r above TWIN_CORRELATION over TWIN_DEGREES or more degrees of
    freedom), and key's own differences are smaller (median size) than that axis's: the values copy
    each other, not the other way round (z-loss's differences at each qk_norm may correlate too,
    but qk_norm's values are far apart); None otherwise."""
    values = list(sweep.grid[key])
    if len(values) != 2 or not others:
        return None
    seen = []
    for other in others:
        first, second, degrees, own, raw = differences_across(finished, key, values[1], values[0], other,
                                                              list(sweep.grid[other]))
        still = 1e-9 * max(float(np.median(np.abs(raw))), np.finfo(float).tiny)  # rounding, not a seed's doing
        if degrees < TWIN_DEGREES or np.std(first) <= still or np.std(second) <= still:
            return None
        if not np.median(np.abs(own)) < np.median(np.abs(raw)):
            return None
        r = float(np.corrcoef(first, second)[0, 1])
        if not r > TWIN_CORRELATION:
            return None
        seen.append((sweep.labels()[other], r, degrees))
    return CorrelatedTwins(key, sweep.labels()[key], values[1], values[0], tuple(seen), key in sweep.distinct)


def merged(finished, key: str, values: Sequence[Any], labels: dict[str, str]) -> list[tuple[RunRecord, float]]:
    """Each cell's runs across key's values as one unit: its assignment at the first value, its metric their mean."""
    units = []
    for group in cells_across(finished, key).values():
        members = list(group.values())
        record = members[0][0]
        assignment = {**record.assignment, key: values[0]}
        shown = {**assignment, key: "=".join(value_text(v) for v in values)}
        units.append((record.model_copy(update={"assignment": assignment,
                                                "variant": assignment_text(labels, shown.items())}),
                      float(np.mean([value for _, value in members]))))
    return units


def experimental_units(sweep: Comparison, finished: list[tuple[RunRecord, float]]) -> Units:
    """The sweep's finished runs as distinct computations, with every identity check and near twin."""
    labels = sweep.labels()
    units = Units(list(finished), labels=labels)
    for key, values in sweep.grid.items():
        if len(values) < 2:
            continue
        check = check_identity(units.finished, key, labels[key], list(values))
        if check is None:
            units.near += near_twins(units.finished, key, labels[key], list(values))
            continue
        units.identities[key] = check
        units.finished = merged(units.finished, key, list(values), labels)
    tested = [key for key, values in sweep.grid.items() if len(values) > 1 and key not in units.identities]
    for key in tested:
        twin = correlated_twins(units.finished, sweep, key, [other for other in tested if other != key])
        if twin is not None:
            units.twins[key] = twin
    return units
