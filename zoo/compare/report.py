"""`zoo compare`: every section's result (zoo.compare.sections) rendered into report.md, the
console, PNG plots, and a W&B run in the sweep's group that holds the same tables and plots next
to the runs. Nothing here computes an analysis: each output renders the sections' results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoo.compare.scaling import Scaling
from zoo.compare.sections import Analysis, analyse
from zoo.compare.sections.tuning import Tuning
from zoo.compare.sizes import AcrossSizes
from zoo.compare.stats import AxisEffect, SimpleEffect, VariantRow
from zoo.compare.tables import range_text, tuned_runs, value_kind
from zoo.compare.wandb_run import log_tables
from zoo.files import atomic_write, inside_its_folder
from zoo.specs.experiment import resolved_mode


@dataclass
class Report:
    analysis: Analysis
    """Every section's result, by name (`report.analysis["effects"]`)."""
    table_text: str
    """The ranked table as the console shows it (a tuned sweep's choice before it)."""
    effects_text: str
    """Each axis's paired differences with their 95% intervals and p-values, then the sections after them."""
    markdown: Path
    plots: list[Path]
    wandb_run: str | None

    @property
    def tuning(self) -> Tuning | None:
        return self.analysis["tuning"]

    @property
    def rows(self) -> list[VariantRow]:
        return self.analysis["ranking"].rows

    @property
    def effects(self) -> list[AxisEffect]:
        return self.analysis["effects"].effects

    @property
    def noise(self) -> tuple[float, int]:
        return self.analysis["effects"].noise

    @property
    def simple(self) -> list[SimpleEffect]:
        return self.analysis["interactions"]

    @property
    def sizes(self) -> list[AcrossSizes]:
        return self.analysis["sizes"]

    @property
    def scaling(self) -> Scaling | None:
        return self.analysis["scaling"]


def header_lines(analysis: Analysis, notes: list[str]) -> list[str]:
    """The title, the endpoint, the progress and the notes: what report.md says before its sections."""
    sweep, endpoint = analysis.comparison, analysis.comparison.question.endpoint
    trained = tuned_runs(analysis.read.records) if analysis["tuning"] is not None else ""
    return [f"# Sweep {sweep.name}", "",
            *([f"**{endpoint[0].upper()}{endpoint[1:]}**: exploratory, not a verdict.", ""] if endpoint
              else [f"Primary endpoint: `{sweep.metric}`.", ""]),
            f"{analysis.read.progress}.", "",
            f"{len(analysis.records)} runs{trained}; metric `{sweep.metric}` ({sweep.goal}), {value_kind(sweep.metric)}; "
            f"means over seeds; intervals are 95% t-intervals{range_text(sweep.metric)}; a difference's is "
            "unadjusted for its family, so it may exclude 0 where the verdict (Holm p) is not separated.", "",
            *(f"- Note: {note}" for note in notes), *([""] if notes else [])]


def drawn(analysis: Analysis) -> list[Path]:
    """Every section's plots, drawn into the sweep's folder, in the order the page lists them."""
    sections = sorted(analysis.sections(), key=lambda item: item[0].plot_order or item[0].order)
    return [path for section, result in sections for path in section.plots(result, analysis)]


def console_text(analysis: Analysis, stream: str) -> str:
    return "".join(section.console(result, analysis) for section, result in analysis.sections()
                   if section.stream == stream)


def compare(sweep_dir: str | Path, wandb_mode: str | None = None, metric: str | None = None,
            echo=print, by: Sequence[str] = ()) -> Report:
    """Everything `zoo compare` shows, from the sweep folder alone (no network); see read_sweep
    for which records count and for another `metric` than the sweep's. `by` names grid keys (or
    their labels) within each value of which every other axis's effects are drawn; sizes always are."""
    analysis = analyse(sweep_dir, metric, by)
    question = analysis.comparison.question
    echo(f"zoo compare: {analysis.read.progress}")
    if question.endpoint:
        echo(f"zoo compare: {question.endpoint}: these p-values make no verdict of the sweep's primary family")
    notes, warnings = analysis.notes(), analysis.warnings()
    for note in notes:
        echo(f"zoo compare: {note}")
    for warning in warnings:
        echo(f"zoo compare: warning: {warning}")
    for section, result in analysis.sections():
        section.write(result, analysis)
    plots = drawn(analysis)
    lines = [*header_lines(analysis, [*notes, *warnings]),
             *(line for section, result in analysis.sections() for line in section.markdown(result, analysis)),
             "## Plots", "", *(f"![{p.stem}]({p.name})" for p in plots), ""]
    markdown = inside_its_folder(analysis.folder / f"report{analysis.suffix}.md", "a sweep's report")
    atomic_write(markdown, "\n".join(lines))
    return Report(analysis, console_text(analysis, "table"), console_text(analysis, "effects"), markdown, plots,
                  logged(analysis, wandb_mode, plots))


def logged(analysis: Analysis, wandb_mode: str | None, plots: list[Path]) -> str | None:
    """The W&B run of the comparison, holding every section's tables and the plots; None where W&B is off."""
    base: dict[str, Any] = analysis.read.base
    mode = resolved_mode(wandb_mode or (base.get("wandb") or {}).get("mode", "offline"))
    if mode == "disabled":
        return None
    sweep = analysis.comparison
    tables = {key: rows for section, result in analysis.sections() for key, rows in section.tables(result, analysis).items()}
    scalars = {key: value for section, result in analysis.sections()
               for key, value in section.scalars(result, analysis).items()}
    config = {**analysis.read.comparison.config(), "endpoint": "secondary" if sweep.question.endpoint else "primary"}
    return log_tables(base.get("wandb") or {}, sweep.name, "compare", f"{sweep.name}-compare{analysis.suffix}",
                      analysis.folder, mode, config, tables, plots, scalars)
