"""The comparison's pictures: eval curves per variant, and one bar chart per axis with intervals."""

from __future__ import annotations

import math
from pathlib import Path

from zoo.compare.stats import AxisEffect, VariantRow
from zoo.sweep.spec import SweepSpec, value_text


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curves_png(sweep: SweepSpec, rows: list[VariantRow], path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 4.5))
    for row in rows:
        if row.curve:
            steps, values = zip(*row.curve)
            ax.plot(steps, values, marker="o", markersize=3, linewidth=1.2, label=row.variant)
    if sweep.target is not None:
        ax.axhline(sweep.target, color="grey", linestyle="--", linewidth=0.8, label=f"target {sweep.target:g}")
    ax.set_xlabel("training step")
    ax.set_ylabel(f"{sweep.metric} (mean over seeds)")
    ax.set_title(f"{sweep.name}: {sweep.metric} during training")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def effect_png(sweep: SweepSpec, effect: AxisEffect, path: Path) -> Path:
    """Left: each value's mean with its 95% interval; right: each paired difference from the first
    value, with a line at zero. Points, not bars, so small differences near 1.0 stay visible."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(3.0 + 1.4 * len(effect.values), 3.8))
    plot_estimates(left, [value_text(v) for v in effect.values], effect.estimates)
    left.set_ylabel(sweep.metric)
    left.set_title(f"{effect.label}: mean, 95% CI", fontsize=10)
    first = value_text(effect.values[0])
    plot_estimates(right, [f"{value_text(v)} − {first}" for v, _ in effect.differences],
                   [e for _, e in effect.differences])
    right.axhline(0.0, color="grey", linewidth=0.8, linestyle="--")
    right.set_title("paired difference, 95% CI", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_estimates(ax, labels: list[str], estimates) -> None:
    xs = range(len(labels))
    means = [e.mean for e in estimates]
    errors = [[0.0 if math.isnan(e.low) else e.mean - e.low for e in estimates],
              [0.0 if math.isnan(e.high) else e.high - e.mean for e in estimates]]
    ax.errorbar(xs, means, yerr=errors, fmt="o", capsize=6, color="#4c72b0")
    for x, e in zip(xs, estimates):
        ax.annotate(f"n={e.n}", (x, e.mean), textcoords="offset points", xytext=(8, 0), fontsize=7)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_xlim(-0.6, len(labels) - 0.4)
