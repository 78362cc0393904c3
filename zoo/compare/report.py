"""`zoo compare`: the ranked table, the axis effects, PNG plots, a Markdown report, and a W&B run
in the sweep's group that holds the same table and plots next to the runs."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoo.compare.plots import curves_png, effect_png
from zoo.compare.stats import AxisEffect, Estimate, VariantRow, axis_effects, variant_rows
from zoo.errors import ConfigError
from zoo.files import atomic_write
from zoo.metrics import goal_of
from zoo.registries import describe_unknown
from zoo.sweep.ledger import Ledger
from zoo.sweep.spec import SweepSpec, expand, safe_text, value_text
from zoo.trainer.tracking import resolved_mode
from zoo.yamlio import read_mapping


@dataclass
class Report:
    rows: list[VariantRow]
    effects: list[AxisEffect]
    table_text: str
    markdown: Path
    plots: list[Path]
    wandb_run: str | None


def number(x: float | None, digits: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


def interval(e: Estimate) -> str:
    return "—" if math.isnan(e.low) else f"[{number(e.low)}, {number(e.high)}]"


def table(sweep: SweepSpec, rows: list[VariantRow]) -> tuple[list[str], list[list[str]]]:
    columns = ["rank", "variant", f"{sweep.metric} mean", "std", "seeds", "parameters"]
    if sweep.target is not None:
        columns += [f"steps to {sweep.target:g}", f"seconds to {sweep.target:g}", "reached"]
    columns += ["diverged", "failed"]
    data = []
    for rank, row in enumerate(rows, 1):
        line = [str(rank), row.variant, number(row.metric.mean), number(row.metric.std), str(row.metric.n),
                f"{row.parameters:,}" if row.parameters else "—"]
        if sweep.target is not None:
            line += [number(row.steps_to_target), number(row.seconds_to_target, 3), str(row.reached)]
        line += [str(row.diverged), str(row.failed)]
        data.append(line)
    return columns, data


def effect_lines(effects: list[AxisEffect]) -> list[str]:
    lines = []
    for effect in effects:
        lines += [f"### {effect.label} (`{effect.key}`)", "", "| value | mean | 95% CI | n |", "|---|---|---|---|"]
        for value, e in zip(effect.values, effect.estimates):
            lines.append(f"| {value_text(value)} | {number(e.mean)} | {interval(e)} | {e.n} |")
        lines += ["", "| difference (paired) | mean | 95% CI | pairs |", "|---|---|---|---|"]
        for value, e in effect.differences:
            lines.append(f"| {value_text(value)} − {value_text(effect.values[0])} | {number(e.mean)} | {interval(e)} | {e.n} |")
        lines.append("")
    return lines


def markdown_table(columns: list[str], data: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns), *("| " + " | ".join(r) + " |" for r in data)]


def text_table(columns: list[str], data: list[list[str]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in data)) if data else len(c) for i, c in enumerate(columns)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)) for line in [columns, *data])


def logged_metrics(records: list[dict[str, Any]]) -> list[str]:
    """Every metric a finished run of the sweep reported at its end."""
    return sorted({name for r in records for name in (r.get("metrics") or {})})


def compare(sweep_dir: str | Path, wandb_mode: str | None = None, metric: str | None = None,
            echo=print) -> Report:
    """Everything `zoo compare` shows, from the sweep folder alone (no network). `metric` other
    than the sweep's own writes its files with the metric in their names; its goal is min for a
    loss and max otherwise, and the sweep's target (set for its own metric) is left out.

    Only the records of the sweep's current cells count: after a grid or the seeds changed, the
    ledger's records of other cells are left out, and so are damaged lines; both are reported."""
    sweep_dir = Path(sweep_dir)
    saved = sweep_dir / "sweep.yaml"
    if not saved.exists():
        raise ConfigError(f"{sweep_dir}: no sweep.yaml; is this a folder that `zoo sweep` wrote?")
    data = read_mapping(saved, "saved sweep")
    sweep, base = SweepSpec.model_validate({**data, "base": {}}), data.get("base") or {}
    read = Ledger(sweep_dir / "ledger.jsonl").read()
    notes = read.warnings(sweep_dir / "ledger.jsonl")
    current = {cell.name for cell in expand(sweep)}
    latest = read.latest()
    records = [r.model_dump() for name, r in latest.items() if name in current and r.status not in ("running", "interrupted")]
    other = sorted(name for name in latest if name not in current)
    if other:
        notes.append(f"{len(other)} ledger record(s) of cells outside the current grid and seeds were left out "
                     f"(e.g. {other[0]})")
    for note in notes:
        echo(f"zoo compare: {note}")
    if not records:
        raise ConfigError(f"{sweep_dir}: the ledger holds no finished, diverged or failed cell of this grid yet")
    suffix, known = "", logged_metrics(records)
    if known and (metric or sweep.metric) not in known:
        raise ConfigError(f"{'--metric' if metric else 'the sweep metric'}: "
                          f"{describe_unknown('metric', metric or sweep.metric, known)} (what this sweep's runs logged)")
    if metric is not None and metric != sweep.metric:
        sweep = sweep.model_copy(update={"metric": metric, "goal": goal_of(metric), "target": None})
        suffix = "-" + safe_text(metric)
    rows, effects = variant_rows(sweep, records), axis_effects(sweep, records)
    columns, data_rows = table(sweep, rows)
    plots = [curves_png(sweep, rows, sweep_dir / f"curves{suffix}.png")]
    plots += [effect_png(sweep, e, sweep_dir / f"effect_{value_text(e.label)}{suffix}.png") for e in effects]
    lines = [f"# Sweep {sweep.name}", "", f"{len(records)} runs; metric `{sweep.metric}` ({sweep.goal}), "
             f"final value; means over seeds; intervals are 95% t-intervals.", "",
             *(f"- Note: {note}" for note in notes), *([""] if notes else []), "## Variants", "",
             *markdown_table(columns, data_rows), "", "## Effect of each axis", "",
             "Each value's mean over every other grid value and seed; differences are paired over runs that "
             "share every other grid value and the seed.", "", *effect_lines(effects), "## Plots", "",
             *(f"![{p.stem}]({p.name})" for p in plots), ""]
    markdown = sweep_dir / f"report{suffix}.md"
    atomic_write(markdown, "\n".join(lines))
    mode = resolved_mode(wandb_mode or (base.get("wandb") or {}).get("mode", "offline"))
    run = None
    if mode != "disabled":
        run = log_to_wandb(sweep, base, sweep_dir, mode, f"{sweep.name}-compare{suffix}", columns, data_rows, plots)
    return Report(rows, effects, text_table(columns, data_rows), markdown, plots, run)


def log_to_wandb(sweep: SweepSpec, base: dict[str, Any], sweep_dir: Path, mode: str, name: str, columns, data_rows,
                 plots: list[Path]) -> str | None:
    """One run of job_type "compare" in the sweep's group; a W&B failure is only a warning."""
    try:
        import wandb

        w = base.get("wandb") or {}
        run = wandb.init(project=w.get("project", "zoo"), entity=w.get("entity"), group=sweep.name,
                         job_type="compare", name=name, dir=str(sweep_dir), mode=mode,
                         config=sweep.model_dump(mode="json"), settings=wandb.Settings(console="off"))
        run.log({"comparison": wandb.Table(columns=columns, data=data_rows),
                 **{f"plots/{p.stem}": wandb.Image(str(p)) for p in plots}})
        run_dir = Path(run.dir).parent
        run.finish()
        return str(run_dir)
    except Exception as err:  # the report on disk stands without W&B
        warnings.warn(f"W&B compare run failed, the report is on disk only: {err!r}", RuntimeWarning, stacklevel=2)
        return None
