"""The statistics of a sweep: per-variant means over seeds, and each axis's marginal effect with
95% t-intervals; differences between values are paired over the cells that share every other
grid value and the seed, which removes the variance those share."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from zoo.compare.comparison import Comparison
from zoo.compare.exact import sign_flip_p, smallest_p, tarone
from zoo.compare.units import IdentityCheck, Units, experimental_units
from zoo.metric_names import MetricName
from zoo.metrics import CURVE, range_of
from zoo.records import RunRecord
from zoo.sweep.names import value_text


@dataclass(frozen=True)
class Estimate:
    mean: float
    std: float
    n: int
    low: float
    high: float
    values: tuple[float, ...] = field(default=(), compare=False, repr=False)
    """What it summarizes (each pair's difference, for a difference): the exact tests read them."""

    @classmethod
    def of(cls, values: Sequence[float], level: float = 0.95) -> Estimate:
        """Mean, sample standard deviation and the t-interval; nan where n is too small for them."""
        x = np.asarray(values, dtype=float)
        n, kept = x.size, tuple(float(v) for v in x)
        if n == 0:
            return cls(math.nan, math.nan, 0, math.nan, math.nan)
        mean = float(x.mean())
        if n == 1:
            return cls(mean, math.nan, 1, math.nan, math.nan, kept)
        with np.errstate(invalid="ignore"):  # inf - inf: a non-finite run's spread is nan, said as such
            std = float(x.std(ddof=1))
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * std / math.sqrt(n)
        return cls(mean, std, n, mean - half, mean + half, kept)

    def within(self, low: float, high: float) -> Estimate:
        """The interval held inside what the values can be: a t-interval of a bounded metric from
        two seeds can reach past it (exact match [-2.48, 3.27]), which no value can; the mean and
        the test are unchanged, and reports say the interval is clipped."""
        if math.isnan(self.low):
            return self
        return Estimate(self.mean, self.std, self.n, min(max(self.low, low), high), max(min(self.high, high), low),
                        self.values)


@dataclass(frozen=True)
class Band:
    """The metric at one evaluated step over a variant's seeds: the mean and a band, the 95%
    t-interval where there are 3 or more seeds, else the lowest and highest value."""

    step: int
    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, step: int, values: Sequence[float], bounds: tuple[float, float] = (-math.inf, math.inf)) -> Band:
        if len(values) >= 3:
            e = Estimate.of(values).within(*bounds)
            return cls(step, e.mean, e.low, e.high, e.n)
        return cls(step, float(np.mean(values)), float(min(values)), float(max(values)), len(values))


@dataclass
class VariantRow:
    variant: str
    assignment: dict[str, Any]
    metric: Estimate
    parameters: int | None
    steps_to_target: float | None
    seconds_to_target: float | None
    reached: int
    diverged: int
    failed: int
    nonfinite: int
    """Seeds whose final metric is NaN or infinite: the variant then ranks after every finite one."""
    curve: list[Band] = field(default_factory=list)
    """The metric at each evaluated step, over the seeds that reached that step."""
    seed_steps: list[tuple[int, bool]] = field(default_factory=list)
    """Each finished seed's step at the target, and whether it got there: a seed that never did is
    censored at its last step, so steps_to_target (their mean) is then a lower bound."""


@dataclass
class AxisEffect:
    key: str
    label: str
    values: list[Any]
    estimates: list[Estimate]
    differences: list[tuple[Any, Estimate]]
    """(value, its difference from values[0]) for every other value, paired over distinct
    computations; none for an axis whose values are one computation (see `identity`)."""
    tests: list[tuple[float, float]] = field(default_factory=list)
    """(p, Holm-adjusted p) of each difference, in the order of `differences`; the family is every
    paired difference and two-way interaction of the sweep (its primary family)."""
    identity: IdentityCheck | None = None
    """Where the axis's values are one computation (zoo.compare.units): the check, not an effect."""
    interactions: list[Interaction] = field(default_factory=list)
    """Its two-way interactions with each grid key listed after it, in the same Holm family."""
    other_pairs: list[tuple[Any, Any, Estimate]] = field(default_factory=list)
    """(a, b, b − a) for every two values after the first (an axis of three values or more): the
    rest of the pairs, paired as `differences`, shown in the plot but never tested (not in the family)."""
    primary: bool = True
    """Its differences are in the sweep's primary family (its key is one of the question's family);
    else in the family of everything outside it (a size ladder's sizes), Holm apart."""


