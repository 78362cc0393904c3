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
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
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
        ax.legend(fontsize=6, loc="best", ncol=2 if len(rows) > 8 else 1)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def effect_png(sweep: SweepSpec, effect: AxisEffect, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(1.6 + 1.1 * len(effect.values), 3.6))
    means = [e.mean for e in effect.estimates]
    errors = [[0.0 if math.isnan(e.low) else e.mean - e.low for e in effect.estimates],
              [0.0 if math.isnan(e.high) else e.high - e.mean for e in effect.estimates]]
    labels = [value_text(v) for v in effect.values]
    ax.bar(labels, means, yerr=errors, capsize=6, color="#4c72b0")
    for x, e in enumerate(effect.estimates):
        ax.annotate(f"n={e.n}", (x, 0), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7,
                    color="white")
    ax.set_ylabel(sweep.metric)
    ax.set_title(f"{effect.label}: mean and 95% CI", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
