"""`zoo reproduce LEDGER [CELL...]`: train recorded cells again, in a temporary folder, with the
thread count and the kind of device each was recorded with, and give each cell a verdict.

Where everything that decides the rounding is the recorded one (zoo.provenance.ROUNDING: torch,
its CPU capability, the CPU's vendor, family and model, the BLAS; and the thread count), a run is a
function of its experiment, its data and the code: every final metric must be the same to the last
bit. Elsewhere kernels round otherwise and training amplifies it, most in post-norm models: the
final metrics move by tens of percent and cannot tell a change of the code from another machine.
The first steps can. To step 20, another CPU capability moved the logged losses of the most
sensitive cell of each published ledger by at most 1.5e-5 relative, while a change of the loss or of
the initialization moved the same losses by 3.9e-4 and more (experiments/benchmarks/rounding.py).
So elsewhere the verdict is the first loss and the losses logged to step EARLY_STEPS (or to the
first logged step, where that is later) within EARLY_TOLERANCE. Where they are not, the cell is
trained once more here with another rounding (zoo.sweep.retrain.other_rounding): if that alone moves
its early losses past the tolerance, no tolerance tells a change of the code from another machine
for this cell, and the verdict says so (inconclusive) instead of DIFFERS.

Every recorded number a comparison reads is compared: the final metrics, the first loss (LR
sensitivity's initial loss) and, trained whole, the whole logged history. In the recorded
environment each must be the same float. Elsewhere a whole run's final metrics are judged three
ways. A final metric the record's own learning curve holds too (the last evaluation, a curve's
mean) must agree with it to the bit, whatever the machine: an edit is found there. Each final
metric may differ from the record by FINAL_FACTOR times what other roundings here moved it (the
whole run trained once more under each, zoo.sweep.retrain.other_roundings, until the metrics are
within it), and by FINAL_FLOOR at least; a test metric, which no curve holds, also by SPLIT_FACTOR
times what its validation twin moved. Past that, a metric its curve vouches for is INCONCLUSIVE
(another CPU vendor moved a published cell's eval_auc/exact_match 11 times further than one other
rounding here: no sample bounds it), and one no curve vouches for DIFFERS.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from zoo.errors import ConfigError, ZooError
from zoo.metric_names import MetricName
from zoo.records import RunRecord
from zoo.records.ledger import Ledger
from zoo.specs.experiment import parse_sets, with_sets
from zoo.sweep.record_differences import (
    added_since,
    contradictions,
    early_differences,
    environment_changes,
    experiment_changes,
    first_loss_difference,
    history_differences,
    logged_losses,
    metric_differences,
    relative_difference,
    scorer_differences,
    vouched,
)
from zoo.sweep.retrain import other_rounding, other_roundings, retrain
from zoo.sweep.spec import SweepSpec, cell_experiment, confirmation_cells, expand, read_saved_sweep
from zoo.sweep.warm_retrain import warm_children

EARLY_STEPS = 20
"""The early window: the losses logged to this step (or to the first logged step, if later)."""

EARLY_TOLERANCE = 1e-4
"""The largest relative difference of a logged loss in the early window that another environment
may cause: measured across CPU capabilities on the most sensitive cell of each published ledger,
1.5e-5 at most (a post-norm cell under DEFAULT); a changed initialization or loss moved the same
losses by 3.9e-4 and more. Between the two, nearer the code changes' side where a machine's
rounding can only be sampled."""

FINAL_FACTOR = 10.0
"""Elsewhere, a final metric may differ from its record by this many times what another rounding
here alone moved it: one sample of the rounding's spread, so a wide margin for it."""
FINAL_FLOOR = 1e-3
"""... and by this relative difference at least, where another rounding here happened to move it
less (or not at all)."""
SPLIT_FACTOR = 3.0
"""A final metric its learning curve does not vouch for (test/X) may move by this many times what
the same metric moved on the validation split (eval/X, which the record's curve vouches for): the
same model scored on another held-out split, so another machine moves both alike."""