@dataclass
class Interaction:
    """How key's difference (value − reference) changes with another key: the difference at
    given=at minus at given=base, paired over the seed and every other grid value."""

    label: str
    value: Any
    reference: Any
    given_label: str
    at: Any
    base: Any
    estimate: Estimate
    test: tuple[float, float] = (math.nan, math.nan)
    """(p, Holm-adjusted p) in the family of every difference and interaction of the sweep."""
    primary: bool = True
    """Both its keys are of the question's family: in the primary family, else in the other."""

    def contrast(self) -> str:
        return (f"({value_text(self.value)} − {value_text(self.reference)}) at {value_text(self.at)} − at "
                f"{value_text(self.base)}")

    def text(self) -> str:
        return f"{self.label} × {self.given_label}: {self.contrast()}"


def p_value(e: Estimate) -> float:
    """Two-sided p of the exact sign-flip test (zoo.compare.exact) of the paired differences; nan
    below two pairs. It is never 0: at n pairs it is at least 2 / 2^n, however alike they are."""
    if e.n < 2 or not math.isfinite(e.std) or not math.isfinite(e.mean):
        return math.nan
    return sign_flip_p(e.values)


def holm(p_values: Sequence[float], floors: Sequence[float] | None = None) -> list[float]:
    """Holm's step-down adjustment (Holm 1979), in the order given: the i-th smallest of m p-values
    becomes max over j <= i of min(1, (m - j + 1) p_(j)). It bounds the chance of any false
    discovery in the family by the level, for any dependence between the tests. A nan (too few
    pairs) stays nan and does not count in m. With `floors` (each test's smallest attainable p),
    the tests that cannot reach their share of the level leave the family first
    (zoo.compare.exact.tarone) and stay nan too."""
    if floors is not None:
        kept, _ = tarone(floors)
        p_values = [p if keep else math.nan for p, keep in zip(p_values, kept, strict=True)]
    order = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    adjusted, running = [math.nan] * len(p_values), 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p))
        adjusted[i] = running
    return adjusted


def left_the_family(p: float, adjusted: float) -> bool:
    """A test with a p and no Holm p: its pairs could not reach its share of the level (Tarone), so
    Holm left it out; one with neither had too few pairs to test."""
    return math.isnan(adjusted) and not math.isnan(p)


def floor_of(e: Estimate, sided: int = 2) -> float:
    """The smallest p the exact test of this difference can give (nan where it has no test)."""
    return smallest_p(e.n, sided) if e.n >= 2 else math.nan


def discrete_holm(estimates: Sequence[Estimate]) -> list[float]:
    """Holm over the exact tests of these differences, those that cannot reach their share of the
    level left out first (Tarone)."""
    return holm([p_value(e) for e in estimates], [floor_of(e) for e in estimates])


def seed_noise(sweep: Comparison, records: Sequence[RunRecord]) -> tuple[float, int]:
    """The seed-to-seed standard deviation of the metric within a variant, pooled over the variants
    with two or more finished seeds (twins as one), and its degrees of freedom: the noise floor
    below which a difference between variants cannot be told from a change of seed."""
    groups: dict[str, list[float]] = {}
    for record, value in units_of(sweep, records).finished:
        if math.isfinite(value):
            groups.setdefault(record.variant, []).append(value)
    spread = [(len(v) - 1, float(np.var(v, ddof=1))) for v in groups.values() if len(v) > 1]
    df = sum(d for d, _ in spread)
    return (math.sqrt(sum(d * var for d, var in spread) / df) if df else math.nan), df


