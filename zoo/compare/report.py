"""`zoo compare`: the ranked table, the axis effects, PNG plots, a Markdown report, and a W&B run
in the sweep's group that holds the same tables (ranking, effects, curves) and plots next to the runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from zoo.compare.design import factorial_lines, factorial_table, factorial_text, power_lines
from zoo.compare.exact import unreachable
from zoo.compare.factorial import factorial
from zoo.compare.load import read_sweep
from zoo.compare.plots import by_png, curves_png, effect_png
from zoo.compare.scaling import Scaling, scaling
from zoo.compare.scaling_report import scaling_lines, scaling_png, scaling_tables, scaling_text
from zoo.compare.sizes import AcrossSizes, across_sizes, size_keys, size_lines, size_table, size_text
from zoo.compare.stats import (
    AxisEffect,
    SimpleEffect,
    VariantRow,
    axis_effects,
    curve_metric,
    primary_family,
    seed_noise,
    simple_effects,
    units_of,
    variant_rows,
)
from zoo.compare.tables import (
    HOLM,
    censored_note,
    curve_table,
    effect_lines,
    effect_table,
    effects_text,
    few_seeds_note,
    markdown_table,
    noise_line,
    range_text,
    run_lines,
    simple_lines,
    simple_rows,
    table,
    text_table,
    tuned_runs,
    value_kind,
)
from zoo.compare.wandb_run import log_tables
from zoo.errors import ConfigError
from zoo.files import atomic_write, inside_its_folder
from zoo.records import RunRecord
from zoo.specs.experiment import ExperimentSpec, resolved_mode
from zoo.specs.yamlio import dump_yaml
from zoo.sweep.names import value_text
from zoo.sweep.spec import SweepSpec


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
    sizes: list[AcrossSizes] = field(default_factory=list)
    """Each difference at each model size and its interaction with size, where the grid has a size key."""
    scaling: Scaling | None = None
    """Each variant's law across the sizes and each difference carried past them (zoo.compare.scaling)."""


