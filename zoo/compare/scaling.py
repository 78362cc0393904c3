"""Effects across scale: each variant's primary metric fitted against training compute (or
parameters) as L(C) = E + A C^-alpha, one fit per seed (zoo.compare.power_law), and each
difference between variants carried past the largest size measured.

A difference is paired by seed: each seed's two laws give d(C) = L_b(C) - L_a(C) at any compute,
so the spread over seeds (zoo.compare.power_law.over_seeds) gives an interval at the largest
compute measured, at a stated multiple of it, and on the change between the two. The verdict: reverses where the extrapolated
difference is separated on the other side of zero; grows or shrinks where the change is separated
from zero; holds where the sweep declares a margin for the metric and two one-sided t-tests on
the change exclude it (level); else not separated (inconclusive), with the narrowest margin the
seeds could call level: an unseparated change is never called a law that holds. Fewer than three sizes,
or fits that do not converge, are said plainly."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

from zoo.compare.comparison import Comparison
from zoo.compare.joint_fit import Multiplier, multiplier
from zoo.compare.power_law import MIN_POINTS, Fit, Interval, crossing, fit_power_law, over_seeds
from zoo.compare.sizes import size_keys
from zoo.compare.stats import Estimate, final_value
from zoo.metrics import by_comparison
from zoo.records import RunRecord
from zoo.specs.model_spec import ModelRecipe
from zoo.sweep.names import assignment_text, value_text


@dataclass
class VariantFit:
    label: str
    assignment: dict[str, Any]
    points: list[tuple[int, float, float]] = field(default_factory=list)
    """(seed, compute, value) of every finished run the laws are fitted to."""
    held_out: dict[Any, list[tuple[int, float, float]]] = field(default_factory=dict)
    """size -> (seed, compute, value) of the runs of a size left out of the fits (fit.check)."""
    fits: dict[int, Fit] = field(default_factory=dict)

    @property
    def laws(self) -> dict[int, Any]:
        return {seed: fit.law for seed, fit in self.fits.items() if fit.law is not None}

    def exponent(self) -> Interval:
        return over_seeds([law.exponent for law in self.laws.values()])

    def irreducible(self) -> Interval:
        return over_seeds([law.irreducible for law in self.laws.values()])

    def bounded(self) -> int:
        """Seeds whose E sits on the metric's bound, unidentified."""
        return sum(law.on_bound for law in self.laws.values())

    def problems(self) -> list[str]:
        return [f"seed {seed}: {fit.problem}" for seed, fit in self.fits.items() if fit.law is None]

    def by_seed(self) -> dict[int, list[tuple[float, float]]]:
        """seed -> the (compute, value) points fitted."""
        points: dict[int, list[tuple[float, float]]] = {}
        for seed, x, y in self.points:
            points.setdefault(seed, []).append((x, y))
        return points


@dataclass
class Extrapolated:
    label: str
    largest: float
    target: float
    at_largest: Interval
    at_target: Interval
    change: Interval
    """The difference's growth away from zero, from the largest compute to the target: (d(target) -
    d(largest)) times the sign of d(largest)."""
    crossing: float | None
    verdict: str


@dataclass
class Checked:
    """A prediction at a size left out of the fits, against its measurement, paired by seed."""

    label: str
    size: Any
    predicted: Interval
    measured: Interval
    error: Interval
    """measured - predicted, per seed."""

    @property
    def verdict(self) -> str:
        if not self.error.seeds:
            return "not measured"
        if self.error.seeds < 2:
            return "no verdict: one seed, so no interval"
        return "not separated from the prediction (inconclusive)" if not self.error.excludes_zero() else \
            f"off: measured {'above' if self.error.mean > 0 else 'below'} the prediction"


LADDER_COLUMNS = ["size", "variant", "d_model x heads x layers", "parameters", "training FLOPs", "tokens",
                  "tokens per parameter"]
RATIO_COLUMNS = ["non-embedding parameters", "tokens per non-embedding parameter"]
"""The ladder's columns where its sweep sets tokens_per_parameter (zoo.sweep.token_ratio): the
count that ratio is of, and the ratio each size trained."""


