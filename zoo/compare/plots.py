"""The comparison's pictures: eval curves per variant with seed bands, and one chart per axis with intervals."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zoo.compare.comparison import Comparison
from zoo.compare.sensitivity import LOSS
from zoo.compare.stats import AxisEffect, VariantRow, curve_metric, curve_title
from zoo.files import save_figure
from zoo.metric_names import MetricName
from zoo.sweep.names import value_text


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


MAX_LINES = 6
"""More variants than this in one panel: split the panels by the grid's first axes."""


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


def variant_colour(sweep: Comparison, assignment: dict[str, Any], skip: Sequence[str] = ()) -> str:
    """A variant's colour in every plot of a sweep: its grid_order as one number (over the grid keys
    not in `skip`: a curve panel's own keys), so one variant is one colour in each plot."""
    sizes = [len(values) for key, values in sweep.grid.items() if key not in skip and key in assignment]
    index = 0
    for size, place in zip(sizes, grid_order(sweep, assignment, skip), strict=True):
        index = index * size + place
    return f"C{index % 10}"


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


def marked(fig, note: str):
    """The figure with `note` in red at its top left: a secondary (exploratory) metric says so on
    every plot, not only in the report."""
    if note:
        fig.text(0.005, 0.995, note, ha="left", va="top", fontsize=8, color="#c44e52")
    return fig


def curves_png(sweep: Comparison, rows: list[VariantRow], path: Path, note: str = "") -> Path:
    return save_figure(marked(curve_figure(sweep, rows), note), path, dpi=110, bbox_inches="tight")


def effect_figure(sweep: Comparison, effect: AxisEffect):
    """Left: each value's mean with its 95% interval; right: each paired difference from the first
    value, with a line at zero, its Holm-adjusted p written beside it and, where that p separates it
    (zoo.compare.agreement.separates, the tables' rule), drawn filled red with a star. Points, not bars,
    so small differences near 1.0 stay visible."""
    from zoo.compare.agreement import LEVEL

    plt = pyplot()
    columns = len(effect.values) + len(effect.other_pairs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(3.6 + 1.4 * columns, 4.0),
                                      gridspec_kw={"width_ratios": [len(effect.values), max(1, columns - 1)]})
    plot_estimates(left, [value_text(v) for v in effect.values], effect.estimates)
    left.set_ylabel(sweep.metric)
    left.set_title(f"{effect.label}\nmean, 95% CI", fontsize=10)
    if effect.identity is not None:  # one computation: its check, never a difference with a p
        import textwrap

        right.axis("off")
        right.text(0.0, 0.5, textwrap.fill(effect.identity.text(), 40), fontsize=8, va="center",
                   color="#333333" if effect.identity.holds else "#c44e52")
        right.set_title("identity check, not an effect", fontsize=10)
        fig.tight_layout()
        return fig
    first = value_text(effect.values[0])
    differences = [e for _, e in effect.differences]
    tests = effect.tests or [(math.nan, math.nan)] * len(differences)
    tested = [f"{value_text(v)} − {first}" for v, _ in effect.differences]
    plot_differences(right, tested, differences, [holm for _, holm in tests], sweep.metric)
    if effect.other_pairs:  # a third value's difference from the second too: shown, never tested
        shown = [f"{value_text(b)} − {value_text(a)}\n(not tested)" for a, b, _ in effect.other_pairs]
        plot_estimates(right, shown, [e for _, _, e in effect.other_pairs], colour="#999999", start=len(tested))
        right.set_xticks(range(len(tested) + len(shown)), tested + shown, fontsize=8)
        right.set_xlim(-0.6, len(tested) + len(shown) - 0.4)
    right.set_title(f"paired difference, 95% CI\n* Holm p < {LEVEL}", fontsize=10)
    fig.tight_layout()
    return fig


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
    fig.suptitle(f"{sweep.name}: paired differences, 95% CI; * Holm p < {LEVEL}", fontsize=10)
    fig.tight_layout()
    return fig


def by_png(sweep: Comparison, simple, given_key: str, path: Path, note: str = "") -> Path:
    return save_figure(marked(by_figure(sweep, simple, given_key), note), path, dpi=110)


def effect_png(sweep: Comparison, effect: AxisEffect, path: Path, note: str = "") -> Path:
    return save_figure(marked(effect_figure(sweep, effect), note), path, dpi=110)


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


def scatter_png(a: Comparison, b: Comparison, pairs, agreement, path: Path) -> Path:
    """Each variant's score on A against its score on B, with 95% intervals where there are seeds
    enough; a ranking that transfers runs from the worse corner to the better one."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 6.0))
    for name, ra, rb in pairs:
        xerr = None if math.isnan(ra.metric.low) else [[ra.metric.mean - ra.metric.low], [ra.metric.high - ra.metric.mean]]
        yerr = None if math.isnan(rb.metric.low) else [[rb.metric.mean - rb.metric.low], [rb.metric.high - rb.metric.mean]]
        ax.errorbar([ra.metric.mean], [rb.metric.mean], xerr=xerr, yerr=yerr, fmt="o", color=variant_colour(a, ra.assignment),
                    capsize=3, markersize=5, label=name)
    ax.set_xlabel(f"A: {a.name}, {a.metric} ({a.goal})")
    ax.set_ylabel(f"B: {b.name}, {b.metric} ({b.goal})")
    ax.set_title(f"Kendall's tau-b {agreement.tau:.2f} [{agreement.low:.2f}, {agreement.high:.2f}], "
                 f"p = {agreement.p_value:.3g}", fontsize=10)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110, bbox_inches="tight")


def rate_png(sweep: Comparison, label: str, curves, assignments: dict[str, dict[str, Any]], path: Path) -> Path:
    return save_figure(rate_figure(sweep, label, curves, assignments), path, dpi=110, bbox_inches="tight")


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
    ax.set_xlabel(f"{label} (log)")
    ax.set_ylabel(f"final {LOSS} (diverged: initial loss)")
    ax.set_title(f"{name}: final {LOSS} against {label}\nmean over seeds, band: 95% interval (min-max under 3 "
                 "seeds); x: a seed diverged", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig
