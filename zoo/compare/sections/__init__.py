"""The analyses of `zoo compare`, registered by name as metrics are: each section computes one
result once (`compute`), and every output renders that result: report.md (`markdown`), the
console (`console`), W&B tables (`tables`) and key numbers (`scalars`), plots (`plots`) and the
results page (through `analyse`). Adding an analysis is one module here, found by the package as parts are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from zoo.compare.comparison import Comparison
from zoo.compare.load import SweepRecords, read_sweep
from zoo.compare.wandb_run import Rows
from zoo.records import RunRecord
from zoo.specs.registries import Registry, import_modules

SECTIONS: Registry[type[Section]] = Registry("section", plugins=False)
register = SECTIONS.register


class Section:
    """One analysis. `order` places it on the page and in the console; `plot_order` among the
    plots, where that differs (the tuning's rate plots follow the effects' plots)."""

    order: ClassVar[int]
    plot_order: ClassVar[int | None] = None
    computed_after: ClassVar[int | None] = None
    """Where the section reads other sections' results (the findings): computed at this order,
    after them, though shown at `order`."""
    stream: ClassVar[Literal["table", "effects"]] = "effects"
    """Which of the console's two texts it adds to: the ranked table or the effects."""

    @classmethod
    def compute(cls, analysis: Analysis) -> Any:
        """The section's result, or None where it does not apply to this sweep (then nothing renders)."""
        raise NotImplementedError

    @classmethod
    def notes(cls, result: Any, analysis: Analysis) -> list[str]:
        return []

    @classmethod
    def warnings(cls, result: Any, analysis: Analysis) -> list[str]:
        return []

    @classmethod
    def markdown(cls, result: Any, analysis: Analysis) -> list[str]:
        return []

    @classmethod
    def console(cls, result: Any, analysis: Analysis) -> str:
        return ""

    @classmethod
    def tables(cls, result: Any, analysis: Analysis) -> dict[str, Rows]:
        return {}

    @classmethod
    def scalars(cls, result: Any, analysis: Analysis) -> dict[str, float]:
        """The section's key numbers, for the comparison's W&B summary: a viewer (the web app's run
        table, `wandb leet`'s inspector) shows a number where a table is only a file."""
        return {}

    @classmethod
    def plots(cls, result: Any, analysis: Analysis) -> list[Path]:
        """Draw the section's plots into the sweep's folder; their paths."""
        return []

    @classmethod
    def write(cls, result: Any, analysis: Analysis) -> None:
        """Any file of its own beside the report (a tuned sweep's tuning.json)."""


@dataclass
class Analysis:
    """Every section's result over one comparison of a sweep folder's runs, computed once."""

    read: SweepRecords
    by: Sequence[str] = ()
    """Grid keys within each value of which every other axis's effects are drawn (`--by`)."""
    at: Mapping[str, Any] | None = None
    """A tuned sweep compared at these tuned values instead of each variant's chosen ones (the
    comparison an untuned sweep at that value would make); None: at the chosen values."""
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def comparison(self) -> Comparison:
        """What the sections compare: a tuned sweep's grid alone once its tuning is computed."""
        tuning = self.results.get("tuning")
        return tuning.comparison if tuning is not None else self.read.comparison

    @property
    def records(self) -> list[RunRecord]:
        """The runs compared: a tuned sweep's chosen runs, as runs of their variants."""
        tuning = self.results.get("tuning")
        return tuning.records if tuning is not None else self.read.records

    @property
    def folder(self) -> Path:
        return self.read.folder

    @property
    def suffix(self) -> str:
        return self.read.suffix

    def __getitem__(self, name: str) -> Any:
        """A section's result by name (None where it does not apply); an unknown name lists the sections."""
        SECTIONS.get(name)
        return self.results.get(name)

    def sections(self) -> list[tuple[type[Section], Any]]:
        """The sections that apply, in the page's order, with their results."""
        return [(section, self.results[name]) for name, section in page_order()
                if self.results.get(name) is not None]

    def notes(self) -> list[str]:
        return [*self.read.notes, *(note for section, result in self.sections() for note in section.notes(result, self))]

    def warnings(self) -> list[str]:
        return [warning for section, result in self.sections() for warning in section.warnings(result, self)]


def page_order() -> list[tuple[str, type[Section]]]:
    return sorted(((name, SECTIONS.get(name)) for name in SECTIONS.names()), key=lambda item: item[1].order)


def analyse(sweep_dir: str | Path, metric: str | None = None, by: Sequence[str] = (),
            at: Mapping[str, Any] | None = None) -> Analysis:
    """Every section's result over the sweep folder's runs (no file written, no network): what
    report.md, the console, W&B, the plots and the results page render. See read_sweep for which
    records count and for another `metric` than the sweep's; Analysis for `by` and `at`."""
    analysis = Analysis(read_sweep(sweep_dir, metric), tuple(by), at)
    for name, section in sorted(page_order(), key=lambda item: item[1].computed_after or item[1].order):
        analysis.results[name] = section.compute(analysis)
    return analysis


import_modules(__name__, __path__)  # every module: each registers its section