@dataclass
class Reproduction:
    cell: str
    differences: list[str] = field(default_factory=list)
    """What is not the same float: every final metric, or with `early`, every early loss."""
    environment: list[str] = field(default_factory=list)
    """How the rounding's environment differs from the recorded one (empty: the recorded one)."""
    error: str | None = None
    early_gap: float | None = None
    """The largest relative difference of a logged loss in the early window."""
    early_steps: int = 0
    relative: dict[str, float] = field(default_factory=dict)
    """Each final metric's relative difference from the record (empty with `early`)."""
    added: list[str] = field(default_factory=list)
    """Final metrics of a metric the zoo gained after the record was made: shown, not compared."""
    early: bool = False
    """Only the early window was trained again."""
    rounding: str = ""
    """Where the early gap passed the tolerance elsewhere: the other rounding tried here, and ..."""
    rounding_gap: float | None = None
    """... how far it alone moved the early losses, ..."""
    amplified_at: int | None = None
    """... and the first logged step at which that passed the tolerance (None: it never did)."""
    owed: dict[str, float] = field(default_factory=dict)
    """Elsewhere, trained whole: each final metric's relative difference the environment owes it."""
    vouched: list[str] = field(default_factory=list)
    """Elsewhere, trained whole: the final metrics the record's own learning curve holds too."""
    contradicted: list[str] = field(default_factory=list)
    """... and each that the curve gives otherwise: an edit, in any environment."""

    @property
    def matches(self) -> bool:
        """Every compared number the same to the last bit."""
        return not self.differences and self.error is None

    @property
    def agrees(self) -> bool:
        """Bit for bit, or, in another environment, the early losses within EARLY_TOLERANCE."""
        if self.error is not None:
            return False
        if self.matches or not self.environment:
            return self.matches
        return self.early_agrees and not self.contradicted and not self.beyond_owed

    @property
    def early_agrees(self) -> bool:
        return self.early_gap is not None and self.early_gap <= EARLY_TOLERANCE

    @property
    def beyond_owed(self) -> list[str]:
        """Elsewhere, trained whole: the final metrics further from their record than the environment owes."""
        return [key for key, owed in self.owed.items() if self.relative.get(key, math.inf) > owed]

    @property
    def edited(self) -> list[str]:
        """Of those, the ones no learning curve vouches for: beyond what rounding moves, an edit."""
        return [key for key in self.beyond_owed if key not in self.vouched]

    @property
    def inconclusive(self) -> bool:
        """Elsewhere: past the tolerance where another rounding here passes it as well; or the early
        losses within it and the record agreeing with its own learning curve, but a final metric
        that curve vouches for moved further than the roundings sampled here (another CPU vendor or
        generation can: no sample bounds it), and no other beyond what its environment owes."""
        if self.agrees or self.error is not None or not self.environment:
            return False
        past = self.early_gap is None or self.early_gap > EARLY_TOLERANCE
        amplified = self.amplified_at is not None and past
        return amplified or (self.early_agrees and not self.contradicted and not self.edited)


def early_window(history: list[dict[str, float]]) -> int:
    """The last step of the early window: EARLY_STEPS, or the first step a loss was logged at."""
    steps = [step for step, _ in logged_losses(history)]
    return max(EARLY_STEPS, min(steps)) if steps else EARLY_STEPS


def step_gaps(recorded: list[dict[str, float]], now: list[dict[str, float]], until: int) -> dict[int, float] | None:
    """Each logged step to `until` with the largest relative difference of its losses; None where
    the record holds none or the two logged other steps."""
    old, new = logged_losses(recorded, until), logged_losses(now, until)
    if not old or old.keys() != new.keys():
        return None
    gaps: dict[int, float] = {}
    for (step, key), value in old.items():
        gaps[step] = max(gaps.get(step, 0.0), relative_difference(value, new[(step, key)]))
    return gaps


def early_curve_gap(recorded: list[dict[str, float]], now: list[dict[str, float]],
                    until: int | None = None) -> tuple[float, int] | None:
    """(largest relative difference, last step compared) of the losses logged in the early window."""
    gaps = step_gaps(recorded, now, early_window(recorded) if until is None else until)
    return None if gaps is None else (max(gaps.values()), max(gaps))


