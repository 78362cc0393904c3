"""`zoo compare`: the ranked table, the axis effects, PNG plots, a Markdown report, and a W&B run
in the sweep's group that holds the same tables (ranking, effects, curves) and plots next to the runs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from scipy.stats import t as student_t

from zoo.compare.agreement import separates
from zoo.compare.load import read_sweep
from zoo.compare.plots import curves_png, effect_png
from zoo.compare.stats import (
    AxisEffect,
    Estimate,
    SimpleEffect,
    VariantRow,
    axis_effects,
    curve_metric,
    seed_noise,
    simple_effects,
    variant_rows,
)
from zoo.compare.wandb_run import Rows, log_tables
from zoo.files import atomic_write
from zoo.metrics import CURVE, range_of
from zoo.records import RunRecord
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.yamlio import dump_yaml
from zoo.sweep.spec import SweepSpec, value_text
from zoo.trainer.tracking import resolved_mode


@dataclass
class Report:
    rows: list[VariantRow]
    effects: list[AxisEffect]
    simple: list[SimpleEffect]
    table_text: str
    markdown: Path
    plots: list[Path]
    wandb_run: str | None
    effects_text: str = ""
    """Each axis's paired differences with their 95% intervals and p-values, as the console shows them."""
    noise: tuple[float, int] = (math.nan, 0)
    """The metric's seed-to-seed standard deviation within a variant, pooled, and its degrees of freedom."""
    tuning: Any = None
    """A tuned sweep's choice of each variant's values and its LR sensitivity (zoo.compare.tuned_report.Tuning)."""


