"""`zoo compare A B`: does the ranking of one sweep's variants transfer to the same grid on
another task? Each axis's paired effect on both tasks side by side, Kendall's tau of the variants'
scores, and a scatter of the scores, in a report folder and a W&B run of their own."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from zoo.compare.agreement import RankAgreement, oriented, rank_agreement, transfer_verdict
from zoo.compare.comparison import Comparison
from zoo.compare.load import SweepRecords
from zoo.compare.plots import pyplot, variant_colour
from zoo.compare.sections import Analysis, analyse
from zoo.compare.stats import AxisEffect, VariantRow
from zoo.compare.tables import DIFFERENCE_CI, interval, markdown_table, number, text_table
from zoo.compare.wandb_run import Rows, log_tables
from zoo.errors import ConfigError
from zoo.files import atomic_write, save_figure
from zoo.specs.experiment import resolved_mode
from zoo.sweep.names import safe_text, value_text


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


@dataclass
class TransferReport:
    variants: list[tuple[str, VariantRow, VariantRow]]
    """(variant, its row on A, its row on B) for the variants with a score on both."""
    effects: list[tuple[AxisEffect, AxisEffect]]
    agreement: RankAgreement
    table_text: str
    markdown: Path
    plots: list[Path]
    wandb_run: str | None


def grid_differences(a: Comparison, b: Comparison) -> list[str]:
    """Every grid key that is not the same list of values in both sweeps, said how."""
    out = []
    for key in sorted(a.grid.keys() | b.grid.keys()):
        if key not in b.grid:
            out.append(f"{key} only in A")
        elif key not in a.grid:
            out.append(f"{key} only in B")
        elif [repr(v) for v in a.grid[key]] != [repr(v) for v in b.grid[key]]:
            out.append(f"{key} (A: {a.grid[key]}; B: {b.grid[key]})")
    return out


def paired_variants(a: list[VariantRow], b: list[VariantRow]) -> list[tuple[str, VariantRow, VariantRow]]:
    on_b = {row.variant: row for row in b}
    return [(row.variant, row, on_b[row.variant]) for row in a
            if row.metric.n and row.variant in on_b and on_b[row.variant].metric.n]


def score(row: VariantRow, sweep: Comparison) -> float:
    return row.metric.mean if sweep.goal == "max" else -row.metric.mean


def ranks(rows: list[VariantRow]) -> dict[str, int]:
    """variant_rows comes best first."""
    return {row.variant: rank for rank, row in enumerate(rows, 1)}


def variant_table(a: SweepRecords, b: SweepRecords, pairs, rows_a, rows_b) -> Rows:
    rank_a, rank_b = ranks([r for r in rows_a if r.metric.n]), ranks([r for r in rows_b if r.metric.n])
    columns = ["variant", f"A {a.comparison.metric}", "A rank", f"B {b.comparison.metric}", "B rank"]
    return columns, [[name, ra.metric.mean, rank_a[name], rb.metric.mean, rank_b[name]] for name, ra, rb in pairs]


def effect_rows(a: SweepRecords, b: SweepRecords, effects) -> Rows:
    columns = ["axis", "difference", "A mean", f"A {DIFFERENCE_CI}", "A pairs", "B mean", f"B {DIFFERENCE_CI}", "B pairs",
               "verdict"]
    rows = []
    for ea, eb in effects:
        first = value_text(ea.values[0])
        for (value, da), (_, db), (_, pa), (_, pb) in zip(ea.differences, eb.differences, ea.tests, eb.tests):
            said = transfer_verdict(oriented(da, a.comparison.goal), oriented(db, b.comparison.goal), pa, pb)
            rows.append([ea.label, f"{value_text(value)} − {first}", da.mean, interval(da), da.n, db.mean,
                         interval(db), db.n, said])
    return columns, rows


def as_text(rows: list[list]) -> list[list[str]]:
    return [[number(v) if isinstance(v, float) else str(v) for v in row] for row in rows]


@dataclass
class Transfer:
    rows_a: list[VariantRow]
    rows_b: list[VariantRow]
    variants: list[tuple[str, VariantRow, VariantRow]]
    agreement: RankAgreement
    effects: list[tuple[AxisEffect, AxisEffect]]


def measure(a: Analysis, b: Analysis, label: str) -> Transfer:
    """The figures of a transfer report from each sweep's sections (a tuned sweep's at its chosen
    values), written nowhere: the README's tables use them too."""
    differences = grid_differences(a.comparison, b.comparison)
    if differences:
        raise ConfigError(f"{label}: the two sweeps' grids differ, so their variants do not pair up: "
                          f"{'; '.join(differences)}")
    rows_a, rows_b = a["ranking"].rows, b["ranking"].rows
    pairs = paired_variants(rows_a, rows_b)
    if len(pairs) < 3:
        raise ConfigError(f"{label}: {len(pairs)} variant(s) have a score on both sides; "
                          "a rank correlation needs at least 3")
    agreement = rank_agreement([score(ra, a.comparison) for _, ra, _ in pairs],
                               [score(rb, b.comparison) for _, _, rb in pairs])
    return Transfer(rows_a, rows_b, pairs, agreement, list(zip(a["effects"].effects, b["effects"].effects)))


