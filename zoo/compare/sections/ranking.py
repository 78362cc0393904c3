"""The variants ranked on the question's metric: each one's mean over seeds with its interval,
steps and seconds to a target where one is set, and the evaluation curves (and the held-out
loss's beside another metric's: a variant can lead on accuracy while its loss says it overfits)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zoo.compare.comparison import Comparison
from zoo.compare.plots import curves_png
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.stats import VariantRow, curve_metric, variant_rows
from zoo.compare.tables import censored_note, curve_table, few_seeds_note, markdown_table, table, text_table
from zoo.compare.wandb_run import Rows


@dataclass
class Ranking:
    rows: list[VariantRow]
    loss: tuple[Comparison, list[VariantRow]] | None = None
    """The held-out loss asked of the same design, and its rows, where the metric is another and
    the runs logged it."""


@register("ranking")
class RankingSection(Section):
    order, stream = 20, "table"

    @classmethod
    def compute(cls, analysis: Analysis) -> Ranking:
        sweep, records = analysis.comparison, analysis.records
        loss = None
        if curve_metric(sweep.metric) != "eval/loss" and any("eval/loss" in row for r in records for row in r.history):
            asked = sweep.asking("eval/loss")
            loss = asked, variant_rows(asked, records)
        return Ranking(variant_rows(sweep, records), loss)

    @classmethod
    def warnings(cls, result: Ranking, analysis: Analysis) -> list[str]:
        return few_seeds_note(result.rows)

    @classmethod
    def markdown(cls, result: Ranking, analysis: Analysis) -> list[str]:
        return ["## Variants", "", *markdown_table(*table(analysis.comparison, result.rows)), "",
                *censored_note(analysis.comparison)]

    @classmethod
    def console(cls, result: Ranking, analysis: Analysis) -> str:
        tuned = f"\n\nCompared on {analysis.comparison.metric}:\n" if analysis["tuning"] is not None else ""
        return tuned + text_table(*table(analysis.comparison, result.rows))

    @classmethod
    def tables(cls, result: Ranking, analysis: Analysis) -> dict[str, Rows]:
        return {"comparison": table(analysis.comparison, result.rows), "curves": curve_table(result.rows)}

    @classmethod
    def plots(cls, result: Ranking, analysis: Analysis) -> list[Path]:
        sweep, folder, suffix = analysis.comparison, analysis.folder, analysis.suffix
        plots = [curves_png(sweep, result.rows, folder / f"curves{suffix}.png", sweep.question.endpoint)]
        if result.loss is not None:
            plots.append(curves_png(*result.loss, folder / f"loss_curves{suffix}.png"))
        return plots