def number(x: float | None, digits: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


def interval(e: Estimate) -> str:
    return "—" if math.isnan(e.low) else f"[{number(e.low)}, {number(e.high)}]"


def table(sweep: SweepSpec, rows: list[VariantRow]) -> tuple[list[str], list[list[str]]]:
    columns = ["rank", "variant", f"{sweep.metric} mean", "95% CI", "std", "seeds", "parameters"]
    if sweep.target is not None:
        columns += [f"steps to {sweep.target:g}", f"seconds to {sweep.target:g}", "reached", "steps per seed"]
    columns += ["diverged", "failed"]
    data = []
    for rank, row in enumerate(rows, 1):
        mean = f"non-finite ({row.nonfinite} of {row.metric.n})" if row.nonfinite else number(row.metric.mean)
        line = [str(rank), row.variant, mean, interval(row.metric), number(row.metric.std),
                str(row.metric.n), f"{row.parameters:,}" if row.parameters else "—"]
        if sweep.target is not None:
            bound = "≥" if row.reached < len(row.seed_steps) else ""  # a censored seed: the mean is a lower bound
            line += [bound + number(row.steps_to_target), bound + number(row.seconds_to_target, 3),
                     f"{row.reached} of {len(row.seed_steps)}", seed_steps_text(row)]
        line += [str(row.diverged), str(row.failed)]
        data.append(line)
    return columns, data


def seed_steps_text(row: VariantRow) -> str:
    """`180, >240`: each seed's step at the target; `>N` for a seed that ended at step N without it."""
    return ", ".join(f"{step}" if reached else f">{step}" for step, reached in row.seed_steps) or "—"


CENSORED = ("Steps and seconds to {target:g}: the mean over finished seeds of the first evaluation that met it; a "
            "seed that never did counts at its last step (`>N` per seed), so a mean marked ≥ is a lower bound.")


def value_kind(metric: str) -> str:
    """What one run's value of the metric is: an eval_auc metric is no final value."""
    if metric.startswith(CURVE + "/"):
        return f"each run's mean of eval/{metric.split('/', 1)[1]} over its evaluations (the area under its curve)"
    return "each run's final value"


def range_text(metric: str) -> str:
    """How the intervals of a bounded metric are held inside its range, said where they are."""
    low, high = range_of(metric)
    if math.isinf(low) and math.isinf(high):
        return ""
    if math.isinf(high):
        return f", held at {low:g} or more, what `{metric}` can be"
    width = high - low
    return f", held inside what `{metric}` can be: [{low:g}, {high:g}], and a difference inside [{-width:g}, {width:g}]"


def censored_note(sweep: SweepSpec) -> list[str]:
    return [CENSORED.format(target=sweep.target), ""] if sweep.target is not None else []


HOLM = ("p: two-sided paired t-test that the difference is 0. Holm p: adjusted by Holm's step-down method over "
        "all {m} paired differences of the sweep, so that the chance that any of them excludes 0 by chance alone "
        "stays within the level (a difference with Holm p < 0.05 holds at 5% for the whole family).")


def tuned_runs(trained: list[RunRecord]) -> str:
    return f" (each variant's at its chosen value, of {len(trained)} trained)"


def few_seeds_note(rows: list[VariantRow]) -> list[str]:
    """A warning where a variant's interval rests on two seeds: t with one degree of freedom puts its
    95% interval at 12.7 standard errors either side of the mean, wide by construction."""
    two = [row.variant for row in rows if row.metric.n == 2]
    if not two:
        return []
    return [f"{len(two)} of {len(rows)} variants have 2 finished seeds: their 95% intervals are the mean ± "
            f"{student_t.ppf(0.975, 1):.1f} standard errors (t with 1 degree of freedom), wide by construction; "
            "run more seeds to narrow them"]


def noise_line(noise: tuple[float, int]) -> str:
    std, df = noise
    if not df:
        return "Seed-to-seed noise: not measured (no variant has two finished seeds)."
    return (f"Seed-to-seed noise: standard deviation {number(std)} within a variant, pooled over variants ({df} degrees "
            "of freedom): a difference between two variants of the same order is within what a change of seed moves.")


def effect_lines(effects: list[AxisEffect]) -> list[str]:
    lines = []
    for effect in effects:
        lines += [f"### {effect.label} (`{effect.key}`)", "", "| value | mean | 95% CI | n |", "|---|---|---|---|"]
        for value, e in zip(effect.values, effect.estimates):
            lines.append(f"| {value_text(value)} | {number(e.mean)} | {interval(e)} | {e.n} |")
        lines += ["", "| difference (paired) | mean | 95% CI | pairs | p | Holm p |", "|---|---|---|---|---|---|"]
        for (value, e), (p, adjusted) in zip(effect.differences, effect.tests, strict=True):
            lines.append(f"| {value_text(value)} − {value_text(effect.values[0])} | {number(e.mean)} | {interval(e)} | "
                         f"{e.n} | {number(p, 3)} | {number(adjusted, 3)} |")
        lines.append("")
    return lines


def effects_text(effects: list[AxisEffect], noise: tuple[float, int]) -> str:
    """The paired difference of every axis value from the axis's first value, one line each, with
    its p-values, then the seed-to-seed noise."""
    rows = [[e.label, f"{value_text(v)} − {value_text(e.values[0])}", number(d.mean), interval(d), str(d.n),
             number(p, 3), number(adjusted, 3)]
            for e in effects for (v, d), (p, adjusted) in zip(e.differences, e.tests, strict=True)]
    return "\n".join([text_table(["axis", "difference (paired)", "mean", "95% CI", "pairs", "p", "Holm p"], rows),
                      noise_line(noise)])


def effect_table(effects: list[AxisEffect]) -> Rows:
    """Each axis value's mean, then each paired difference from the first value with its p-values,
    as table rows."""
    rows = []
    for effect in effects:
        first = value_text(effect.values[0])
        rows += [[effect.label, value_text(v), "mean", e.mean, e.low, e.high, e.n, math.nan, math.nan]
                 for v, e in zip(effect.values, effect.estimates)]
        rows += [[effect.label, value_text(v), f"difference from {first}", e.mean, e.low, e.high, e.n, p, adjusted]
                 for (v, e), (p, adjusted) in zip(effect.differences, effect.tests, strict=True)]
    return ["axis", "value", "kind", "mean", "ci_low", "ci_high", "n", "p", "holm_p"], rows


def simple_labels(effect: SimpleEffect, value) -> list[str]:
    return [effect.label, f"{value_text(value)} − {value_text(effect.reference)}",
            f"{effect.given_label}={value_text(effect.given_value)}"]


def simple_rows(effects: list[SimpleEffect]) -> Rows:
    """Every axis's paired differences at each value of every other axis, with their p-values, as
    table rows."""
    return (["axis", "difference", "at", "mean", "ci_low", "ci_high", "pairs", "p", "holm_p"],
            [[*simple_labels(e, v), d.mean, d.low, d.high, d.n, p, adjusted]
             for e in effects for (v, d), (p, adjusted) in zip(e.differences, e.tests, strict=True)])


def holm_text(e: Estimate, adjusted: float) -> str:
    """A Holm-adjusted p, starred where it separates the difference (the tables' one rule)."""
    return number(adjusted, 3) + (" *" if separates(e, adjusted) else "")


def simple_lines(effects: list[SimpleEffect]) -> list[str]:
    return markdown_table(["axis", "difference (paired)", "at", "mean", "95% CI", "pairs", "p", "Holm p"],
                          [[*simple_labels(e, v), number(d.mean), interval(d), str(d.n), number(p, 3),
                            holm_text(d, adjusted)]
                           for e in effects for (v, d), (p, adjusted) in zip(e.differences, e.tests, strict=True)])


def curve_table(rows: list[VariantRow]) -> Rows:
    """Every variant's evaluation curve: the mean over seeds and the band at each evaluated step."""
    return (["variant", "step", "mean", "band_low", "band_high", "seeds"],
            [[row.variant, b.step, b.mean, b.low, b.high, b.n] for row in rows for b in row.curve])


def run_lines(sweep: SweepSpec, records: list[RunRecord]) -> list[str]:
    """Every run the comparison rests on, one row each: its seed's value (what the means and
    intervals summarize), its status, and the W&B run that holds its curves."""
    rows = [[str(r.variant), str(r.seed), r.status, number(r.metrics.get(sweep.metric)), str(r.steps),
             f"`{r.wandb_run}` ({r.wandb_dir})" if r.wandb_run else "—"]
            for r in sorted(records, key=lambda r: (str(r.variant), r.seed or 0))]
    return markdown_table(["variant", "seed", "status", sweep.metric, "steps", "W&B run (local folder)"], rows)


def markdown_table(columns: list[str], data: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns), *("| " + " | ".join(r) + " |" for r in data)]


