"""The factorial analysis of the experimental units, the seed as block: every key's main effect
and every two-way interaction against the residual, Holm over the grid's terms."""

from __future__ import annotations

import math

from zoo.compare.factorial import Factorial, factorial
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.tables import markdown_table, number, text_table
from zoo.compare.wandb_run import Rows

COLUMNS = ["term", "df", "sum of squares", "F", "p", "Holm p"]


def factorial_rows(result: Factorial) -> list[list[str]]:
    rows = [[t.name, str(t.df), number(t.ss), number(t.f, 3), number(t.p, 3), number(t.holm_p, 3)] for t in result.terms]
    return [*rows, ["residual", str(result.residual_df), number(result.residual_ss), "", "", ""]] if rows else rows


def factorial_heading(result: Factorial) -> str:
    if result.note:
        return f"Factorial analysis (seed as block) of {result.units} units: not tested, {result.note}."
    return (f"Factorial analysis of {result.units} units (each distinct computation once): every key's main effect and "
            f"every two-way interaction, the seed as a block, F against the residual ({result.residual_df} degrees of "
            "freedom); Holm over the grid's terms. A secondary, parametric view (it assumes normal errors): it decides "
            "nothing, and where its p differs from the exact sign-flip test's the verdicts above rule.")


def factorial_lines(result: Factorial) -> list[str]:
    rows = factorial_rows(result)
    return ["## Factorial analysis (seed as block; secondary, decides nothing)", "", factorial_heading(result), "",
            *(markdown_table(COLUMNS, rows) if rows else []), ""]


def factorial_text(result: Factorial) -> str:
    rows = factorial_rows(result)
    return "\n".join([factorial_heading(result), *([text_table(COLUMNS, rows)] if rows else [])])


def factorial_table(result: Factorial) -> Rows:
    return (["term", "df", "ss", "f", "p", "holm_p"],
            [[t.name, t.df, t.ss, t.f, t.p, t.holm_p] for t in result.terms]
            + ([["residual", result.residual_df, result.residual_ss, math.nan, math.nan, math.nan]] if result.terms else []))


@register("factorial")
class FactorialSection(Section):
    order = 40

    @classmethod
    def compute(cls, analysis: Analysis) -> Factorial:
        sweep, units = analysis.comparison, analysis["identity"]
        return factorial(units.finished, [k for k in sweep.grid if k not in units.identities], sweep.labels())

    @classmethod
    def markdown(cls, result: Factorial, analysis: Analysis) -> list[str]:
        return factorial_lines(result)

    @classmethod
    def console(cls, result: Factorial, analysis: Analysis) -> str:
        return "\n" + factorial_text(result)

    @classmethod
    def tables(cls, result: Factorial, analysis: Analysis) -> dict[str, Rows]:
        return {"factorial": factorial_table(result)}
