"""What a sweep's design answers, shown beside its paired differences: the factorial analysis
with the seed as block (zoo.compare.factorial) and each difference's power (zoo.compare.power), as
report.md lines, console text and W&B table rows."""

from __future__ import annotations

import math

from zoo.compare.factorial import Factorial
from zoo.compare.power import power_of, power_text
from zoo.compare.stats import AxisEffect, primary_family
from zoo.compare.tables import markdown_table, number, text_table
from zoo.compare.wandb_run import Rows
from zoo.sweep.names import value_text
from zoo.sweep.spec import SweepSpec

COLUMNS = ["term", "df", "sum of squares", "F", "p", "Holm p"]


def factorial_rows(result: Factorial) -> list[list[str]]:
    rows = [[t.name, str(t.df), number(t.ss), number(t.f, 3), number(t.p, 3), number(t.holm_p, 3)] for t in result.terms]
    return [*rows, ["residual", str(result.residual_df), number(result.residual_ss), "", "", ""]] if rows else rows


def factorial_heading(result: Factorial) -> str:
    if result.note:
        return f"Factorial analysis (seed as block) of {result.units} units: not tested, {result.note}."
    return (f"Factorial analysis of {result.units} units (each distinct computation once): every key's main effect and "
            f"every two-way interaction, the seed as a block, F against the residual ({result.residual_df} degrees of "
            "freedom); Holm over the grid's terms.")


def factorial_lines(result: Factorial) -> list[str]:
    rows = factorial_rows(result)
    return ["## Factorial analysis (seed as block)", "", factorial_heading(result), "",
            *(markdown_table(COLUMNS, rows) if rows else []), ""]


def factorial_text(result: Factorial) -> str:
    rows = factorial_rows(result)
    return "\n".join([factorial_heading(result), *([text_table(COLUMNS, rows)] if rows else [])])


def factorial_table(result: Factorial) -> Rows:
    return (["term", "df", "ss", "f", "p", "holm_p"],
            [[t.name, t.df, t.ss, t.f, t.p, t.holm_p] for t in result.terms]
            + ([["residual", result.residual_df, result.residual_ss, math.nan, math.nan, math.nan]] if result.terms else []))


def power_lines(sweep: SweepSpec, effects: list[AxisEffect]) -> list[str]:
    """Each paired difference's detectable size at 80% power and the seeds its planned size needs:
    the declared margin where there is one, else the observed difference."""
    family = len(primary_family(effects))
    margin = sweep.margins.get(sweep.metric)
    lines = []
    for effect in effects:
        for value, e in effect.differences:
            wanted = margin if margin else e.mean
            label = f"{effect.label}: {value_text(value)} − {value_text(effect.values[0])}"
            lines.append(power_text(label, e, power_of(e, family, wanted), e.n / max(len(sweep.seeds), 1)))
    return lines