def text_table(columns: list[str], data: list[list[str]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in data)) if data else len(c) for i, c in enumerate(columns)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)) for line in [columns, *data])


def loss_curves(sweep: SweepSpec, records: list[RunRecord], folder: Path, suffix: str) -> list[Path]:
    """The held-out loss's curves beside the compared metric's, where that is another metric: a
    variant can lead on accuracy while its loss says it is overfitting."""
    if curve_metric(sweep.metric) == "eval/loss" or not any("eval/loss" in row for r in records
                                                            for row in r.history):
        return []
    loss = sweep.model_copy(update={"metric": "eval/loss", "goal": "min", "target": None})
    return [curves_png(loss, variant_rows(loss, records), folder / f"loss_curves{suffix}.png")]


def recipe_lines(sweep: SweepSpec, base: dict, records: list[RunRecord]) -> list[str]:
    """What the runs were: the base experiment as the sweep saved it, and the code and machines
    their records name, so a reader of report.md alone can run them again."""
    def recorded(key: str) -> str:
        return ", ".join(sorted({str((r.environment or {}).get(key, "unknown")) for r in records}))

    try:  # every default written out (the learning rate, the schedule), as the runs used them
        shown = ExperimentSpec.model_validate(base).model_dump(mode="json")
    except (ValueError, ValidationError):  # a base this version no longer reads: as saved
        shown = base
    return ["## Recipe", "", f"The base experiment of every cell, before the grid ({', '.join(sweep.axes())}) and the "
            f"seeds ({', '.join(map(str, sweep.seeds))}) set their values:", "", "```yaml", dump_yaml(shown).rstrip(),
            "```", "", f"Recorded with zoo commit {recorded('zoo_commit')}; torch {recorded('torch_version')}; "
            f"device {recorded('device')}. `zoo reproduce LEDGER` trains the cells again.", ""]


