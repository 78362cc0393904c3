"""Each difference at each model size and its interaction with size, where the grid has a size
key: whether an effect holds across the sizes, not at one size alone."""

from __future__ import annotations

from zoo.compare.agreement import separates
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.sizes import AcrossSizes, across_sizes
from zoo.compare.stats import Estimate, p_value
from zoo.compare.tables import holm_said, interval, markdown_table, number, text_table
from zoo.compare.wandb_run import Rows
from zoo.sweep.names import value_text


def starred(e: Estimate, p: float, adjusted: float) -> str:
    return f"{number(e.mean)} {interval(e)} {holm_said(p, adjusted)}" + (" *" if separates(e, adjusted) else "")


def size_rows(effects: list[AcrossSizes]) -> tuple[list[str], list[list[str]]]:
    """One row per difference: its value at each size, its interaction with size, the verdict."""
    if not effects:
        return [], []
    first = effects[0]
    columns = ["difference (paired)", *(f"at {first.size_label}={value_text(s)}" for s in first.sizes),
               *(f"interaction {value_text(s)} vs {value_text(first.sizes[0])}" for s in first.sizes[1:]), "verdict"]
    rows = [[e.label, *(starred(d, p_value(d), adjusted) for d, adjusted in e.at_size),
             *(starred(d, p, adjusted) for d, p, adjusted in e.interactions), e.verdict] for e in effects]
    return columns, rows


def size_lines(effects: list[AcrossSizes]) -> list[str]:
    if not effects:
        return []
    out = ["## Across sizes", "",
           "Each difference at each size (paired within the size; Holm over every simple difference of the sweep), "
           "and its interaction with size: the difference at a size minus at the first size, paired by seed and every "
           "other grid value, Holm over every interaction of this table. One sign at every size with no interaction "
           "separated is said as such, inconclusive on the interactions: no margin tests them for level; * marks a "
           "Holm p below 0.05.", ""]
    for label in dict.fromkeys(e.size_label for e in effects):
        columns, rows = size_rows([e for e in effects if e.size_label == label])
        out += [*markdown_table(columns, rows), ""]
    return out


def sizes_console(effects: list[AcrossSizes]) -> str:
    parts = []
    for label in dict.fromkeys(e.size_label for e in effects):
        columns, rows = size_rows([e for e in effects if e.size_label == label])
        parts.append(f"Across {label}:\n" + text_table(columns, rows))
    return "\n\n".join(parts)


def size_table(effects: list[AcrossSizes]) -> Rows:
    return (["difference", "size_key", "size", "kind", "mean", "ci_low", "ci_high", "pairs", "holm_p", "verdict"],
            [[e.label, e.size_label, value_text(size), kind, d.mean, d.low, d.high, d.n, adjusted, e.verdict]
             for e in effects
             for kind, pairs in (("at size", [(s, d, a) for s, (d, a) in zip(e.sizes, e.at_size)]),
                                 ("interaction", [(s, d, a) for s, (d, _, a) in zip(e.sizes[1:], e.interactions)]))
             for size, d, adjusted in pairs])


@register("sizes")
class SizesSection(Section):
    order = 70

    @classmethod
    def compute(cls, analysis: Analysis) -> list[AcrossSizes]:
        return across_sizes(analysis.comparison, analysis.records, analysis["interactions"])

    @classmethod
    def markdown(cls, result: list[AcrossSizes], analysis: Analysis) -> list[str]:
        return size_lines(result)

    @classmethod
    def console(cls, result: list[AcrossSizes], analysis: Analysis) -> str:
        return f"\n\n{sizes_console(result)}" if result else ""

    @classmethod
    def tables(cls, result: list[AcrossSizes], analysis: Analysis) -> dict[str, Rows]:
        return {"across_sizes": size_table(result)} if result else {}
