"""Does the best learning rate hold across widths? muP claims it does; under the standard
parametrization with Adam it falls, about as 1/width. Where the sweep declares
`rate_slope_margin` (decades per doubling of width), each variant's best rate is found per seed
at each width and fitted against log2(width); the rate is said to hold only where two one-sided
t-tests put the slope inside ±margin (an equivalence interval), and to fall or rise where the
t-test separates it from 0; otherwise not separated (inconclusive). Both families are Holm over
the variants. A variant with a seed whose best rate sits at the end of the tried rates at some
width gets no verdict (the best may lie past the grid, and a slope of the other seeds alone would
leave out the steepest), nor does a variant with one seed.

A seed's best rate is the tried rate with the best `choose_on` (validation) value, refined by the
parabola through it and its two neighbours on the log10 grid, as a learning-rate sweep's minimum
is read; a run that diverged or failed counts as the worst value."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from zoo.compare.agreement import LEVEL
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.sensitivity import learning_rate_keys, seed_runs
from zoo.compare.stats import Estimate, holm
from zoo.compare.tables import markdown_table, text_table
from zoo.compare.wandb_run import Rows
from zoo.metrics import Resolved
from zoo.sweep.names import assignment_text


@dataclass
class RateSlope:
    variant: str
    """The variant's grid values but its width."""
    best: dict[int, dict[int, float]]
    """Each seed's best log10 rate at each width."""
    slopes: dict[int, float]
    """Each seed's least-squares slope of its best log10 rate on log2(width): decades per doubling."""
    edges: list[tuple[int, int]] = field(default_factory=list)
    """(seed, width) where the seed's best rate is at the end of the tried rates: no verdict for the variant."""
    missing: list[tuple[int, int]] = field(default_factory=list)
    """(seed, width) where a tried rate has no run yet: that seed is left out."""
    estimate: Estimate = field(default_factory=lambda: Estimate.of([]))
    tost_p: float = math.nan
    t_p: float = math.nan
    verdict: str = ""


@dataclass
class RateTransfer:
    key: str
    margin: float
    widths: list[int]
    slopes: list[RateSlope]


def width_of(sweep, assignment: dict[str, Any]) -> int | None:
    """The cell's d_model: a grid value of model.d_model, or its named size's."""
    if "model.d_model" in assignment:
        return int(assignment["model.d_model"])
    size = sweep.design.sizes.get(assignment.get("size"), {})
    return int(size["model.d_model"]) if "model.d_model" in size else None


def best_log_rate(values: list[float], rates: list[float], goal: str) -> tuple[float, bool]:
    """(log10 of the best rate refined by the parabola through its neighbours, whether it is at
    an end of the tried rates); `values` in the order of `rates` (ascending), nan for a bad run."""
    worst = -math.inf if goal == "max" else math.inf
    scored = [worst if not math.isfinite(v) else (-v if goal == "max" else v) for v in values]
    best = int(np.argmin(scored))
    logs = np.log10(rates)
    if best in (0, len(rates) - 1) or not all(map(math.isfinite, scored[best - 1 : best + 2])):
        return float(logs[best]), best in (0, len(rates) - 1)
    (x0, x1, x2), (y0, y1, y2) = logs[best - 1 : best + 2], scored[best - 1 : best + 2]
    bend = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0)  # the parabola through the three points opens upward
    if bend >= 0:
        return float(x1), False
    return float(x1 - 0.5 * ((x1 - x0) ** 2 * (y1 - y2) - (x1 - x2) ** 2 * (y1 - y0)) / bend), False


def slope_tests(values: list[float], margin: float) -> tuple[float, float]:
    """(two-sided t-test p of slope 0, TOST p against ±margin) over the seeds' slopes."""
    x = np.asarray(values, dtype=float)
    n, mean = x.size, float(x.mean())
    se = float(x.std(ddof=1)) / math.sqrt(n)
    if se == 0:
        return (0.0 if mean else 1.0), (0.0 if abs(mean) < margin else 1.0)
    t_p = float(2 * stats.t.sf(abs(mean) / se, n - 1))
    tost = max(float(stats.t.sf((mean + margin) / se, n - 1)), float(stats.t.cdf((mean - margin) / se, n - 1)))
    return t_p, tost


