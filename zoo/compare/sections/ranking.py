"""The variants ranked on the question's metric: each one's mean over seeds with its interval,
steps and seconds to a target where one is set, and the evaluation curves (and the held-out
loss's beside another metric's: a variant can lead on accuracy while its loss says it overfits)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoo.compare.comparison import Comparison
from zoo.compare.plots import grid_order, marked, panel_keys, plain_log_axis, pyplot, variant_colour
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.stats import VariantRow, curve_metric, curve_title, variant_rows
from zoo.compare.tables import censored_note, curve_table, few_seeds_note, markdown_table, table, text_table
from zoo.compare.wandb_run import Rows
from zoo.files import save_figure
from zoo.metric_names import MetricName
from zoo.sweep.names import value_text


def curve_figure(sweep: Comparison, rows: list[VariantRow]):
    """Each variant's evaluation curve, its mean over seeds with the band of `Band` (the 95%
    interval, or min-max under 3 seeds), one panel per value of the splitting axes; a variant
    keeps its colour across panels."""
    plt = pyplot()
    keys, labels = panel_keys(sweep, len(rows)), sweep.labels()
    panels: dict[tuple, list[VariantRow]] = {}
    for values in itertools.product(*(sweep.grid[k] for k in keys)):
        panels[tuple(value_text(v) for v in values)] = []
    for row in rows:
        panels.setdefault(tuple(value_text(row.assignment[k]) for k in keys), []).append(row)
    columns = math.ceil(math.sqrt(len(panels)))
    height = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(height, columns, figsize=(5.5 * columns, 3.6 * height), sharex=True, sharey=True,
                             squeeze=False)
    for ax, (panel, members) in zip(axes.flat, panels.items()):
        drawn: dict[tuple, tuple[Any, list[str]]] = {}
        for row in sorted(members, key=lambda r: grid_order(sweep, r.assignment)):  # twins meet in one order in every panel
            label = ",".join(f"{labels[k]}={value_text(v)}" for k, v in row.assignment.items() if k not in keys)
            label = label or row.variant
            if not row.curve:
                continue
            curve = tuple((b.step, b.mean, b.low, b.high) for b in row.curve)
            if curve in drawn:  # the same curve as one drawn (fused and per_head): one line that names both
                line, names = drawn[curve]
                names.append(label)
                line.set_label(" = ".join(names) + " (the same curve)")
                continue
            colour = variant_colour(sweep, row.assignment, keys)
            steps = [b.step for b in row.curve]
            (line,) = ax.plot(steps, [b.mean for b in row.curve], marker="o", markersize=3, linewidth=1.2,
                              color=colour, label=label)
            drawn[curve] = (line, [label])
            ax.fill_between(steps, [b.low for b in row.curve], [b.high for b in row.curve], color=colour, alpha=0.18,
                            linewidth=0)
        if sweep.target is not None:
            ax.axhline(sweep.target, color="grey", linestyle="--", linewidth=0.8)
        ax.set_title(", ".join(f"{labels[k]}={v}" for k, v in zip(keys, panel)) or sweep.name, fontsize=9)
        ax.set_xlabel("training step")
        if on_log_axis(sweep.metric):  # the last hundred steps of six variants would lie on one line
            ax.set_yscale("log")
            plain_log_axis(ax.yaxis)
        ax.tick_params(labelbottom=True, labelleft=True)  # shared axes hide inner panels' numbers otherwise
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(curve_metric(sweep.metric))
    handles = {}
    for ax in axes.flat:
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
    fig.suptitle(f"{sweep.name}: {curve_title(sweep.metric)}; mean over seeds, "
                 "band: 95% interval (min-max under 3 seeds)", fontsize=10)
    fig.tight_layout()
    if handles:  # below the panels, in columns: the figure's width stays the panels'
        fig.legend(list(handles.values()), list(handles), fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=max(1, min(len(handles), 2 * columns)), frameon=False)
    return fig


def on_log_axis(metric: str) -> bool:
    """A loss or a perplexity curve, drawn on a log axis: they fall by orders of magnitude early and
    by little late, where variants part."""
    return MetricName.parse(metric).metric in ("loss", "perplexity")


def curves_png(sweep: Comparison, rows: list[VariantRow], path: Path, note: str = "") -> Path:
    return save_figure(marked(curve_figure(sweep, rows), note), path, dpi=110, bbox_inches="tight")


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