def recorded_cells(ledger_path: Path, sets: Sequence[str]) -> tuple[SweepSpec, dict[str, Any], dict[str, Any]]:
    """The sweep beside the ledger, its base with `--set task.*` applied, and each finished cell's
    (Cell, record) by name."""
    folder = ledger_path.parent
    if not ledger_path.exists():
        raise ConfigError(f"{ledger_path}: no such ledger")
    if not (folder / "sweep.yaml").is_file():
        raise ConfigError(f"{folder}: no sweep.yaml beside the ledger; zoo reproduce needs the sweep it records")
    bad = [key for key, _ in parse_sets(sets) if not key.startswith("task.")]
    if bad:
        raise ConfigError(f"zoo reproduce --set {', '.join(bad)}: only task.* (where the data is) may change")
    sweep, base = read_saved_sweep(folder)
    base = with_sets(base, sets)
    cells = {cell.name: cell for cell in [*expand(sweep), *confirmation_cells(sweep)]}
    latest, _ = Ledger(ledger_path).read().of_cells(list(cells.values()))
    return sweep, base, {name: (cells[name], r) for name, r in latest.items() if r.status == "finished"}


def damage(ledger_path: Path) -> str:
    """Where a cell may be missing because its line is damaged: the damaged lines, to say beside it."""
    damaged = Ledger(ledger_path).read().damaged
    if not damaged:
        return ""
    shown = "; ".join(f"line {number}: {problem}" for number, problem in damaged[:3])
    return (f" ({len(damaged)} damaged line(s) of the ledger were left out, which may be that cell's: {shown}"
            f"{'; ...' if len(damaged) > 3 else ''})")


def sensitive_cell(ledger_path: str | Path) -> str:
    """The finished cell whose early losses round most sensitively, by rule rather than by choice:
    the first in grid order with post-norm (which amplifies rounding most), else the first."""
    _, _, finished = recorded_cells(Path(ledger_path), [])
    ordered = sorted(finished, key=lambda n: finished[n][0].index)
    if not ordered:
        raise ConfigError(f"{ledger_path} holds no finished cell{damage(Path(ledger_path))}")
    return next((name for name in ordered if "norm=post" in name.split(",")), ordered[0])


def reproduce(ledger_path: str | Path, names: Sequence[str] = (), sets: Sequence[str] = (),
              echo: Callable[[str], None] = print, early: bool = False,
              replay: str | Path | None = None) -> list[Reproduction]:
    """Re-run the named finished cells (default: all), whole or with `early` their early window
    only, and compare each with its record; with `replay`, one cell's early window from the batches
    recorded for it (zoo.sweep.replay), where its corpus is not."""
    if replay is not None and not (early and len(names) == 1):
        raise ConfigError("zoo reproduce --replay: a replay holds one cell's early window; give --early and that cell")
    sweep, base, finished = recorded_cells(Path(ledger_path), sets)
    for line in Ledger(ledger_path).read().repeated_results(Path(ledger_path)):
        if any(f"cell {name} has" in line for name in names or finished):
            echo(line)
    unknown = [name for name in names if name not in finished]
    if unknown:
        shown = ", ".join(sorted(finished)[:6]) + (", ..." if len(finished) > 6 else "")
        raise ConfigError(f"zoo reproduce: no finished cell {unknown[0]!r} in {ledger_path}; finished cells: {shown}"
                          f"{damage(Path(ledger_path))}")
    if not finished:
        raise ConfigError(f"zoo reproduce: {ledger_path} holds no finished cell of its sweep's grid: nothing to "
                          f"reproduce{damage(Path(ledger_path))}")
    out = []
    with tempfile.TemporaryDirectory(prefix="zoo-reproduce-") as scratch, warm_children():
        for name in names or sorted(finished, key=lambda n: finished[n][0].index):
            cell, record = finished[name]
            result = rerun(cell_experiment(sweep, base, cell).model_dump(mode="json"), record, Path(scratch), early,
                           replay)
            out.append(result)
            echo(describe(result))
    echo(summary(out))
    return out


def summary(results: list[Reproduction]) -> str:
    elsewhere = sum(r.agrees and not r.matches for r in results)
    unsure = sum(r.inconclusive for r in results)
    return (f"{sum(r.matches for r in results)} of {len(results)} cells reproduce bit for bit"
            + (f"; {elsewhere} more agree within another environment's tolerance" if elsewhere else "")
            + (f"; {unsure} inconclusive" if unsure else ""))


