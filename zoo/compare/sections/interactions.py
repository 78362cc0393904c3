"""Each axis's paired differences within each value of every other axis: where an effect depends
on another choice, the marginal effect averages it away. Exploratory, a Holm family of its own;
drawn by the keys `--by` names and by every size key."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from zoo.compare.comparison import Comparison
from zoo.compare.plots import marked, plot_differences, pyplot
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.sizes import size_keys
from zoo.compare.stats import SimpleEffect, simple_effects
from zoo.compare.tables import simple_lines, simple_rows
from zoo.compare.wandb_run import Rows
from zoo.errors import ConfigError
from zoo.files import save_figure
from zoo.sweep.names import value_text


def by_figure(sweep: Comparison, simple, given_key: str):
    """One panel per other axis: its paired differences within each value of `given_key`, each
    with its Holm p (over every simple difference of the sweep) and a star where that separates it."""
    from zoo.compare.agreement import LEVEL

    plt = pyplot()
    effects = [e for e in simple if e.given_key == given_key]
    keys = list(dict.fromkeys(e.key for e in effects))
    widths = [sum(len(e.differences) for e in effects if e.key == key) for key in keys]
    fig, axes = plt.subplots(1, len(keys), figsize=(sum(2.0 + 1.3 * w for w in widths), 4.2), squeeze=False,
                             gridspec_kw={"width_ratios": widths})
    for ax, key in zip(axes[0], keys):
        labels, estimates, adjusted = [], [], []
        for e in (e for e in effects if e.key == key):
            for (value, d), (_, holm) in zip(e.differences, e.tests, strict=True):
                labels.append(f"{value_text(value)} − {value_text(e.reference)}\n{e.given_label}={value_text(e.given_value)}")
                estimates.append(d)
                adjusted.append(holm)
        plot_differences(ax, labels, estimates, adjusted, sweep.metric)
        ax.set_title(f"{sweep.labels()[key]} within each {sweep.labels()[given_key]}", fontsize=10)
    fig.suptitle(f"{sweep.name}: paired differences, unadjusted 95% CI; * Holm p < {LEVEL}", fontsize=10)
    fig.tight_layout()
    return fig


def by_png(sweep: Comparison, simple, given_key: str, path: Path, note: str = "") -> Path:
    return save_figure(marked(by_figure(sweep, simple, given_key), note), path, dpi=110)


def by_keys(sweep: Comparison, by: Sequence[str]) -> list[str]:
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


@register("interactions")
class InteractionsSection(Section):
    order = 60

    @classmethod
    def compute(cls, analysis: Analysis) -> list[SimpleEffect]:
        by_keys(analysis.comparison, analysis.by)  # a key --by cannot draw is refused before anything is written
        return simple_effects(analysis.comparison, analysis.records)

    @classmethod
    def markdown(cls, result: list[SimpleEffect], analysis: Analysis) -> list[str]:
        if not result:
            return []
        return ["## Effect of each axis at each value of another", "",
                "Where an effect depends on another choice, the marginal effect above averages it away; here "
                "the differences are paired within one value of the other axis. Exploratory: Holm's family here "
                "is every such difference of the sweep, apart from the primary family above, and no verdict of the "
                "sweep rests on it; * marks a Holm p below 0.05.", "", *simple_lines(result), ""]

    @classmethod
    def tables(cls, result: list[SimpleEffect], analysis: Analysis) -> dict[str, Rows]:
        return {"interactions": simple_rows(result)} if result else {}

    @classmethod
    def plots(cls, result: list[SimpleEffect], analysis: Analysis) -> list[Path]:
        sweep = analysis.comparison
        keys = dict.fromkeys([*by_keys(sweep, analysis.by), *size_keys(sweep)])
        return [by_png(sweep, result, key, analysis.folder / f"effects_by_{value_text(sweep.labels()[key])}"
                                                              f"{analysis.suffix}.png", sweep.question.endpoint)
                for key in keys if any(e.given_key == key for e in result)]  # a sweep of sizes alone: none
