"""How the results page writes a number, an interval and a difference, and which runs a table
pairs: shared by its table kinds (tables.py, tuned_kinds.py)."""

from __future__ import annotations

from pathlib import Path

from zoo.compare.agreement import separates
from zoo.compare.load import read_sweep
from zoo.compare.stats import Estimate
from zoo.compare.tuned import as_compared, as_variant_run, compared_sweep
from zoo.specs.yamlio import load_yaml
from zoo.sweep.spec import SweepSpec


def figure(x: float) -> str:
    """Three significant figures, trailing zeros kept: 0.610, 0.0489, 0.00667."""
    return f"{x:#.3g}".rstrip(".").replace("-", "−")


def signed(x: float) -> str:
    return "0" if x == 0 else ("+" if x > 0 else "") + figure(x)


def shown(e: Estimate, holm_p: float | None = None) -> str:
    """`+0.0510 [0.0350, 0.0670]`: a mean with its interval; a difference (given its Holm-adjusted
    p) is signed, and bold where it separates."""
    fmt = figure if holm_p is None else signed
    if e.n < 2:
        return f"{fmt(e.mean)} (n={e.n})"
    text = f"{fmt(e.mean)} [{figure(e.low)}, {figure(e.high)}]"
    return f"**{text}**" if holm_p is not None and separates(e, holm_p) else text


def compared(folder: Path, metric: str) -> tuple[SweepSpec, list]:
    """The sweep and records a comparison pairs: a tuned sweep's chosen runs, or with
    `METRIC@KEY=VALUE` its runs at one tuned value (the comparison an untuned sweep would make)."""
    metric, _, fixed = metric.partition("@")
    read = read_sweep(folder, metric)
    if not fixed:
        return as_compared(read.sweep, read.records)
    key, _, text = fixed.partition("=")
    if key not in read.sweep.tune:
        raise SystemExit(f"README.md: {metric}@{fixed}: {key} is not a tuned key of {folder.name}")
    value, sweep = load_yaml(text, fixed), read.sweep
    return compared_sweep(sweep), [as_variant_run(sweep, r) for r in read.records if r.assignment.get(key) == value]
