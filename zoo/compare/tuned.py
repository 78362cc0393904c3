"""A tuned sweep's choice: each variant's tuned value (a learning rate, a warmup) chosen on the
validation metric alone, then the variants compared on a held-out split at the chosen values.

The choice is pooled over seeds: one value per variant, the best mean of `choose_on` over its
seeds, as a user would run the variant: one recipe, whatever the seed. A value where a seed
diverged or failed ranks after every value whose seeds all finished. The test split never
chooses, so its comparison is free of the choice's optimism (the validation means of the chosen
values are not; they are shown as what chose, not as results).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from zoo.compare.comparison import Comparison
from zoo.compare.stats import Estimate, final_value
from zoo.records import RunRecord
from zoo.sweep.names import assignment_text, value_text


@dataclass
class Tried:
    """One tuned value (a value of every tuned key) of one variant: `choose_on` over its seeds."""

    values: dict[str, Any]
    score: Estimate
    bad: int
    """Seeds that diverged, failed or ended non-finite: the value then ranks after every clean one."""
    seeds: list[int]
    cells: list[str]
    """The cells of its runs: for a chosen value, the runs the comparison rests on."""


@dataclass
class TunedChoice:
    variant: str
    """The variant's grid values, without the tuned ones (`norm=pre,ffn=gelu`)."""
    assignment: dict[str, Any]
    chosen: dict[str, Any]
    tried: list[Tried]
    edges: list[str] = field(default_factory=list)
    """`lr=0.003 is the largest value tried`, for each tuned key whose chosen value is at the end of
    its range: the best may lie beyond it ("tune further")."""
    incomplete: bool = False
    """Some tuned value has fewer seeds than the sweep lists (cells missing or still running)."""

    @property
    def best(self) -> Tried:
        return next(t for t in self.tried if t.values == self.chosen)


def grid_variant(sweep: Comparison, assignment: dict[str, Any]) -> str:
    return assignment_text(sweep.labels(), ((key, assignment[key]) for key in sweep.grid))


def as_variant_run(sweep: Comparison, record: RunRecord) -> RunRecord:
    """A run of one tuned value as a run of its variant: its grid values only."""
    return record.model_copy(update={"variant": grid_variant(sweep, record.assignment),
                                     "assignment": {key: record.assignment[key] for key in sweep.grid}})


def tuned_values(sweep: Comparison, record: RunRecord) -> dict[str, Any]:
    return {key: record.assignment[key] for key in sweep.tune}


def rank_key(tried: Tried, goal: str, order: int) -> tuple:
    """Clean values first, then by the mean (the goal's way), then the order the sweep lists them in."""
    mean = tried.score.mean if tried.score.n else math.nan
    scored = math.isfinite(mean)
    return (tried.bad > 0 or not scored, tried.bad, (-mean if goal == "max" else mean) if scored else 0.0, order)


def edge_of(values: list[Any], trained: list[Any], chosen: Any, label: str) -> str | None:
    """Where a chosen value is the smallest or largest of the numeric values trained, the sentence
    that says so (naming values listed but not trained yet, beyond it); categorical values have no
    edge to tune past."""
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return None
    ordered = sorted(set(trained))
    if len(ordered) < 2 or chosen not in (ordered[0], ordered[-1]):
        return None
    end = "smallest" if chosen == ordered[0] else "largest"
    beyond = [v for v in values if (v < chosen if end == "smallest" else v > chosen)]
    untrained = f" ({', '.join(map(value_text, beyond))} listed, not trained yet)" if beyond else ""
    return f"{label}={value_text(chosen)} is the {end} value tried{untrained}"


def choose(sweep: Comparison, records: list[RunRecord]) -> list[TunedChoice]:
    """Each variant's tuned value, chosen on `choose_on`, in the order the grid lists the variants."""
    goal, labels = sweep.resolved_choose_on.goal, sweep.labels()
    combos: dict[str, dict[str, list[RunRecord]]] = {}
    assignments: dict[str, dict[str, Any]] = {}
    for record in records:
        variant = grid_variant(sweep, record.assignment)
        assignments[variant] = {key: record.assignment[key] for key in sweep.grid}
        combos.setdefault(variant, {}).setdefault(value_key(tuned_values(sweep, record)), []).append(record)
    listed = combinations(sweep)
    choices = []
    for variant, by_value in combos.items():
        tried = []
        for values in listed:
            runs = by_value.get(value_key(values), [])
            scores = [final_value(r, sweep.choose_on) for r in runs]
            clean = [v for v in scores if v is not None and math.isfinite(v)]
            tried.append(Tried(values, Estimate.of(clean), len(runs) - len(clean), sorted(r.seed for r in runs),
                               sorted(str(r.cell) for r in runs)))
        present = [(i, t) for i, t in enumerate(tried) if t.seeds]
        _, best = min(present, key=lambda it: rank_key(it[1], goal, it[0]))
        edges = [edge for key, values in sweep.tune.items()
                 if (edge := edge_of(values, [t.values[key] for t in tried if t.seeds], best.values[key],
                                     labels[key])) is not None]
        choices.append(TunedChoice(variant, assignments[variant], best.values, tried, edges,
                              any(len(t.seeds) < len(sweep.seeds) for t in tried)))
    return choices