def by_keys(sweep: SweepSpec, by: Sequence[str]) -> list[str]:
    """The grid keys `--by` names, by key or label; an unknown one is refused, naming the choices."""
    labels = sweep.labels()
    keys = {**{key: key for key in sweep.grid}, **{labels[key]: key for key in sweep.grid}}
    for name in by:
        if name not in keys:
            raise ConfigError(f"--by {name}: not a grid key of sweep {sweep.name!r}; choices: "
                              f"{', '.join(labels[k] for k in sweep.grid)}")
        if len(sweep.grid) < 2:
            raise ConfigError(f"--by {name}: sweep {sweep.name!r} has one grid key, so no other effect to draw within it")
    return [keys[name] for name in by]


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
            echo=print, by: Sequence[str] = ()) -> Report:
    """Everything `zoo compare` shows, from the sweep folder alone (no network); see read_sweep
    for which records count and for another `metric` than the sweep's. `by` names grid keys (or
    their labels) within each value of which every other axis's effects are drawn; sizes always are."""
    sweep_dir = Path(sweep_dir)
    read = read_sweep(sweep_dir, metric)
    sweep, base, records, notes, suffix = read.sweep, read.base, read.records, read.notes, read.suffix
    tuning = None
    if sweep.tune:
        from zoo.compare.tuned_report import tuned

        tuning = tuned(sweep, records, sweep_dir, suffix)
        sweep, records, notes = tuning.sweep, tuning.records, [*notes, *tuning.notes]
    echo(f"zoo compare: {read.progress}")
    endpoint = "" if sweep.metric == read.primary else (f"secondary (exploratory): {sweep.metric}; the primary "
                                                         f"endpoint is {read.primary}")
    if endpoint:
        echo(f"zoo compare: {endpoint}: these p-values make no verdict of the sweep's primary family")
    for note in notes:
        echo(f"zoo compare: {note}")
    rows, effects, noise = variant_rows(sweep, records), axis_effects(sweep, records), seed_noise(sweep, records)
    tests = primary_family(effects)
    family, short = len(tests), unreachable([e.n for e in tests], len(tests))
    units = units_of(sweep, records)
    blocks = factorial(units.finished, [k for k in sweep.grid if k not in units.identities], sweep.labels())
    powers = power_lines(sweep, effects)
    notes = [*notes, *units.notes()]
    warnings = [*(tuning.warnings if tuning else []), *few_seeds_note(rows), *units.warnings(), *([short] if short else [])]
    for warning in warnings:
        echo(f"zoo compare: warning: {warning}")
    notes = [*notes, *warnings]
    simple = simple_effects(sweep, records)
    sizes = across_sizes(sweep, records, simple)
    laws = scaling(sweep, records)
    interaction = ["## Effect of each axis at each value of another", "",
                   "Where an effect depends on another choice, the marginal effect above averages it away; here "
                   "the differences are paired within one value of the other axis. Exploratory: Holm's family here "
                   "is every such difference of the sweep, apart from the primary family above, and no verdict of the "
                   "sweep rests on it; * marks a Holm p below 0.05.", "",
                   *simple_lines(simple), ""] if simple else []
    columns, data_rows = table(sweep, rows)
    plots = [curves_png(sweep, rows, sweep_dir / f"curves{suffix}.png", endpoint),
             *loss_curves(sweep, records, sweep_dir, suffix)]
    plots += [effect_png(sweep, e, sweep_dir / f"effect_{value_text(e.label)}{suffix}.png", endpoint) for e in effects]
    plots += [by_png(sweep, simple, key, sweep_dir / f"effects_by_{value_text(sweep.labels()[key])}{suffix}.png", endpoint)
              for key in dict.fromkeys([*by_keys(sweep, by), *size_keys(sweep)])
              if any(e.given_key == key for e in simple)]  # a sweep of sizes alone has no other axis to show by size
    plots += tuning.plots if tuning else []
    law_plot = scaling_png(laws, sweep, sweep_dir / f"scaling{suffix}.png") if laws else None
    plots += [law_plot] if law_plot else []
    lines = [f"# Sweep {sweep.name}", "", *([f"**{endpoint[0].upper()}{endpoint[1:]}**: exploratory, not a verdict.", ""]
                                           if endpoint else [f"Primary endpoint: `{sweep.metric}`.", ""]),
             f"{read.progress}.", "",
             f"{len(records)} runs{tuned_runs(read.records) if tuning else ''}; metric `{sweep.metric}` ({sweep.goal}), "
             f"{value_kind(sweep.metric)}; means over seeds; intervals are 95% t-intervals{range_text(sweep.metric)}.", "",
             *(f"- Note: {note}" for note in notes), *([""] if notes else []), *(tuning.lines if tuning else []),
             "## Variants", "", *markdown_table(columns, data_rows), "", *censored_note(sweep), "## Effect of each axis", "",
             "Each value's mean over every other grid value and seed; differences are paired over runs that "
             "share every other grid value and the seed.", "", HOLM.format(m=family), "", noise_line(noise), "",
             *effect_lines(effects, sweep.margins.get(sweep.metric)), *factorial_lines(blocks),
             "## Power", "", "From each difference's observed spread over its pairs (a normal approximation at the "
             "Bonferroni level of the family, floored by the exact test's smallest p):", "", *(f"- {line}" for line in powers),
             "", *interaction, *size_lines(sizes), *(scaling_lines(laws, sweep) if laws else []), "## Runs", "",
             *run_lines(sweep, records), "",
             *recipe_lines(read.sweep, base, records), "## Plots", "",
             *(f"![{p.stem}]({p.name})" for p in plots), ""]
    markdown = inside_its_folder(sweep_dir / f"report{suffix}.md", "a sweep's report")
    atomic_write(markdown, "\n".join(lines))
    mode = resolved_mode(wandb_mode or (base.get("wandb") or {}).get("mode", "offline"))
    run = None
    if mode != "disabled":
        tables = {"comparison": (columns, data_rows), "effects": effect_table(effects), "curves": curve_table(rows),
                  "noise": (["metric", "seed_std", "df"], [[sweep.metric, noise[0], noise[1]]]),
                  "factorial": factorial_table(blocks),
                  **({"interactions": simple_rows(simple)} if simple else {}), **(tuning.tables if tuning else {}),
                  **({"across_sizes": size_table(sizes)} if sizes else {}), **(scaling_tables(laws) if laws else {})}
        run = log_tables(base.get("wandb") or {}, sweep.name, "compare", f"{sweep.name}-compare{suffix}", sweep_dir,
                         mode, {**read.sweep.model_dump(mode="json"), "endpoint": "secondary" if endpoint else "primary"},
                         tables, plots)
    table_text = text_table(columns, data_rows)
    if tuning:
        table_text = f"Chosen on {read.sweep.choose_on}:\n{tuning.text}\n\nCompared on {sweep.metric}:\n{table_text}"
    effect_text = "\n".join([effects_text(effects, noise, sweep.margins.get(sweep.metric)), factorial_text(blocks),
                             *powers]) + (f"\n\n{size_text(sizes)}" if sizes else "") + \
        (f"\n\nAcross scale:\n{scaling_text(laws)}" if laws else "")
    return Report(rows, effects, simple, table_text, markdown, plots, run, effect_text, noise, tuning, sizes, laws)
