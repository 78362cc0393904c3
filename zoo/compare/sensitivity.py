"""Learning-rate sensitivity (Wortsman et al. 2023, "Small-scale proxies for large-scale
Transformer training instabilities"): over the tried rates, the mean gap of a run's final loss to
its best, with a diverged run (and any loss above it) counted at the initial loss. One value per
variant and seed, over that seed's runs (the same initialization at every rate), so variants are
compared paired by seed with intervals and Holm as any metric is. A seed on which no rate trained
below the initial loss (every rate diverged, say) has no best to measure a gap to: its gap would
be 0, the flattest of all, so it counts as diverged instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from zoo.compare.comparison import Comparison
from zoo.compare.stats import Band
from zoo.compare.tuned import TunedChoice, grid_variant, tuned_values
from zoo.records import RunRecord
from zoo.sweep.keys import rate_keys
from zoo.sweep.question import declaration, declaration_changes

LOSS = "eval/loss"
"""The loss whose dependence on the rate is measured: the final validation loss, as the paper's."""
SENSITIVITY = "lr_sensitivity"
"""The metric name the per-seed sensitivities are compared under."""


def learning_rate_keys(sweep: Comparison) -> list[str]:
    """The tuned keys that are learning rates (`train.optimizer.lr`, or any key ending in `.lr`)."""
    return rate_keys(sweep.tune)


@dataclass
class RateCurve:
    """One variant's capped final loss at each tried rate, over seeds."""

    variant: str
    rates: list[float]
    bands: list[Band | None]
    diverged: list[int]
    """Runs that diverged, failed or ended non-finite at each rate: counted at the initial loss."""


def initial_loss(runs: dict[Any, RunRecord]) -> float | None:
    """The seed's initial loss (step 1's training loss, the same at every rate), where a run recorded it."""
    return next((r.first_loss for r in runs.values() if r.first_loss is not None), None)


def capped_losses(runs: dict[Any, RunRecord], rates: list[Any]) -> list[float] | None:
    """Each rate's final loss, min(loss, initial loss), with a diverged or failed run at the
    initial loss; None where a rate has no run yet or no run of the seed knows its initial loss."""
    initial = initial_loss(runs)
    if initial is None or any(rate not in runs for rate in rates):
        return None
    out = []
    for rate in rates:
        run = runs[rate]
        loss = run.metrics.get(LOSS) if run.status == "finished" else None
        out.append(initial if loss is None or not math.isfinite(loss) else min(loss, initial))
    return out


def seed_runs(sweep: Comparison, records: list[RunRecord], choice: TunedChoice, key: str) -> dict[int, dict[Any, RunRecord]]:
    """The variant's runs by seed and rate, its other tuned keys at their chosen values."""
    out: dict[int, dict[Any, RunRecord]] = {}
    for record in records:
        values = tuned_values(sweep, record)
        if grid_variant(sweep, record.assignment) != choice.variant:
            continue
        if any(values[k] != v for k, v in choice.chosen.items() if k != key):
            continue
        out.setdefault(record.seed, {})[values[key]] = record
    return out


def question_of(sweep: Comparison, runs: dict[Any, RunRecord]) -> dict | None:
    """The question a seed's runs were trained under, which its sensitivity carries: one that
    differs from the sweep file's declaration now where any run's does (the comparison is then
    exploratory), else the one they recorded (None where none did)."""
    now, recorded = declaration(sweep.design), [run.declared for run in runs.values() if run.declared is not None]
    return next((said for said in recorded if declaration_changes(said, now)), recorded[0] if recorded else None)


def sensitivities(sweep: Comparison, records: list[RunRecord], choices: list[TunedChoice],
                  key: str) -> tuple[list[RunRecord], list[RateCurve], list[str]]:
    """Each (variant, seed)'s sensitivity as a record of the variant (metric SENSITIVITY), each
    variant's curve over the rates, and notes on seeds left out (a rate not trained yet)."""
    rates = list(sweep.tune[key])
    order = sorted(range(len(rates)), key=lambda i: rates[i])
    measured, curves, notes = [], [], []
    for choice in choices:
        per_rate: list[list[float]] = [[] for _ in rates]
        diverged = [0] * len(rates)
        for seed, runs in sorted(seed_runs(sweep, records, choice, key).items()):
            losses = capped_losses(runs, rates)
            if losses is None:
                notes.append(f"{choice.variant}, seed {seed}: left out of the LR sensitivity (a rate not trained yet, "
                             "or no initial loss recorded)")
                continue
            cell = {"variant": choice.variant, "seed": seed, "cell": f"{choice.variant},seed={seed}",
                    "assignment": dict(choice.assignment), "declared": question_of(sweep, runs),
                    "parameters": next((run.parameters for run in runs.values() if run.parameters), None)}
            if min(losses) >= initial_loss(runs):
                measured.append(RunRecord(status="diverged", error="no rate trained below the initial loss (diverged, "
                                          "failed or flat at every rate): no sensitivity to measure", **cell))
            else:
                measured.append(RunRecord(status="finished", metrics={SENSITIVITY: float(np.mean(losses) - min(losses))},
                                          **cell))
            for i, (rate, loss) in enumerate(zip(rates, losses, strict=True)):
                per_rate[i].append(loss)
                run = runs[rate]
                diverged[i] += run.status != "finished" or not math.isfinite(run.metrics.get(LOSS, math.nan))
        curves.append(RateCurve(choice.variant, [float(rates[i]) for i in order],
                                [Band.of(0, per_rate[i]) if per_rate[i] else None for i in order],
                                [diverged[i] for i in order]))
    return measured, curves, notes


def sensitivity_sweep(compared: Comparison) -> Comparison:
    """The comparison sweep with the sensitivity as its metric (lower: flatter in the rate)."""
    return compared.asking(SENSITIVITY)
