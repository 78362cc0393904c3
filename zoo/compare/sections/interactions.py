"""Each axis's paired differences within each value of every other axis: where an effect depends
on another choice, the marginal effect averages it away. Exploratory, a Holm family of its own;
drawn by the keys `--by` names and by every size key."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from zoo.compare.comparison import Comparison
from zoo.compare.plots import by_png
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.sizes import size_keys
from zoo.compare.stats import SimpleEffect, simple_effects
from zoo.compare.tables import simple_lines, simple_rows
from zoo.compare.wandb_run import Rows
from zoo.errors import ConfigError
from zoo.sweep.names import value_text


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
