"""How the results page writes a number, an interval and a difference, and which runs a table
pairs: shared by its table kinds (tables.py, tuned_kinds.py)."""

from __future__ import annotations

import functools
from pathlib import Path

from zoo.compare.agreement import separates
from zoo.compare.sections import Analysis, analyse
from zoo.compare.stats import Estimate
from zoo.specs.yamlio import load_yaml


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


@functools.cache
def analysed(folder: Path, metric: str) -> Analysis:
    """Every section of `zoo compare` over the folder's runs on `metric`, computed once per page:
    a tuned sweep at its chosen values, or with `METRIC@KEY=VALUE` at one tuned value (the
    comparison an untuned sweep would make)."""
    metric, _, fixed = metric.partition("@")
    if not fixed:
        return analyse(folder, metric)
    key, _, text = fixed.partition("=")
    return analyse(folder, metric, at={key: load_yaml(text, fixed)})