def curve_metric(metric: str) -> str:
    """The logged metric whose evaluations draw the curve of `metric` (and count steps to its
    target): `eval/X` for `eval_auc/X`, and for a split scored once at the end (`test/X`,
    `long/X`) its validation counterpart `eval/X`, the only one measured during training."""
    return str(MetricName.parse(metric).curve)


def curve_title(metric: str) -> str:
    curve = curve_metric(metric)
    scored_once = curve != metric and not metric.startswith(CURVE + "/")
    return f"{curve} during training" + (f" ({metric} is scored once, at the end)" if scored_once else "")


def reached_at(history: list[dict[str, Any]], metric: str, target: float, goal: str) -> tuple[int, float] | None:
    """(step, seconds) of the first evaluation that meets the target."""
    for row in history:
        value = row.get(metric)
        if value is not None and (value >= target if goal == "max" else value <= target):
            return int(row["train/step"]), float(row.get("train/wall_s", math.nan))
    return None


def time_to_target(record: RunRecord, metric: str, target: float, goal: str) -> tuple[int, float, bool]:
    """(step, seconds, reached) of a finished run: where it met the target, else where it ended
    (censored: it would have needed more than that)."""
    history = record.history
    hit = reached_at(history, metric, target, goal)
    if hit is not None:
        return (*hit, True)
    last = history[-1] if history else {}
    return int(record.steps or last.get("train/step", 0)), float(last.get("train/wall_s", math.nan)), False


def final_value(record: RunRecord, metric: str) -> float | None:
    return record.value(metric) if record.status == "finished" else None


def variant_rows(sweep: Comparison, records: Sequence[RunRecord]) -> list[VariantRow]:
    """One row per variant (grid values), best first by the sweep's goal."""
    by_variant: dict[str, list[RunRecord]] = {}
    for record in records:
        by_variant.setdefault(record.variant, []).append(record)
    rows = []
    for variant, runs in by_variant.items():
        values = [v for v in (final_value(r, sweep.metric) for r in runs) if v is not None]
        logged = curve_metric(sweep.metric)
        done = sorted((r for r in runs if sweep.target is not None and r.status == "finished"), key=lambda r: r.seed or 0)
        times = [time_to_target(r, logged, sweep.target, sweep.goal) for r in done]
        curve: dict[int, list[float]] = {}
        for run in runs:
            for row in run.history:
                if logged in row:
                    curve.setdefault(int(row["train/step"]), []).append(float(row[logged]))
        rows.append(VariantRow(
            variant, runs[0].assignment, Estimate.of(values).within(*sweep.resolved_metric.bounds),
            next((r.parameters for r in runs if r.parameters), None),
            float(np.mean([t[0] for t in times])) if times else None,
            float(np.mean([t[1] for t in times])) if times else None,
            sum(t[2] for t in times), sum(r.status == "diverged" for r in runs), sum(r.status == "failed" for r in runs),
            sum(not math.isfinite(v) for v in values),
            [Band.of(step, values, range_of(logged)) for step, values in sorted(curve.items())],
            [(t[0], t[2]) for t in times]))
    sign = -1.0 if sweep.goal == "max" else 1.0

    def rank(row: VariantRow):  # the metric, then (for ties) fewer steps and seconds to the target
        missing, scored = math.inf, row.metric.n > 0 and not row.nonfinite
        return (row.metric.n == 0, row.nonfinite > 0, sign * row.metric.mean if scored else 0.0,
                row.steps_to_target if row.steps_to_target is not None else missing,
                row.seconds_to_target if row.seconds_to_target is not None else missing)

    return sorted(rows, key=rank)