def value_key(values: dict[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in values.items()))


def combinations(sweep: Comparison) -> list[dict[str, Any]]:
    """Every value of the tuned keys together, in the order the cells expand them."""
    return [dict(zip(sweep.tune, values)) for values in itertools.product(*sweep.tune.values())]


def chosen_records(sweep: Comparison, records: list[RunRecord], choices: list[TunedChoice]) -> list[RunRecord]:
    """The runs of each variant's chosen value, as runs of the variant itself (its grid values
    only): what the comparison of variants pairs by seed."""
    chosen = chosen_keys(choices)
    return [as_variant_run(sweep, record) for record in records if at_choice(sweep, chosen, record.assignment)]


def chosen_keys(choices: list[TunedChoice]) -> dict[str, str]:
    return {c.variant: value_key(c.chosen) for c in choices}


def at_choice(sweep: Comparison, chosen: dict[str, str], assignment: dict[str, Any]) -> bool:
    """Whether a cell's tuned values are those its variant chose (chosen_keys)."""
    return chosen.get(grid_variant(sweep, assignment)) == value_key({key: assignment[key] for key in sweep.tune})


def compared_sweep(sweep: Comparison) -> Comparison:
    """The sweep as its comparison sees it: the grid alone, the tuned keys chosen away (and the
    slope of the best rate, which the question keeps, with them)."""
    return sweep.redesigned(tune={}, confirm_seeds=[], rate_slope_margin=None)


def tuning_runs(sweep: Comparison, records: list[RunRecord]) -> list[RunRecord]:
    """The runs that choose: those of the tuning seeds (a confirmation's never do)."""
    return [r for r in records if r.seed in sweep.seeds]


def compared_runs(sweep: Comparison, records: list[RunRecord], choices: list[TunedChoice]
                  ) -> tuple[Comparison, list[RunRecord], list[str]]:
    """What the variants are compared on, and what to say of it: with confirm_seeds, each chosen
    value's runs on those fresh seeds alone (the seeds that chose never judge); until they ran,
    the tuning seeds' runs, said to be unconfirmed."""
    confirming = [r for r in records if r.seed in sweep.confirm_seeds]
    if confirming:
        stale = unconfirmed(sweep, confirming, choices)
        left_out = (f"; {len(stale)} variant(s) whose choice changed after their confirmation ran are not confirmed "
                    f"and left out ({', '.join(stale)})") if stale else ""
        note = (f"compared on the confirmation seeds {sweep.confirm_seeds} alone: each variant trained again at its "
                f"chosen value; the tuning seeds {sweep.seeds} only chose{left_out}")
        return (compared_sweep(sweep).redesigned(seeds=sweep.confirm_seeds),
                chosen_records(sweep, confirming, choices), [note])
    notes = [f"the choice is not confirmed yet: confirm_seeds {sweep.confirm_seeds} have no runs, so the variants are "
             "compared on the seeds that chose them (optimistic); `zoo sweep` runs the confirmation once every "
             "tuning cell is done"] if sweep.confirm_seeds else []
    return compared_sweep(sweep), chosen_records(sweep, tuning_runs(sweep, records), choices), notes


def unconfirmed(sweep: Comparison, confirming: list[RunRecord], choices: list[TunedChoice]) -> dict[str, str]:
    """The variants whose confirmation runs are all of another value than the one chosen now (the
    tuning grid grew, or a tuning cell was rerun, after the confirmation ran): {variant: what to say}.
    Compared on the confirmation seeds, such a variant has no run; it must be named, never dropped."""
    chosen = chosen_keys(choices)
    said = {}
    for choice in choices:
        runs = [r for r in confirming if grid_variant(sweep, r.assignment) == choice.variant]
        if runs and not any(at_choice(sweep, chosen, r.assignment) for r in runs):
            ran = sorted({assignment_text(sweep.labels(), tuned_values(sweep, r).items()) for r in runs})
            now = assignment_text(sweep.labels(), choice.chosen.items())
            said[choice.variant] = (f"{choice.variant}: not confirmed: its choice is now {now}, and its confirmation "
                                    f"seeds {sweep.confirm_seeds} ran {' and '.join(ran)}; it is left out of the "
                                    f"comparison until `zoo sweep` is run again on this sweep's file, which trains "
                                    f"{now} on the confirmation seeds")
    return said


def tried_text(sweep: Comparison, tried: Tried, chosen: bool) -> str:
    values = assignment_text(sweep.labels(), tried.values.items())
    score = "—" if not tried.score.n else f"{tried.score.mean:.4g}"
    bad = f" ({tried.bad} diverged or failed)" if tried.bad else ""
    return f"{values}: {score}{bad}" + (" ←" if chosen else "")
