"""For each tuned learning rate of a tuned sweep: the loss against the rate, and Wortsman et al.'s
LR sensitivity compared between variants, paired by seed, with a Holm family of its own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoo.compare.comparison import Comparison
from zoo.compare.plots import grid_order, plain_log_axis, pyplot, variant_colour
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.sensitivity import LOSS, SENSITIVITY, RateCurve, learning_rate_keys, sensitivities, sensitivity_sweep
from zoo.compare.stats import AxisEffect, VariantRow, axis_effects, seed_noise, units_of, variant_rows
from zoo.compare.tables import effect_lines, effect_table, effects_text, markdown_table, table, text_table
from zoo.compare.wandb_run import Rows
from zoo.files import save_figure
from zoo.records import RunRecord
from zoo.sweep.names import value_text


def rate_figure(sweep: Comparison, label: str, curves, assignments: dict[str, dict[str, Any]]):
    """Each variant's final validation loss against the learning rate (log axes): the mean over
    seeds with the band of `Band`; a diverged run counts at the initial loss, and a rate where one
    did is marked with a cross. Variants in grid order, each in its colour of every plot."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 5.2))
    name = sweep.name
    for curve in curves:
        points = [(rate, band, bad) for rate, band, bad in zip(curve.rates, curve.bands, curve.diverged) if band]
        if not points:
            continue
        colour = variant_colour(sweep, assignments.get(curve.variant, {}))
        rates = [rate for rate, _, _ in points]
        ax.plot(rates, [b.mean for _, b, _ in points], marker="o", markersize=3, color=colour, label=curve.variant)
        ax.fill_between(rates, [b.low for _, b, _ in points], [b.high for _, b, _ in points], color=colour, alpha=0.18,
                        linewidth=0)
        crossed = [(rate, b.mean) for rate, b, bad in points if bad]
        if crossed:
            ax.plot(*zip(*crossed), marker="x", markersize=9, color=colour, linestyle="none")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_axis(ax.xaxis)
    plain_log_axis(ax.yaxis)
    ax.set_xlabel(f"{label} (log)")
    ax.set_ylabel(f"final {LOSS} (diverged: initial loss)")
    ax.set_title(f"{name}: final {LOSS} against {label}\nmean over seeds, band: 95% interval (min-max under 3 "
                 "seeds); x: a seed diverged", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
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
                      "every other grid value; Holm's family is every difference of this table (a question of its own, "
                      f"apart from the comparison on `{tuned.metric}`).", ""]
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
