"""How the comparison writes a number, an interval and a table (Markdown for report.md, aligned
columns for the console, rows for W&B), and the renderings more than one section shares: the
ranked table and the effects' tables (the comparison's own and the LR sensitivity's). A section's
other renderings live beside its computation, in zoo.compare.sections."""

from __future__ import annotations

import math

from scipy.stats import t as student_t

from zoo.compare.agreement import separates
from zoo.compare.comparison import Comparison
from zoo.compare.equivalence import tost_holm, verdicts
from zoo.compare.power import power_of
from zoo.compare.stats import AxisEffect, Estimate, SimpleEffect, VariantRow, left_the_family, sides
from zoo.compare.wandb_run import Rows
from zoo.metrics import CURVE, range_of
from zoo.records import RunRecord
from zoo.sweep.names import value_text


def number(x: float | None, digits: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


def holm_said(p: float, adjusted: float, digits: int = 3) -> str:
    """A test's Holm p as the tables say it, or why it has none: a test with a p but no Holm p left
    the family (zoo.compare.exact.tarone), one with neither has too few pairs."""
    if left_the_family(p, adjusted):
        return "left the family (its pairs cannot reach its share of the level)"
    return "Holm p —" if math.isnan(adjusted) else f"Holm p {adjusted:.{digits}g}"


def interval(e: Estimate) -> str:
    return "—" if math.isnan(e.low) else f"[{number(e.low)}, {number(e.high)}]"


def table(sweep: Comparison, rows: list[VariantRow]) -> tuple[list[str], list[list[str]]]:
    columns = ["rank", "variant", f"{sweep.metric} mean", "95% CI", "std", "seeds", "parameters"]
    if sweep.target is not None:
        columns += [f"steps to {sweep.target:g}", f"seconds to {sweep.target:g}", "reached", "steps per seed"]
    columns += ["diverged", "failed"]
    data = []
    for rank, row in enumerate(rows, 1):
        mean = f"non-finite ({row.nonfinite} of {row.metric.n})" if row.nonfinite else number(row.metric.mean)
        line = [str(rank), row.variant, mean, interval(row.metric), number(row.metric.std),
                str(row.metric.n), f"{row.parameters:,}" if row.parameters else "—"]
        if sweep.target is not None:
            bound = "≥" if row.reached < len(row.seed_steps) else ""  # a censored seed: the mean is a lower bound
            line += [bound + number(row.steps_to_target), bound + number(row.seconds_to_target, 3),
                     f"{row.reached} of {len(row.seed_steps)}", seed_steps_text(row)]
        line += [str(row.diverged), str(row.failed)]
        data.append(line)
    return columns, data


def seed_steps_text(row: VariantRow) -> str:
    """`180, >240`: each seed's step at the target; `>N` for a seed that ended at step N without it."""
    return ", ".join(f"{step}" if reached else f">{step}" for step, reached in row.seed_steps) or "—"


DIFFERENCE_CI = "95% CI (unadjusted)"
"""A paired difference's t-interval, labelled as what it is: not adjusted for the family its verdict
is judged in, so it may exclude 0 where Holm's p does not separate."""

CENSORED = ("Steps and seconds to {target:g}: the mean over finished seeds of the first evaluation that met it; a "
            "seed that never did counts at its last step (`>N` per seed), so a mean marked ≥ is a lower bound.")


def value_kind(metric: str) -> str:
    """What one run's value of the metric is: an eval_auc metric is no final value."""
    if metric.startswith(CURVE + "/"):
        return f"each run's mean of eval/{metric.split('/', 1)[1]} over its evaluations (the area under its curve)"
    return "each run's final value"


def range_text(metric: str) -> str:
    """How the intervals of a bounded metric are held inside its range, said where they are."""
    low, high = range_of(metric)
    if math.isinf(low) and math.isinf(high):
        return ""
    if math.isinf(high):
        return f", held at {low:g} or more, what `{metric}` can be"
    width = high - low
    return f", held inside what `{metric}` can be: [{low:g}, {high:g}], and a difference inside [{-width:g}, {width:g}]"


def censored_note(sweep: Comparison) -> list[str]:
    return [CENSORED.format(target=sweep.target), ""] if sweep.target is not None else []


HOLM = ("p: two-sided exact sign-flip test of the paired differences (Fisher's randomization test; at n pairs no p "
        "falls below 2 / 2^n, and none is 0). Holm p: adjusted by Holm's step-down method over the primary family, "
        "of the sweep's {members} paired differences and two-way interactions on its metric, the {m} whose exact "
        "test can reach its share of the level (Tarone 1990: a test that cannot, whatever the data, leaves the "
        "family first, and its Holm p is —), so that the chance that any of "
        "them excludes 0 by chance alone stays within the level (a difference with Holm p < 0.05 holds at 5% for "
        "the whole family). Verdict: separated where Holm p < 0.05; level only where the sweep declares a margin "
        "for the metric (`margins:`) and two one-sided sign-flip tests exclude it (TOST, Holm over the same family); "
        "otherwise not separated (inconclusive), with the narrowest margin the pairs could have excluded.")


def tuned_runs(trained: list[RunRecord]) -> str:
    return f" (each variant's at its chosen value, of {len(trained)} trained)"


def few_seeds_note(rows: list[VariantRow]) -> list[str]:
    """A warning where a variant's interval rests on two seeds: t with one degree of freedom puts its
    95% interval at 12.7 standard errors either side of the mean, wide by construction."""
    two = [row.variant for row in rows if row.metric.n == 2]
    if not two:
        return []
    return [f"{len(two)} of {len(rows)} variants have 2 finished seeds: their 95% intervals are the mean ± "
            f"{student_t.ppf(0.975, 1):.1f} standard errors (t with 1 degree of freedom), wide by construction; "
            "run more seeds to narrow them"]


def noise_line(noise: tuple[float, int]) -> str:
    std, df = noise
    if not df:
        return "Seed-to-seed noise: not measured (no variant has two finished seeds)."
    return (f"Seed-to-seed noise: standard deviation {number(std)} within a variant, pooled over variants ({df} degrees "
            "of freedom): a difference between two variants of the same order is within what a change of seed moves.")


def tested(effect: AxisEffect) -> list[tuple[str, str, Estimate, tuple[float, float]]]:
    """(axis, what is tested, its estimate, (p, Holm p)) of an effect's paired differences, then
    of its interactions with the keys after it."""
    first = value_text(effect.values[0])
    return ([(effect.label, f"{value_text(v)} − {first}", e, test)
             for (v, e), test in zip(effect.differences, effect.tests, strict=True)]
            + [(f"{i.label} × {i.given_label}", i.contrast(), i.estimate, i.test) for i in effect.interactions])


def by_family(effects: list[AxisEffect], judge) -> list[list]:
    """`judge` applied to the primary family's (estimate, (p, Holm p)) and apart to the rest's (a
    size ladder's: zoo.compare.stats.sides), its answers back in each effect's `tested` order."""
    flat = [(e, test, side) for effect in effects
            for (_, _, e, test), side in zip(tested(effect), sides(effect), strict=True)]
    answers: list = [None] * len(flat)
    for side in (True, False):
        where = [index for index, (_, _, s) in enumerate(flat) if s == side]
        for index, answer in zip(where, judge([flat[i][:2] for i in where]), strict=True):
            answers[index] = answer
    out, start = [], 0
    for effect in effects:
        out.append(answers[start:start + len(sides(effect))])
        start += len(sides(effect))
    return out


def effect_verdicts(effects: list[AxisEffect], margin: float | None) -> list[list[str]]:
    """Each effect's tests' verdicts (zoo.compare.equivalence), over its family: the primary one,
    or apart, the sizes'."""
    return by_family(effects, lambda family: verdicts([(e, test[1]) for e, test in family], margin))


def effect_lines(effects: list[AxisEffect], margin: float | None = None) -> list[str]:
    lines = []
    for effect, said in zip(effects, effect_verdicts(effects, margin), strict=True):
        lines += [f"### {effect.label} (`{effect.key}`)", "", "| value | mean | 95% CI | n |", "|---|---|---|---|"]
        for value, e in zip(effect.values, effect.estimates):
            lines.append(f"| {value_text(value)} | {number(e.mean)} | {interval(e)} | {e.n} |")
        if effect.identity is not None:
            lines += ["", f"{'Identity check' if effect.identity.holds else '**Warning**'}: {effect.identity.text()}.", ""]
            continue
        apart = sides(effect).count(False)
        if apart:
            lines += ["", (f"Outside the primary family: {apart} of these tests (the sizes' differences and "
                           "interactions) are a family of their own, Holm apart: a ladder's sizes are its design, not "
                           "its question (`family:` in the sweep counts them in).")]
        lines += ["", f"| difference (paired) or interaction | mean | {DIFFERENCE_CI} | pairs | p | Holm p | verdict |",
                  "|---|---|---|---|---|---|---|"]
        for (axis, what, e, (p, adjusted)), verdict in zip(tested(effect), said, strict=True):
            shown = what if axis == effect.label else f"{axis}: {what}"
            lines.append(f"| {shown} | {number(e.mean)} | {interval(e)} | {e.n} | {number(p, 3)} | {number(adjusted, 3)} | "
                         f"{verdict} |")
        lines.append("")
    return lines


def effects_text(effects: list[AxisEffect], noise: tuple[float, int], margin: float | None = None) -> str:
    """The paired difference of every axis value from the axis's first value, and every two-way
    interaction, one line each, with its p-values and verdict, then the identity checks and the
    seed-to-seed noise."""
    rows = [[axis, what, number(d.mean), interval(d), str(d.n), number(p, 3), number(adjusted, 3), verdict]
            for e, said in zip(effects, effect_verdicts(effects, margin), strict=True)
            for (axis, what, d, (p, adjusted)), verdict in zip(tested(e), said, strict=True)]
    checks = [e.identity.text() for e in effects if e.identity is not None]
    columns = ["axis", "difference (paired) or interaction", "mean", DIFFERENCE_CI, "pairs", "p", "Holm p", "verdict"]
    return "\n".join([text_table(columns, rows), *checks, noise_line(noise)])


def effect_table(effects: list[AxisEffect], margin: float | None = None) -> Rows:
    """Each axis value's mean, then each paired difference from the first value and each interaction
    with its p-values, verdict, TOST Holm p (where a margin is declared) and the difference it
    detects at 80% power, as table rows."""
    tost = iter(t for row in by_family(effects, lambda family: tost_holm([(d, test[1]) for d, test in family], margin))
                for t in row)
    said = iter(verdict for row in effect_verdicts(effects, margin) for verdict in row)
    kept = iter(k for row in by_family(effects, lambda family: [sum(not math.isnan(test[1]) for _, test in family)]
                                       * len(family)) for k in row)

    def judged(e: Estimate, p: float, adjusted: float) -> list:
        family = next(kept)
        detectable = math.nan if math.isnan(adjusted) else power_of(e, family, 0.0).detectable
        return [p, adjusted, next(said), next(tost), detectable]

    rows = []
    for effect in effects:
        first = value_text(effect.values[0])
        rows += [[effect.label, value_text(v), "mean", e.mean, e.low, e.high, e.n, math.nan, math.nan, "", math.nan,
                  math.nan] for v, e in zip(effect.values, effect.estimates)]
        rows += [[effect.label, value_text(v), f"difference from {first}", e.mean, e.low, e.high, e.n, *judged(e, p, adjusted)]
                 for (v, e), (p, adjusted) in zip(effect.differences, effect.tests, strict=True)]
        rows += [[effect.label, value_text(i.value), f"interaction with {i.given_label}: at {value_text(i.at)} − at "
                  f"{value_text(i.base)}", i.estimate.mean, i.estimate.low, i.estimate.high, i.estimate.n,
                  *judged(i.estimate, *i.test)] for i in effect.interactions]
        if effect.identity is not None:  # identical cells of compared: the check, no difference and no p
            check = effect.identity
            rows.append([effect.label, " = ".join(value_text(v) for v in effect.values), "identity check",
                         check.largest, math.nan, math.nan, check.compared, math.nan, math.nan, "", math.nan, math.nan])
    return ["axis", "value", "kind", "mean", "ci_low", "ci_high", "n", "p", "holm_p", "verdict", "tost_holm_p",
            "detectable_80"], rows


def simple_labels(effect: SimpleEffect, value) -> list[str]:
    return [effect.label, f"{value_text(value)} − {value_text(effect.reference)}",
            f"{effect.given_label}={value_text(effect.given_value)}"]


def simple_rows(effects: list[SimpleEffect]) -> Rows:
    """Every axis's paired differences at each value of every other axis, with their p-values, as
    table rows."""
    return (["axis", "difference", "at", "mean", "ci_low", "ci_high", "pairs", "p", "holm_p"],
            [[*simple_labels(e, v), d.mean, d.low, d.high, d.n, p, adjusted]
             for e in effects for (v, d), (p, adjusted) in zip(e.differences, e.tests, strict=True)])


def holm_text(e: Estimate, adjusted: float) -> str:
    """A Holm-adjusted p, starred where it separates the difference (the tables' one rule)."""
    return number(adjusted, 3) + (" *" if separates(e, adjusted) else "")


def simple_lines(effects: list[SimpleEffect]) -> list[str]:
    return markdown_table(["axis", "difference (paired)", "at", "mean", DIFFERENCE_CI, "pairs", "p", "Holm p"],
                          [[*simple_labels(e, v), number(d.mean), interval(d), str(d.n), number(p, 3),
                            holm_text(d, adjusted)]
                           for e in effects for (v, d), (p, adjusted) in zip(e.differences, e.tests, strict=True)])


def curve_table(rows: list[VariantRow]) -> Rows:
    """Every variant's evaluation curve: the mean over seeds and the band at each evaluated step."""
    return (["variant", "step", "mean", "band_low", "band_high", "seeds"],
            [[row.variant, b.step, b.mean, b.low, b.high, b.n] for row in rows for b in row.curve])


def run_lines(sweep: Comparison, records: list[RunRecord]) -> list[str]:
    """Every run the comparison rests on, one row each: its seed's value (what the means and
    intervals summarize), its status, and the W&B run that holds its curves."""
    rows = [[str(r.variant), str(r.seed), r.status, number(r.value(sweep.metric)), str(r.steps),
             f"`{r.wandb_run}` ({r.wandb_dir})" if r.wandb_run else "—"]
            for r in sorted(records, key=lambda r: (str(r.variant), r.seed or 0))]
    return markdown_table(["variant", "seed", "status", sweep.metric, "steps", "W&B run (local folder)"], rows)


def markdown_table(columns: list[str], data: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns), *("| " + " | ".join(r) + " |" for r in data)]


def text_table(columns: list[str], data: list[list[str]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in data)) if data else len(c) for i, c in enumerate(columns)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)) for line in [columns, *data])