@dataclass
class Scaling:
    against: str
    """compute (training FLOPs) or parameters."""
    multiple: float
    variants: list[VariantFit]
    differences: list[Extrapolated]
    ladder: list[list[str]]
    """Each size and variant: parameters, training FLOPs, tokens, tokens per parameter (means over
    seeds); where the sweep sets tokens_per_parameter, also the ratio it set (ladder_columns)."""
    notes: list[str]
    checks: list[Checked] = field(default_factory=list)
    multipliers: list[Multiplier] = field(default_factory=list)
    """Each difference's joint law (one E, one exponent): the compute one variant is worth of the other."""
    ladder_columns: list[str] = field(default_factory=lambda: list(LADDER_COLUMNS))


def x_of(record: RunRecord, against: str) -> float | None:
    value = record.flops if against == "compute" else record.parameters
    return None if value is None else float(value)


def equivalence_bound(per_seed: np.ndarray) -> float:
    """The narrowest margin m for which two one-sided t-tests at 5% call the per-seed values level
    within ±m: the larger end of their 90% t-interval, in size (nan under 2 seeds)."""
    interval = Estimate.of(per_seed, level=0.90)
    return max(abs(interval.low), abs(interval.high)) if interval.n >= 2 else math.nan


def law_verdict(at_target: Interval, change: Interval, sign: float, cross: float | None,
                bound: float = math.nan, margin: float | None = None) -> str:
    """reverses, grows or shrinks where separated; level within a declared margin where two
    one-sided t-tests on the change exclude it (the change's 90% interval inside ±margin); else
    not separated (inconclusive), with the narrowest margin the change's seeds could call level."""
    where = f"; the curves cross at {cross:.3g}" if cross is not None else ""
    if change.seeds < 2:
        return "no verdict: fewer than 2 seeds fitted, so no interval" + where
    if at_target.excludes_zero() and np.sign(at_target.mean) == -sign:
        return "reverses" + where
    if change.low > 0:
        return "grows" + where
    if change.high < 0:
        return ("shrinks" if at_target.excludes_zero() else "shrinks, to no separation") + where
    if margin is not None and bound < margin:
        return (f"holds: the change is level within ±{margin:g} (two one-sided t-tests at 5%: its 90% interval lies "
                f"inside ±{bound:.3g})") + where
    declared = "not level within the declared ±" + f"{margin:g}; " if margin is not None else ""
    return (f"not separated (inconclusive): the change is not separated from zero; {declared}its seeds exclude no "
            f"margin narrower than ±{bound:.3g}") + where


def difference(label: str, a: VariantFit, b: VariantFit, multiple: float,
               margin: float | None = None) -> Extrapolated | None:
    laws_a, laws_b = a.laws, b.laws
    seeds = sorted(set(laws_a) & set(laws_b))
    if not seeds:
        return None
    xs = [x for v in (a, b) for _, x, _ in v.points]
    largest, smallest = max(xs), min(xs)
    target = multiple * largest

    def gaps(c: float | np.ndarray) -> np.ndarray:
        """Each seed's d(c) = L_b(c) - L_a(c), one row per seed."""
        return np.array([laws_b[s](c) - laws_a[s](c) for s in seeds], dtype=float)

    now, far = gaps(largest), gaps(target)
    at_largest, at_target = over_seeds(now), over_seeds(far)
    sign = float(np.sign(at_largest.mean)) or 1.0
    change = over_seeds(sign * (far - now))
    cross = crossing(lambda c: gaps(c).mean(axis=0), smallest, 100 * target)
    return Extrapolated(label, largest, target, at_largest, at_target, change, cross,
                        law_verdict(at_target, change, sign, cross, equivalence_bound(sign * (far - now)), margin))


