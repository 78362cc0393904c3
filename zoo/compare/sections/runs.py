"""Every run the comparison rests on, one row each, and the recipe that trained them: what a
reader of report.md alone needs to run them again."""

from __future__ import annotations

from pydantic import ValidationError

from zoo.compare.sections import Analysis, Section, register
from zoo.compare.tables import run_lines
from zoo.records import RunRecord
from zoo.specs.experiment import ExperimentSpec
from zoo.specs.yamlio import dump_yaml


@register("runs")
class RunsSection(Section):
    order = 90

    @classmethod
    def compute(cls, analysis: Analysis) -> list[RunRecord]:
        return analysis.records

    @classmethod
    def markdown(cls, result: list[RunRecord], analysis: Analysis) -> list[str]:
        return ["## Runs", "", *run_lines(analysis.comparison, result), ""]


@register("recipe")
class RecipeSection(Section):
    order = 95

    @classmethod
    def compute(cls, analysis: Analysis) -> dict:
        """The base experiment with every default written out (the learning rate, the
        schedule), as the runs used them; a base this version no longer reads, as saved."""
        try:
            return ExperimentSpec.model_validate(analysis.read.base).model_dump(mode="json")
        except (ValueError, ValidationError):
            return analysis.read.base

    @classmethod
    def markdown(cls, result: dict, analysis: Analysis) -> list[str]:
        sweep, records = analysis.read.comparison, analysis.records

        def recorded(key: str) -> str:
            return ", ".join(sorted({str((r.environment or {}).get(key, "unknown")) for r in records}))

        return ["## Recipe", "", f"The base experiment of every cell, before the grid ({', '.join(sweep.axes())}) and "
                f"the seeds ({', '.join(map(str, sweep.seeds))}) set their values:", "", "```yaml",
                dump_yaml(result).rstrip(), "```", "", f"Recorded with zoo commit {recorded('zoo_commit')}; torch "
                f"{recorded('torch_version')}; device {recorded('device')}. `zoo reproduce LEDGER` trains the cells again.",
                ""]