def paired_differences(finished: list[tuple[RunRecord, float]], key: str, values: list[Any],
                       bounds: tuple[float, float] = (-math.inf, math.inf)) -> list[tuple[Any, Estimate]]:
    """Each value's difference from values[0], paired over runs that share every other grid value
    and the seed; its interval held inside what a difference of the metric can be."""
    low, high = bounds
    def rest(record):
        others = tuple(sorted((k, repr(v)) for k, v in record.assignment.items() if k != key))
        return others, record.seed

    reference = {rest(r): v for r, v in finished if r.assignment[key] == values[0]}
    return [(value, Estimate.of([resolved_difference(v, reference[rest(r)]) for r, v in finished
                                 if r.assignment[key] == value and rest(r) in reference]).within(low - high, high - low))
            for value in values[1:]]


FLOAT32_RESOLUTION = float(np.finfo(np.float32).eps)
"""The relative resolution of a metric computed in float32 (the model's arithmetic)."""


def resolved_difference(value: float, reference: float) -> float:
    """value - reference, or 0 where it is below what float32 resolves at their size: a constant
    difference of 1e-9 is rounding, and would otherwise be a certain one (p 0) of zero variance."""
    difference = value - reference
    return 0.0 if abs(difference) <= FLOAT32_RESOLUTION * max(abs(value), abs(reference)) else difference


def finished_values(sweep: Comparison, records: Sequence[RunRecord]) -> list[tuple[RunRecord, float]]:
    pairs = [(r, final_value(r, sweep.metric)) for r in records]
    return [(r, v) for r, v in pairs if v is not None]


def units_of(sweep: Comparison, records: Sequence[RunRecord]) -> Units:
    return experimental_units(sweep, finished_values(sweep, records))


def axis_effects(sweep: Comparison, records: Sequence[RunRecord]) -> list[AxisEffect]:
    """For every grid key: each value's mean over all other grid values and seeds, and its paired
    difference from the key's first value over distinct computations (zoo.compare.units), and its
    two-way interactions with the keys after it, each with its p-value and the Holm-adjusted one
    over all of them; a key whose values are one computation gets its identity check instead."""
    labels, finished, bounds = sweep.labels(), finished_values(sweep, records), sweep.resolved_metric.bounds
    family = set(sweep.question.family or sweep.grid)
    units = experimental_units(sweep, finished)
    effects = []
    tested = [key for key in sweep.grid if key not in units.identities and len(sweep.grid[key]) > 1]
    for key, values in sweep.grid.items():
        per_value = [[v for r, v in finished if r.assignment[key] == value] for value in values]
        identity = units.identities.get(key)
        later = tested[tested.index(key) + 1:] if key in tested else []
        crossed = [Interaction(labels[key], value, values[0], labels[given], at, sweep.grid[given][0],
                               interaction(units.view(key, given), key, value, values[0], given, at,
                                           sweep.grid[given][0], bounds), primary=key in family and given in family)
                   for given in later for value in values[1:] for at in sweep.grid[given][1:]]
        own = units.view(key)  # a correlated twin of another key counts once here
        others = [] if identity else [(a, b, paired_differences(own, key, [a, b], bounds)[0][1])
                                      for a, b in itertools.combinations(values[1:], 2)]
        effects.append(AxisEffect(key, labels[key], list(values), [Estimate.of(v).within(*bounds) for v in per_value],
                                  [] if identity else paired_differences(own, key, list(values), bounds),
                                  identity=identity, interactions=crossed, other_pairs=others, primary=key in family))
    return with_tests(effects, apart=True)


def interaction(finished: list[tuple[RunRecord, float]], key: str, value: Any, reference: Any, given: str,
                at: Any, base: Any, bounds: tuple[float, float] = (-math.inf, math.inf)) -> Estimate:
    """(x(value, at) − x(reference, at)) − (x(value, base) − x(reference, base)), paired over runs
    that share the seed and every grid value but `key` and `given`; its interval held inside what a
    difference of two differences of the metric can be (twice the metric's range either way)."""
    cells: dict[tuple, float] = {}
    for record, x in finished:
        rest = tuple(sorted((k, repr(v)) for k, v in record.assignment.items() if k not in (key, given)))
        cells[(rest, record.seed, repr(record.assignment[key]), repr(record.assignment[given]))] = x
    values = []
    for rest, seed, k, g in list(cells):
        if (k, g) != (repr(value), repr(at)):
            continue
        corners = [cells.get((rest, seed, repr(v), repr(s))) for v, s in ((reference, at), (value, base), (reference, base))]
        if None not in corners:
            values.append(cells[(rest, seed, k, g)] - corners[0] - corners[1] + corners[2])
    low, high = bounds
    return Estimate.of(values).within(2 * (low - high), 2 * (high - low))