def rerun(experiment: dict[str, Any], record: RunRecord, scratch: Path, early: bool = False,
          replay: str | Path | None = None) -> Reproduction:
    """Train the cell's experiment in `scratch` with the recorded thread count, on the CPU where the
    record was made on one (W&B off: logging changes no number), and compare it with the record."""
    name = experiment["wandb"]["name"]
    if not record.metrics:
        return Reproduction(name, error="its record holds no final metric, so nothing could be compared")
    changed = experiment_changes(record.experiment, experiment)
    if changed:
        return Reproduction(name, error=f"the experiment its sweep file gives is not the one it ran ({'; '.join(changed[:6])}"
                                        f"{'; ...' if len(changed) > 6 else ''}): restore the file, or sweep the change "
                                        "as a new sweep")
    recorded = record.environment or {}
    if recorded.get("device", "").startswith("cpu"):
        experiment["train"]["device"] = "cpu"  # not the GPU that `auto` would pick here
    threads = record.threads or torch.get_num_threads()
    window = early_window(record.history)
    replay = Path(replay).resolve() if replay else None
    try:
        now = retrain(experiment, threads, scratch, until=window if early else None, replay=replay)
    except ZooError as err:
        return Reproduction(name, error=str(err))
    outcome = Reproduction(name, early=early, environment=environment_changes(recorded, now.environment or {}))
    first = first_loss_difference(record.first_loss, now.first_loss)
    if early:
        outcome.differences = [*first, *early_differences(record.history, now.history, window)]
    else:
        outcome.added = added_since(record.metrics, record.scorers, now.metrics)
        outcome.differences = [*metric_differences(record.metrics, now.metrics, outcome.added),
                               *scorer_differences(record.scorers, now.scorers), *first,
                               *history_differences(record.history, now.history)]
        outcome.relative = {key: relative_difference(old, now.metrics.get(key, math.nan)) for key, old in record.metrics.items()}
        if now.steps != record.steps:
            outcome.differences.append(f"steps: {record.steps} recorded, {now.steps} now")
    gap = early_curve_gap(record.history, now.history, window) if early or now.steps == record.steps else None
    if gap is not None and record.first_loss is not None:  # the first loss is the earliest loss of all
        gap = (max(gap[0], relative_difference(record.first_loss, now.first_loss if now.first_loss is not None
                                               else math.nan)), gap[1])
    outcome.early_gap, outcome.early_steps = gap if gap is not None else (None, 0)
    if outcome.environment and not outcome.matches and outcome.early_gap is not None:
        if not early:
            outcome.vouched, outcome.contradicted = list(vouched(record)), contradictions(record)
            measure_final_rounding(outcome, record, experiment, threads, scratch, now, window, replay)
        elif not outcome.agrees:
            measure_rounding(outcome, experiment, threads, scratch, now, window, replay)
    return outcome


def measure_rounding(outcome: Reproduction, experiment: dict[str, Any], threads: int, scratch: Path, now: RunRecord,
                     window: int, replay: Path | None) -> None:
    """Train the early window once more with another rounding here: how far rounding alone moves
    this cell's early losses, and the first step where that passes the tolerance."""
    variables, outcome.rounding = other_rounding(threads)
    try:
        probe = retrain(experiment, threads, scratch, until=window, environment=variables, replay=replay)
    except ZooError as err:
        outcome.rounding += f" (it failed: {err})"
        return
    gaps = step_gaps(now.history, probe.history, window) or {}
    outcome.rounding_gap = max(gaps.values(), default=None)
    outcome.amplified_at = next((step for step in sorted(gaps) if gaps[step] > EARLY_TOLERANCE), None)


def measure_final_rounding(outcome: Reproduction, record: RunRecord, experiment: dict[str, Any], threads: int,
                           scratch: Path, now: RunRecord, window: int, replay: Path | None) -> None:
    """Elsewhere, trained whole: train the whole run once more under other roundings this machine
    can run (zoo.sweep.retrain.other_roundings), and owe each final metric FINAL_FACTOR times the
    most any of them moved it (FINAL_FLOOR at least); a test metric also SPLIT_FACTOR times what its
    validation twin moved from the record. The roundings are tried one after another until every
    final metric is within what is owed (a further sample only widens it) or all were tried: one
    draw does not bound what another machine moves a metric. A probe that fails adds nothing."""
    probes, said = [], []
    for variables, text in other_roundings(threads):
        try:
            probes.append(retrain(experiment, threads, scratch, environment=variables, replay=replay))
            said.append(text)
        except ZooError as err:
            said.append(f"{text} (it failed: {err})")
        owe(outcome, record, now, probes)
        if not outcome.beyond_owed:
            break
    outcome.rounding = ", ".join(said)
    gaps: dict[int, float] = {}
    for probe in probes:
        for step, gap in (step_gaps(now.history, probe.history, window) or {}).items():
            gaps[step] = max(gaps.get(step, 0.0), gap)
    outcome.rounding_gap = max(gaps.values(), default=None)
    outcome.amplified_at = next((step for step in sorted(gaps) if gaps[step] > EARLY_TOLERANCE), None)