def scaling(sweep: Comparison, records: Sequence[RunRecord]) -> Scaling | None:
    """The fits of a sweep over sizes (None without a size key)."""
    sizes = size_keys(sweep)
    if not sizes:
        return None
    settings = sweep.fit_settings
    against, multiple = settings.against, settings.extrapolate
    notes: list[str] = []
    held = list(settings.check)
    count = math.prod(len(sweep.grid[key]) for key in sizes) - len(held)
    resolved = sweep.resolved_metric
    if count < MIN_POINTS:
        beside = f" beside the {len(held)} held out" if held else ""
        notes.append(f"no fit: {count} sizes{beside}; a power law with an irreducible term needs {MIN_POINTS} or more")
    if resolved.goal != "min":
        notes.append(f"no fit: {sweep.metric} rises with compute (goal max); the power law fits a metric that falls "
                     "towards a floor, such as a loss")
    if by_comparison(sweep.metric):  # its records are the comparison's, with no compute or shape of their own
        notes.append(f"no fit: {sweep.metric} is computed over several runs (one at each tuned rate), not reached by "
                     "one run at its compute; the power law fits a metric that one run's training lowers")
        return Scaling(against, multiple, [], [], [], notes, ladder_columns=ladder_columns(sweep))
    others = [key for key in sweep.grid if key not in sizes]
    labels = sweep.labels()
    variants: dict[tuple, VariantFit] = {}
    uncounted = 0
    for record in records:
        if record.status != "finished" or record.assignment is None:
            continue
        value, x = final_value(record, sweep.metric), x_of(record, against)
        if value is None or not math.isfinite(value):
            continue
        if x is None:
            uncounted += 1
            continue
        key = tuple(record.assignment[k] for k in others)
        variant = variants.setdefault(key, VariantFit(
            assignment_text(labels, ((k, v) for k, v in zip(others, key, strict=True))) or "every run",
            dict(zip(others, key, strict=True))))
        size = next((record.assignment[k] for k in sizes if record.assignment[k] in held), None)
        if size is None:
            variant.points.append((record.seed, x, value))
        else:
            variant.held_out.setdefault(size, []).append((record.seed, x, value))
    if uncounted:
        notes.append(f"{uncounted} finished runs left out: their {against} was not counted (a part without "
                     "forward_flops, or a resume from a checkpoint that did not count it)")
    ladder = ladder_rows(sweep, records, sizes, others)
    if any(note.startswith("no fit") for note in notes):
        return Scaling(against, multiple, list(variants.values()), [], ladder, notes,
                       ladder_columns=ladder_columns(sweep))
    floor = resolved.bounds[0]
    for variant in variants.values():
        for seed, points in sorted(variant.by_seed().items()):
            variant.fits[seed] = fit_power_law([x for x, _ in points], [y for _, y in points], floor)
    differences, checks, multipliers = [], [], []
    for key in others:
        values = sweep.grid[key]
        rest = [k for k in others if k != key]
        for fixed in itertools.product(*(sweep.grid[k] for k in rest)):
            given = dict(zip(rest, fixed, strict=True))
            at = " (" + assignment_text(labels, given.items()) + ")" if given else ""
            reference = variants.get(tuple({**given, key: values[0]}[k] for k in others))
            for value in values[1:]:
                other = variants.get(tuple({**given, key: value}[k] for k in others))
                if reference is None or other is None:
                    continue
                label = f"{labels[key]}: {value_text(value)} − {value_text(values[0])}{at}"
                found = difference(label, reference, other, multiple, sweep.margin)
                multipliers.append(multiplier(label, reference.label, other.label, reference.by_seed(), other.by_seed(), floor))
                if found is not None:
                    differences.append(found)
                    checks += [c for size in held if (c := checked_difference(label, reference, other, size))]
    checks = [*(c for v in variants.values() for size in held if (c := checked_variant(v, size))), *checks]
    return Scaling(against, multiple, list(variants.values()), differences, ladder, notes, checks, multipliers,
                   ladder_columns(sweep))


def predictions(variant: VariantFit, size: Any) -> dict[int, tuple[float, float]]:
    """seed -> (predicted, measured) at a held-out size, for the seeds with a law and a run there."""
    return {seed: (float(variant.laws[seed](x)), y) for seed, x, y in variant.held_out.get(size, [])
            if seed in variant.laws}