def compare(sweep_dir: str | Path, wandb_mode: str | None = None, metric: str | None = None,
            echo=print) -> Report:
    """Everything `zoo compare` shows, from the sweep folder alone (no network); see read_sweep
    for which records count and for another `metric` than the sweep's."""
    sweep_dir = Path(sweep_dir)
    read = read_sweep(sweep_dir, metric)
    sweep, base, records, notes, suffix = read.sweep, read.base, read.records, read.notes, read.suffix
    tuning = None
    if sweep.tune:
        from zoo.compare.tuned_report import tuned

        tuning = tuned(sweep, records, sweep_dir, suffix)
        sweep, records, notes = tuning.sweep, tuning.records, [*notes, *tuning.notes]
    echo(f"zoo compare: {read.progress}")
    for note in notes:
        echo(f"zoo compare: {note}")
    rows, effects, noise = variant_rows(sweep, records), axis_effects(sweep, records), seed_noise(sweep, records)
    warnings = [*(tuning.warnings if tuning else []), *few_seeds_note(rows)]
    for warning in warnings:
        echo(f"zoo compare: warning: {warning}")
    notes = [*notes, *warnings]
    family = sum(len(e.differences) for e in effects)
    simple = simple_effects(sweep, records)
    interaction = ["## Effect of each axis at each value of another", "",
                   "Where an effect depends on another choice, the marginal effect above averages it away; here "
                   "the differences are paired within one value of the other axis; Holm's family is every such "
                   "difference of the sweep, and * marks a Holm p below 0.05.", "",
                   *simple_lines(simple), ""] if simple else []
    columns, data_rows = table(sweep, rows)
    plots = [curves_png(sweep, rows, sweep_dir / f"curves{suffix}.png"), *loss_curves(sweep, records, sweep_dir, suffix)]
    plots += [effect_png(sweep, e, sweep_dir / f"effect_{value_text(e.label)}{suffix}.png") for e in effects]
    plots += tuning.plots if tuning else []
    lines = [f"# Sweep {sweep.name}", "", f"{read.progress}.", "",
             f"{len(records)} runs{tuned_runs(read.records) if tuning else ''}; metric `{sweep.metric}` ({sweep.goal}), "
             f"{value_kind(sweep.metric)}; means over seeds; intervals are 95% t-intervals{range_text(sweep.metric)}.", "",
             *(f"- Note: {note}" for note in notes), *([""] if notes else []), *(tuning.lines if tuning else []),
             "## Variants", "", *markdown_table(columns, data_rows), "", *censored_note(sweep), "## Effect of each axis", "",
             "Each value's mean over every other grid value and seed; differences are paired over runs that "
             "share every other grid value and the seed.", "", HOLM.format(m=family), "", noise_line(noise), "",
             *effect_lines(effects), *interaction, "## Runs", "", *run_lines(sweep, records), "",
             *recipe_lines(read.sweep, base, records), "## Plots", "",
             *(f"![{p.stem}]({p.name})" for p in plots), ""]
    markdown = sweep_dir / f"report{suffix}.md"
    atomic_write(markdown, "\n".join(lines))
    mode = resolved_mode(wandb_mode or (base.get("wandb") or {}).get("mode", "offline"))
    run = None
    if mode != "disabled":
        tables = {"comparison": (columns, data_rows), "effects": effect_table(effects), "curves": curve_table(rows),
                  "noise": (["metric", "seed_std", "df"], [[sweep.metric, noise[0], noise[1]]]),
                  **({"interactions": simple_rows(simple)} if simple else {}), **(tuning.tables if tuning else {})}
        run = log_tables(base.get("wandb") or {}, sweep.name, "compare", f"{sweep.name}-compare{suffix}", sweep_dir,
                         mode, read.sweep.model_dump(mode="json"), tables, plots)
    table_text = text_table(columns, data_rows)
    if tuning:
        table_text = f"Chosen on {read.sweep.choose_on}:\n{tuning.text}\n\nCompared on {sweep.metric}:\n{table_text}"
    return Report(rows, effects, simple, table_text, markdown, plots, run, effects_text(effects, noise), noise, tuning)