def rate_transfer(analysis: Analysis) -> RateTransfer | None:
    margin = analysis.read.comparison.rate_slope_margin
    tuning = analysis["tuning"]
    if margin is None or tuning is None:
        return None
    tuned, (key,) = tuning.tuned, learning_rate_keys(tuning.tuned)
    rates = sorted(float(rate) for rate in tuned.tune[key])
    goal = Resolved.of(tuned.choose_on).goal
    labels, width_keys = tuned.labels(), {"size", "model.d_model"}
    by_variant: dict[str, RateSlope] = {}
    widths: set[int] = set()
    for choice in tuning.choices:
        width = width_of(tuned, choice.assignment)
        if width is None:
            continue
        widths.add(width)
        name = assignment_text(labels, ((k, v) for k, v in choice.assignment.items() if k not in width_keys)) or "every run"
        found = by_variant.setdefault(name, RateSlope(name, {}, {}))
        for seed, runs in sorted(seed_runs(tuned, tuning.choosing, choice, key).items()):
            if len(runs) < len(rates):
                found.missing.append((seed, width))
                continue
            values = [runs[rate].metrics.get(tuned.choose_on, math.nan) if runs[rate].status == "finished" else math.nan
                      for rate in sorted(runs, key=float)]
            found.best.setdefault(seed, {})[width], at_edge = best_log_rate(values, rates, goal)
            if at_edge:
                found.edges.append((seed, width))
    out = list(by_variant.values())
    for found in out:
        complete = {seed: best for seed, best in found.best.items() if len(best) == len(widths)}
        for seed, best in complete.items():
            x = np.log2(sorted(best))
            found.slopes[seed] = float(np.polyfit(x, [best[w] for w in sorted(best)], 1)[0])
        found.estimate = Estimate.of(list(found.slopes.values()))
        if found.estimate.n >= 2 and not found.edges:
            found.t_p, found.tost_p = slope_tests(list(found.slopes.values()), margin)
    holm_t, holm_tost = holm([f.t_p for f in out]), holm([f.tost_p for f in out])
    for found, t_p, tost_p in zip(out, holm_t, holm_tost, strict=True):
        found.t_p, found.tost_p = t_p, tost_p
        found.verdict = verdict(found, margin)
    return RateTransfer(key, margin, sorted(widths), out)


def verdict(found: RateSlope, margin: float) -> str:
    if found.edges:
        return f"no verdict: the best rate sits at the end of the tried rates ({edges_text(found)})"
    if found.estimate.n < 2:
        return f"no verdict: {found.estimate.n} seed(s) with a best rate at every width"
    if found.t_p < LEVEL:
        return f"{'falls' if found.estimate.mean < 0 else 'rises'} with width (t-test Holm p {found.t_p:.2g})"
    if found.tost_p < LEVEL:
        return f"holds: level within ±{margin:g} decades per doubling (TOST Holm p {found.tost_p:.2g})"
    return f"not separated (inconclusive: not level within ±{margin:g}, TOST Holm p {found.tost_p:.2g})"


def edges_text(found: RateSlope) -> str:
    return ", ".join(f"seed {seed} at d={width}" for seed, width in found.edges)


SLOPE_COLUMNS = ["variant", "seeds", "slope (decades per doubling) [95% t-interval]", "t-test Holm p", "TOST Holm p",
           "verdict", "best rate at the grid's end"]


def slope_rows(result: RateTransfer) -> list[list[str]]:
    def signed(x: float) -> str:
        return f"{round(x, 3) + 0.0:+.3f}"  # + 0.0: a slope that rounds to zero reads +0.000, not -0.000

    def slope(e: Estimate) -> str:
        return "—" if e.n == 0 else signed(e.mean) + (f" [{signed(e.low)}, {signed(e.high)}]" if e.n >= 2 else " (one seed)")

    return [[f.variant, str(f.estimate.n), slope(f.estimate), f"{f.t_p:.2g}", f"{f.tost_p:.2g}", f.verdict,
             edges_text(f) or "—"] for f in result.slopes]


@register("rate_transfer")
class RateTransferSection(Section):
    order, stream = 16, "table"  # beside the tuning and its LR sensitivity

    @classmethod
    def compute(cls, analysis: Analysis) -> RateTransfer | None:
        return rate_transfer(analysis)

    @classmethod
    def notes(cls, result: RateTransfer, analysis: Analysis) -> list[str]:
        return [f"{found.variant}: seed {seed} at d={width} is left out of the best rate across widths (a tried rate "
                "has no run yet)" for found in result.slopes for seed, width in found.missing]

    @classmethod
    def markdown(cls, result: RateTransfer, analysis: Analysis) -> list[str]:
        widths = ", ".join(map(str, result.widths))
        return ["## The best rate across widths", "",
                f"Each variant's best `{result.key}` per seed (on `{analysis['tuning'].tuned.choose_on}`, refined by "
                f"the parabola through its neighbours on the log grid) at widths {widths}, fitted against log2(width): "
                "the slope in decades per doubling, its 95% t-interval over seeds. It holds where two one-sided t-tests "
                f"put it inside the declared ±{result.margin:g} (Holm over the variants), falls or rises where the "
                "t-test separates it from 0, else is not separated (inconclusive); a variant with a seed whose best rate "
                "is at the end of the tried rates at some width gets no verdict.", "",
                *markdown_table(SLOPE_COLUMNS, slope_rows(result)), ""]

    @classmethod
    def console(cls, result: RateTransfer, analysis: Analysis) -> str:
        return (f"\nBest rate across widths (±{result.margin:g} decades per doubling):\n"
                + text_table(SLOPE_COLUMNS, slope_rows(result)))

    @classmethod
    def tables(cls, result: RateTransfer, analysis: Analysis) -> dict[str, Rows]:
        return {"rate_transfer": (["variant", "seeds", "slope", "slope_low", "slope_high", "t_holm_p", "tost_holm_p",
                                   "verdict"],
                                  [[f.variant, f.estimate.n, f.estimate.mean, f.estimate.low, f.estimate.high, f.t_p,
                                    f.tost_p, f.verdict] for f in result.slopes])}