def transfer(dir_a: str | Path, dir_b: str | Path, out: str | Path | None = None, wandb_mode: str | None = None,
             metric: str | None = None, echo=print) -> TransferReport:
    """Both sweeps must have the same grid (keys and values, in order); seeds and tasks may differ.
    Each side is ranked by its own metric (or `metric` on both), a loss lowest first."""
    dir_a, dir_b = Path(dir_a), Path(dir_b)
    first, second = analyse(dir_a, metric), analyse(dir_b, metric)
    a, b = first.read, second.read
    for side, read in (("A", a), ("B", b)):
        echo(f"zoo compare ({side}): {read.progress}")
        for note in read.notes:
            echo(f"zoo compare ({side}): {note}")
    measured = measure(first, second, f"zoo compare {dir_a} {dir_b}")
    rows_a, rows_b, pairs, agreement, effects = (measured.rows_a, measured.rows_b, measured.variants,
                                                 measured.agreement, measured.effects)
    folder = Path(out) if out else dir_a.parent / safe_text(f"{a.comparison.name}-vs-{b.comparison.name}{a.suffix}")
    folder.mkdir(parents=True, exist_ok=True)
    variants, effect_table = variant_table(a, b, pairs, rows_a, rows_b), effect_rows(a, b, effects)
    plots = [scatter_png(a.comparison, b.comparison, pairs, agreement, folder / "scatter.png")]
    summary = (f"Kendall's tau-b {agreement.tau:.3f}, 95% bootstrap interval [{agreement.low:.3f}, "
               f"{agreement.high:.3f}], permutation p = {agreement.p_value:.4g} ({agreement.n} variants)")
    lines = [f"# Transfer: {a.comparison.name} (A) and {b.comparison.name} (B)", "",
             f"A: `{dir_a}`, metric `{a.comparison.metric}` ({a.comparison.goal}); B: `{dir_b}`, metric `{b.comparison.metric}` "
             f"({b.comparison.goal}). Final values, means over seeds. A: {a.progress}; B: {b.progress}.", "",
             "## Ranking", "", summary + ".", "",
             *markdown_table(variants[0], as_text(variants[1])), "", "## Effect of each axis on both tasks", "",
             "Paired differences with 95% t-intervals (unadjusted for the family), each on its task's metric. A "
             "difference separates where its Holm-adjusted p (over its sweep's paired differences) is below 0.05; "
             "the verdict reads that with each "
             "metric's direction: `transfers` (both separate, the same way better), `reverses`, `separates on A "
             "only` or `on B only` (the other not separated, inconclusive), `not separated on either (inconclusive)`.", "",
             *markdown_table(effect_table[0], as_text(effect_table[1])), "", "## Plot", "",
             *(f"![{p.stem}]({p.name})" for p in plots), ""]
    markdown = folder / "transfer.md"
    atomic_write(markdown, "\n".join(lines))
    mode = resolved_mode(wandb_mode or (a.base.get("wandb") or {}).get("mode", "offline"))
    run = None
    if mode != "disabled":
        config = {"A": a.comparison.config(), "B": b.comparison.config(),
                  "kendall_tau": agreement.tau, "p_value": agreement.p_value}
        run = log_tables(a.base.get("wandb") or {}, folder.name, "transfer", folder.name, folder, mode, config,
                         {"variants": variants, "effects": effect_table,
                          "rank_agreement": (["tau_b", "ci_low", "ci_high", "p_value", "variants"],
                                             [[agreement.tau, agreement.low, agreement.high, agreement.p_value,
                                               agreement.n]])}, plots)
    text = summary + "\n" + text_table(effect_table[0], as_text(effect_table[1]))
    return TransferReport(pairs, effects, agreement, text, markdown, plots, run)