def checked(label: str, size: Any, pairs: list[tuple[float, float]]) -> Checked | None:
    if not pairs:
        return None
    return Checked(label, size, over_seeds([p for p, _ in pairs]), over_seeds([m for _, m in pairs]),
                   over_seeds([m - p for p, m in pairs]))


def checked_variant(variant: VariantFit, size: Any) -> Checked | None:
    return checked(variant.label, size, list(predictions(variant, size).values()))


def checked_difference(label: str, a: VariantFit, b: VariantFit, size: Any) -> Checked | None:
    at_a, at_b = predictions(a, size), predictions(b, size)
    return checked(label, size, [(at_b[s][0] - at_a[s][0], at_b[s][1] - at_a[s][1]) for s in sorted(set(at_a) & set(at_b))])


def mean_known(values: list[float | None]) -> float:
    """The mean of the values recorded (nan where none was)."""
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else math.nan


def ladder_rows(sweep: Comparison, records: Sequence[RunRecord], sizes: list[str], others: list[str]) -> list[list[str]]:
    """Each size and variant: parameters, training FLOPs, tokens and tokens per parameter, means over
    the finished runs."""
    labels, rows = sweep.labels(), []
    groups: dict[tuple, list[RunRecord]] = {}
    for record in records:
        if record.status == "finished" and record.assignment is not None:
            groups.setdefault(tuple(record.assignment[k] for k in [*sizes, *others]), []).append(record)

    def place(key: tuple) -> tuple:  # the grid's order: each size, then each variant
        return tuple(sweep.grid[k].index(v) if v in sweep.grid[k] else len(sweep.grid[k])
                     for k, v in zip([*sizes, *others], key, strict=True))

    for key, runs in sorted(groups.items(), key=lambda item: place(item[0])):
        parameters, flops = mean_known([r.parameters for r in runs]), mean_known([r.flops for r in runs])
        tokens = mean_known([r.tokens for r in runs])
        rows.append([assignment_text(labels, zip(sizes, key[: len(sizes)], strict=True)),
                     assignment_text(labels, zip(others, key[len(sizes):], strict=True)) or "every run",
                     shape(runs[0]), f"{parameters:,.0f}", f"{flops:.3g}", f"{tokens:,.0f}", f"{tokens / parameters:.1f}",
                     *(ratio_cells(runs[0], tokens) if sweep.design.tokens_per_parameter else [])])
    return rows


def ladder_columns(sweep: Comparison) -> list[str]:
    """The ladder table's columns: a ladder whose sweep sets tokens_per_parameter also shows the
    count that ratio is of and the ratio each size trained."""
    return [*LADDER_COLUMNS, *(RATIO_COLUMNS if sweep.design.tokens_per_parameter else [])]


def ratio_cells(record: RunRecord, tokens: float) -> list[str]:
    """The non-embedding parameters of the run's model (zoo.sweep.token_ratio) and the tokens it
    trained per one of them; `—` where its recorded experiment does not say its model."""
    from zoo.model.size_checks import non_embedding_parameters
    from zoo.sweep.token_ratio import STAND_IN_VOCABULARY

    model = recorded_model(record)
    if model is None:
        return ["—", "—"]
    counted = non_embedding_parameters(model.sized(STAND_IN_VOCABULARY, STAND_IN_VOCABULARY))
    return [f"{counted:,}", f"{tokens / counted:.1f}"]


def recorded_model(record: RunRecord) -> ModelRecipe | None:
    """The model a run trained, from its recorded experiment; None where it records none."""
    try:
        return ModelRecipe.model_validate((record.experiment or {})["model"])
    except (KeyError, ValueError, ValidationError):
        return None


def shape(record: RunRecord) -> str:
    """`d_model x heads x layers` of the model a run trained (its recorded experiment), or `—`."""
    model = recorded_model(record)
    if model is None:
        return "—"
    layers = "+".join(str(depth) for depth in model.depths if depth)
    return f"{model.d_model} x {model.n_heads} x {layers}"
