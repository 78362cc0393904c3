"""What the comparison's pictures share: matplotlib without a display, a variant's colour and
order (the same in every plot of a sweep), panels for many variants, the note a secondary metric
writes on every plot, and the charts of estimates and of paired differences with their Holm p.
Each section draws its own plots (zoo.compare.sections) with these."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from zoo.compare.comparison import Comparison


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


MAX_LINES = 6
"""More variants than this in one panel: split the panels by the grid's first axes."""


def plain_log_axis(axis) -> None:
    """A log axis labelled in plain numbers (2.4, 0.003), where matplotlib's default writes
    "2.4 × 10^0" on the minor ticks of a span under a decade."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):  # which ticks get a label stays matplotlib's choice; only the text is ours
        def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
            return f"{x:g}"

    axis.set_major_formatter(Plain())
    axis.set_minor_formatter(Plain(minor_thresholds=(2, 0.4)))


def panel_keys(sweep: Comparison, count: int) -> list[str]:
    """The fewest leading grid keys whose values split `count` variants into panels of at most
    MAX_LINES lines each (none when one panel holds them all)."""
    keys: list[str] = []
    panels = 1
    for key in list(sweep.grid)[:-1]:
        if math.ceil(count / panels) <= MAX_LINES:
            break
        keys.append(key)
        panels *= len(sweep.grid[key])
    return keys


def grid_order(sweep: Comparison, assignment: dict[str, Any], skip: Sequence[str] = ()) -> tuple[int, ...]:
    """A variant's place in the grid (each key's value index, keys in `skip` aside), as the sweep
    expands its cells: the order the plots list variants in. A value the grid no longer lists
    counts as its first."""
    return tuple(values.index(assignment[key]) if assignment[key] in values else 0
                 for key, values in sweep.grid.items() if key not in skip and key in assignment)


MARKERS = "osD^vP*X<>"
"""One marker per variant beside its colour, so two variants that share one of matplotlib's ten
colours are still told apart."""


def variant_index(sweep: Comparison, assignment: dict[str, Any], skip: Sequence[str] = ()) -> int:
    """A variant's grid_order as one number (over the grid keys not in `skip`: a panel's own keys)."""
    sizes = [len(values) for key, values in sweep.grid.items() if key not in skip and key in assignment]
    index = 0
    for size, place in zip(sizes, grid_order(sweep, assignment, skip), strict=True):
        index = index * size + place
    return index


def variant_colour(sweep: Comparison, assignment: dict[str, Any], skip: Sequence[str] = ()) -> str:
    """A variant's colour in every plot of a sweep, by its variant_index, so one variant is one
    colour in each plot."""
    return f"C{variant_index(sweep, assignment, skip) % 10}"


def variant_marker(sweep: Comparison, assignment: dict[str, Any], skip: Sequence[str] = ()) -> str:
    """A variant's marker, by its variant_index: colour and marker together repeat only past 10 x 10 variants."""
    index = variant_index(sweep, assignment, skip)
    return MARKERS[(index // 10 + index) % 10]


def marked(fig, note: str):
    """The figure with `note` in red at its top left: a secondary (exploratory) metric says so on
    every plot, not only in the report."""
    if note:
        fig.text(0.005, 0.995, note, ha="left", va="top", fontsize=8, color="#c44e52")
    return fig


def plot_differences(ax, labels: list[str], differences, holm_ps: list[float], metric: str) -> None:
    """Paired differences with their intervals, a line at zero, each Holm p written beside its point
    and, where it separates the difference (the tables' rule), a red star."""
    from zoo.compare.agreement import separates

    marks = [f"Holm p={holm:.3g}" + (" *" if separates(e, holm) else "") for e, holm in zip(differences, holm_ps, strict=True)]
    plot_estimates(ax, labels, differences, marks)
    for x, (e, holm) in enumerate(zip(differences, holm_ps, strict=True)):
        if separates(e, holm):
            ax.plot([x], [e.mean], marker="*", markersize=13, color="#c44e52", linestyle="none")
    ax.axhline(0.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_ylabel(f"difference in {metric}")


def plot_estimates(ax, labels: list[str], estimates, marks: list[str] | None = None, colour: str = "#4c72b0",
                   start: int = 0) -> None:
    """Means with their intervals, each point annotated with its n (and its mark, where given), from
    x = `start` on."""
    xs = range(start, start + len(labels))
    means = [e.mean for e in estimates]
    errors = [[0.0 if math.isnan(e.low) else e.mean - e.low for e in estimates],
              [0.0 if math.isnan(e.high) else e.high - e.mean for e in estimates]]
    ax.errorbar(xs, means, yerr=errors, fmt="o", capsize=6, color=colour)
    for x, e, mark in zip(xs, estimates, marks or [""] * len(labels), strict=True):
        ax.annotate("\n".join(filter(None, [f"n={e.n}", mark])), (x, e.mean), textcoords="offset points",
                    xytext=(8, 0), fontsize=7)
    if not start:  # a later series (start > 0): the caller labels the whole axis
        ax.set_xticks(list(xs), labels, fontsize=8)
        ax.set_xlim(-0.6, len(labels) - 0.4)