def owe(outcome: Reproduction, record: RunRecord, now: RunRecord, probes: list[RunRecord]) -> None:
    """Each final metric's owed relative difference from the roundings tried so far."""
    for key in record.metrics:
        moved = max((relative_difference(now.metrics.get(key, math.nan), probe.metrics.get(key, math.nan))
                     for probe in probes), default=0.0)
        outcome.owed[key] = max(FINAL_FACTOR * moved, FINAL_FLOOR)
        twin = str(MetricName.parse(key).on("eval"))
        if key not in outcome.vouched and twin in outcome.vouched and twin in outcome.relative:
            outcome.owed[key] = max(outcome.owed[key], SPLIT_FACTOR * outcome.relative[twin])


def describe(result: Reproduction) -> str:
    """The cell's verdict, and the metrics the zoo gained since its record, which it could not compare."""
    verdict = outcome_text(result)
    if result.added and result.error is None:
        names = sorted({MetricName.parse(key).metric for key in result.added})
        verdict += f" (not in the record, so not compared: {', '.join(names)}, metrics the zoo gained since)"
    return verdict


def outcome_text(result: Reproduction) -> str:
    if result.error is not None:
        return f"{result.cell}: NOT REPRODUCED: {result.error}"
    what = f"the losses logged to step {result.early_steps}" if result.early else "every final metric"
    if result.matches:
        return f"{result.cell}: {what} {'match' if result.early else 'matches'} bit for bit"
    if not result.environment:
        return f"{result.cell}: DIFFERS in the recorded environment: {'; '.join(result.differences)}"
    where = f"another environment ({'; '.join(result.environment)})"
    spread = "" if result.early else "; final metrics' relative differences: " + ", ".join(
        f"{key} {value:.2g}" + (f" (owed {result.owed[key]:.2g})" if key in result.owed else "")
        for key, value in result.relative.items())
    if result.early_gap is None:
        return f"{result.cell}: DIFFERS, in {where}, and the record holds no learning curve to compare{spread}"
    curve = (f"the losses logged to step {result.early_steps} are within {result.early_gap:.2g} of the record "
             f"(tolerance {EARLY_TOLERANCE:g})")
    if result.agrees:
        return f"{result.cell}: agrees in {where}: {curve}{spread}"
    if result.contradicted:
        return (f"{result.cell}: DIFFERS: the record contradicts its own learning curve ({'; '.join(result.contradicted)}):"
                f" no run writes that, whatever the machine{spread}")
    if result.early_agrees and result.edited:
        one = len(result.edited) == 1
        return (f"{result.cell}: DIFFERS beyond {where}'s rounding: {curve}, but {', '.join(result.edited)} "
                f"{'is' if one else 'are'} further from the record than {FINAL_FACTOR:g} times what the other roundings "
                f"here ({result.rounding}) moved {'it' if one else 'them'}, and than {SPLIT_FACTOR:g} times what "
                f"{'its' if one else 'their'} validation twin moved{spread}")
    if result.early_agrees and result.beyond_owed:
        moved = ", ".join(result.beyond_owed)
        return (f"{result.cell}: INCONCLUSIVE in {where}: {curve}, and the record agrees with its own learning curve, "
                f"but {moved} moved further than {FINAL_FACTOR:g} times what the other roundings here "
                f"({result.rounding}) moved it: another CPU vendor or generation can, and no sample here bounds it; "
                f"reproduce on the recorded machine to judge it bit for bit{spread}")
    curve = curve.replace("within", "up to")
    probe = (f"; {result.rounding} here moves them by {result.rounding_gap:.2g}" if result.rounding_gap is not None
             else f"; {result.rounding}" if result.rounding else "")
    if result.inconclusive:
        return (f"{result.cell}: INCONCLUSIVE in {where}: {curve}, and this cell amplifies rounding past the tolerance "
                f"by step {result.amplified_at}{probe}: no tolerance tells a change of the code from another machine "
                f"here{spread}")
    return f"{result.cell}: DIFFERS beyond {where}'s rounding: {curve}{probe}{spread}"