def primary_family(effects: list[AxisEffect]) -> list[Estimate]:
    """Every test of the sweep's primary family: each axis's paired differences, then its interactions
    (those of the question's family of keys alone)."""
    return [e for effect in effects if effect.primary for _, e in effect.differences] + [
        i.estimate for effect in effects for i in effect.interactions if i.primary]


def sides(effect: AxisEffect) -> list[bool]:
    """Whether each of an effect's tests (its differences, then its interactions, as `tested`
    orders them) is in the primary family."""
    return [effect.primary] * len(effect.differences) + [i.primary for i in effect.interactions]


def apart_family(effects: list[AxisEffect]) -> list[Estimate]:
    """The tests outside the primary family (a size ladder's differences and interactions)."""
    return [e for effect in effects if not effect.primary for _, e in effect.differences] + [
        i.estimate for effect in effects for i in effect.interactions if not i.primary]


def with_tests(effects: list, apart: bool = False) -> list:
    """Give each effect's differences (and an axis effect's interactions) their (p, Holm p), the
    family being every difference and interaction of every effect given that can reach its share
    of the level (Tarone; one that cannot gets Holm p nan): one adjustment, whichever table the
    effects are. With `apart`, the tests outside the primary family (`primary` False: a size
    ladder's) are adjusted as a family of their own."""
    tests = [(effect, index, e) for effect in effects for index, (_, e) in enumerate(effect.differences)]
    tests += [(i, None, i.estimate) for effect in effects for i in getattr(effect, "interactions", [])]
    for effect in effects:
        effect.tests = [(math.nan, math.nan)] * len(effect.differences)
    families = [[t for t in tests if getattr(t[0], "primary", True) == side] for side in (True, False)] if apart \
        else [tests]
    for family in families:
        raw = [p_value(e) for _, _, e in family]
        for (owner, index, _), test in zip(family, zip(raw, holm(raw, [floor_of(e) for _, _, e in family]), strict=True),
                                           strict=True):
            if index is None:
                owner.test = test
            else:
                owner.tests[index] = test
    return effects


@dataclass
class SimpleEffect:
    """One axis's paired differences within one value of another axis: where an effect depends on
    a second choice (Post-LN needs warmup, Pre-LN does not), the marginal effect averages it away."""

    key: str
    label: str
    reference: Any
    given_key: str
    given_label: str
    given_value: Any
    differences: list[tuple[Any, Estimate]]
    tests: list[tuple[float, float]] = field(default_factory=list)
    """(p, Holm-adjusted p) of each difference; the family is every simple difference of the sweep."""


def simple_effects(sweep: Comparison, records: Sequence[RunRecord]) -> list[SimpleEffect]:
    """For every ordered pair of grid keys (key, given): key's paired effects at each given value,
    over distinct computations; a key whose values are one computation is neither side."""
    labels, bounds = sweep.labels(), sweep.resolved_metric.bounds
    units = units_of(sweep, records)
    effects = []
    for key, values in sweep.grid.items():
        for given, given_values in sweep.grid.items():
            if given == key or key in units.identities or given in units.identities:
                continue
            for g in given_values:
                subset = [(r, v) for r, v in units.view(key, given) if r.assignment[given] == g]
                effects.append(SimpleEffect(key, labels[key], values[0], given, labels[given], g,
                                            paired_differences(subset, key, list(values), bounds)))
    return with_tests(effects)
