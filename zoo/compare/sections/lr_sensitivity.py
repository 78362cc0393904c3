"""For each tuned learning rate of a tuned sweep: the loss against the rate, and Wortsman et al.'s
LR sensitivity compared between variants, paired by seed, with a Holm family of its own."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoo.compare.comparison import Comparison
from zoo.compare.plots import grid_order, plain_log_axis, pyplot, variant_colour, variant_marker
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.sensitivity import LOSS, SENSITIVITY, RateCurve, learning_rate_keys, sensitivities, sensitivity_sweep
from zoo.compare.sizes import size_keys
from zoo.compare.stats import AxisEffect, VariantRow, axis_effects, seed_noise, units_of, variant_rows
from zoo.compare.tables import effect_lines, effect_table, effects_text, markdown_table, table, text_table
from zoo.compare.wandb_run import Rows
from zoo.files import save_figure
from zoo.metrics import by_comparison
from zoo.records import RunRecord
from zoo.sweep.names import value_text


def rate_figure(sweep: Comparison, label: str, curves, assignments: dict[str, dict[str, Any]]):
    """Each variant's final validation loss against the learning rate (log axes): the mean over
    seeds with the band of `Band`; a diverged run counts at the initial loss, and a rate where one
    did is marked with a cross. One panel per size (a sweep's size keys), as the curves are;
    variants in grid order, each with its colour and marker of every plot."""
    plt = pyplot()
    keys, labels = size_keys(sweep), sweep.labels()
    panels: dict[tuple, list] = {tuple(values): [] for values in itertools.product(*(sweep.grid[k] for k in keys))}
    for curve in curves:
        assignment = assignments.get(curve.variant, {})
        panels.setdefault(tuple(assignment.get(k) for k in keys), []).append(curve)
    columns = math.ceil(math.sqrt(len(panels)))
    height = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(height, columns, figsize=(1.0 + 5.2 * columns, 0.6 + 4.6 * height), sharey=True,
                             squeeze=False)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    for ax, (panel, members) in zip(axes.flat, panels.items()):
        for curve in members:
            points = [(rate, band, bad) for rate, band, bad in zip(curve.rates, curve.bands, curve.diverged) if band]
            if not points:
                continue
            assignment = assignments.get(curve.variant, {})
            named = ",".join(f"{labels[k]}={value_text(v)}" for k, v in assignment.items() if k not in keys)
            colour, marker = variant_colour(sweep, assignment, keys), variant_marker(sweep, assignment, keys)
            rates = [rate for rate, _, _ in points]
            ax.plot(rates, [b.mean for _, b, _ in points], marker=marker, markersize=4, color=colour,
                    label=named or curve.variant)
            ax.fill_between(rates, [b.low for _, b, _ in points], [b.high for _, b, _ in points], color=colour,
                            alpha=0.18, linewidth=0)
            crossed = [(rate, b.mean) for rate, b, bad in points if bad]
            if crossed:
                ax.plot(*zip(*crossed), marker="x", markersize=9, color=colour, linestyle="none")
        ax.set_xscale("log")
        ax.set_yscale("log")
        tried = sorted({rate for curve in curves for rate in curve.rates})
        ax.set_xticks(tried, [f"{rate:g}" for rate in tried])  # the rates as the sweep file writes them, no crowding
        ax.set_xticks([], minor=True)
        plain_log_axis(ax.yaxis)
        ax.set_xlabel(f"{label} (log)")
        ax.set_title(", ".join(f"{labels[k]}={value_text(v)}" for k, v in zip(keys, panel)) or sweep.name, fontsize=9)
        ax.tick_params(labelleft=True)
    for ax in axes[:, 0]:
        ax.set_ylabel(f"final {LOSS} (diverged: initial loss)")
    fig.suptitle(f"{sweep.name}: final {LOSS} against {label}; mean over seeds, band: 95% interval (min-max under "
                 "3 seeds); x: a seed diverged", fontsize=9)
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig


def rate_png(sweep: Comparison, label: str, curves, assignments: dict[str, dict[str, Any]], path: Path) -> Path:
    return save_figure(rate_figure(sweep, label, curves, assignments), path, dpi=110, bbox_inches="tight")


@dataclass
class RateSensitivity:
    key: str
    label: str
    curves: list[RateCurve]
    assignments: dict[str, dict]
    notes: list[str]
    scored: Comparison
    """The compared sweep asked of the sensitivity (lower is flatter)."""
    measured: list[RunRecord]
    """One record per variant and seed, its sensitivity as the metric; empty until a seed has every rate."""
    rows: list[VariantRow]
    effects: list[AxisEffect]
    noise: tuple[float, int]


def plot_path(analysis: Analysis, found: RateSensitivity) -> Path:
    return analysis.folder / f"loss_vs_{value_text(found.label)}{analysis.suffix}.png"


@register("lr_sensitivity")
class LRSensitivitySection(Section):
    order, plot_order, stream = 15, 65, "table"

    @classmethod
    def compute(cls, analysis: Analysis) -> list[RateSensitivity] | None:
        tuning = analysis["tuning"]
        keys = learning_rate_keys(tuning.tuned) if tuning is not None else []
        if not keys:
            return None
        scored = sensitivity_sweep(tuning.comparison)  # one question for every tuned rate
        assignments = {choice.variant: dict(choice.assignment) for choice in tuning.choices}
        out = []
        for key in keys:
            measured, curves, notes = sensitivities(tuning.tuned, tuning.choosing, tuning.choices, key)
            notes += [f"LR sensitivity: {said}" for said in units_of(scored, measured).warnings()] if measured else []
            out.append(RateSensitivity(key, tuning.tuned.labels()[key], curves, assignments, notes, scored, measured,
                                       variant_rows(scored, measured) if measured else [],
                                       axis_effects(scored, measured) if measured else [],
                                       seed_noise(scored, measured) if measured else (0.0, 0)))
        return out

    @classmethod
    def notes(cls, result: list[RateSensitivity], analysis: Analysis) -> list[str]:
        return [note for found in result for note in found.notes]

    @classmethod
    def markdown(cls, result: list[RateSensitivity], analysis: Analysis) -> list[str]:
        tuned, lines = analysis["tuning"].tuned, []
        for found in result:
            lines += ["## Learning-rate sensitivity", "",
                      f"Wortsman et al. (2023): for each variant and seed, the mean over the {len(tuned.tune[found.key])} "
                      f"tried values of `{found.key}` of min(final `{LOSS}`, initial loss) minus its lowest; a run that "
                      "diverged or failed counts at the initial loss (the training loss of step 1, the model as "
                      "initialized; the same at every rate of a seed). Other tuned keys stay at the variant's chosen "
                      "values. Lower is flatter: the loss depends less on the rate. Differences are paired by seed and "
                      "every other grid value; " + (
                          "the sensitivity is the sweep's primary endpoint, tested in the primary family by the "
                          "Findings and the effects; this table's Holm p is over its own differences alone and decides "
                          "nothing." if by_comparison(tuned.metric) else
                          "Holm's family is every difference of this table (a question of its own, apart from the "
                          f"comparison on `{tuned.metric}`)."), ""]
            if not found.measured:
                lines += ["No variant has every rate trained for a seed yet.", ""]
                continue
            path = plot_path(analysis, found)
            lines += [*markdown_table(*table(found.scored, found.rows)), "", *effect_lines(found.effects),
                      f"![{path.stem}]({path.name})", ""]
        return lines

    @classmethod
    def console(cls, result: list[RateSensitivity], analysis: Analysis) -> str:
        return "".join(f"\n\nLR sensitivity ({SENSITIVITY}, lower is flatter) over {found.label}:\n"
                       + text_table(*table(found.scored, found.rows)) + "\n" + effects_text(found.effects, found.noise)
                       for found in result if found.measured)

    @classmethod
    def tables(cls, result: list[RateSensitivity], analysis: Analysis) -> dict[str, Rows]:
        out: dict[str, Rows] = {}
        for found in result:
            if not found.measured:
                continue
            out[SENSITIVITY] = table(found.scored, found.rows)
            out[f"{SENSITIVITY}_effects"] = effect_table(found.effects)
            out[f"{SENSITIVITY}_curves"] = (["variant", found.label, "mean", "band_low", "band_high", "seeds", "diverged"],
                                            [[c.variant, rate, b.mean, b.low, b.high, b.n, bad] for c in found.curves
                                             for rate, b, bad in zip(c.rates, c.bands, c.diverged) if b])
        return out

    @classmethod
    def plots(cls, result: list[RateSensitivity], analysis: Analysis) -> list[Path]:
        tuned = analysis["tuning"].tuned
        return [rate_png(tuned, found.label,
                         sorted(found.curves, key=lambda c, f=found: grid_order(tuned, f.assignments[c.variant])),
                         found.assignments, plot_path(analysis, found)) for found in result]
