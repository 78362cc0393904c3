"""The results page's tables of tuned sweeps and sizes: each variant's chosen values, its LR
sensitivity (Wortsman et al. 2023), the slope of its best rate against width, each difference
across model sizes, and the laws fitted across them."""

from __future__ import annotations

from pathlib import Path

from formats import analysed, figure, shown

from zoo.compare.sections.laws import check_rows, difference_rows, law_rows
from zoo.compare.sections.rate_transfer import SLOPE_COLUMNS, slope_rows
from zoo.compare.sizes import size_keys
from zoo.compare.tables import holm_said, markdown_table
from zoo.sweep.names import value_text


def choices(folder: Path, metrics: list[str]) -> str:
    """A tuned sweep: each variant's chosen values, the edge flags, and what chose them (the
    validation mean over seeds of every value tried)."""
    tuning = analysed(folder, metrics[0])["tuning"]
    sweep, labels, picked = tuning.tuned, tuning.tuned.labels(), tuning.choices
    tried = [", ".join(f"{labels[k]}={value_text(v)}" for k, v in t.values.items()) for t in picked[0].tried]
    lines = ["| variant | chosen | at the edge | " + " / ".join(tried) + f": `{sweep.choose_on}` |", "|---|---|---|---|"]
    for c in picked:
        means = [("—" if not t.score.n else figure(t.score.mean)) + (f" ({t.bad} diverged)" if t.bad else "")
                 for t in c.tried]
        chosen = ", ".join(f"{labels[k]}={value_text(v)}" for k, v in c.chosen.items())
        lines.append(f"| {c.variant} | {chosen} | {'; '.join(c.edges) or '—'} | " + " / ".join(means) + " |")
    return "\n".join(lines) + "\n"


def sensitivity(folder: Path, metrics: list[str]) -> str:
    """A tuned learning rate: each variant's LR sensitivity (Wortsman et al.), then its effects."""
    found = analysed(folder, metrics[0])["lr_sensitivity"][0]
    lines = ["| variant | LR sensitivity [95% CI] |", "|---|---|"]
    lines += [f"| {row.variant} | {shown(row.metric)} |" for row in found.rows]
    lines += ["", "| axis: paired difference | LR sensitivity [95% CI, unadjusted]; Holm p |", "|---|---|"]
    for effect in found.effects:
        lines += [f"| {effect.label}: {value_text(v)} − {value_text(effect.values[0])} | {shown(e, h)}; Holm p {h:.2g} |"
                  for (v, e), (_, h) in zip(effect.differences, effect.tests, strict=True)]
    return "\n".join(lines) + "\n"


def best_rates(folder: Path, metrics: list[str]) -> str:
    """A tuned sweep over sizes: each variant's chosen values at every size side by side, so a row
    shows whether the best value moves with the size (an edge of the range tried marked *)."""
    tuning = analysed(folder, metrics[0])["tuning"]
    sweep, labels = tuning.tuned, tuning.tuned.labels()
    size = size_keys(sweep)[0]
    rows: dict[str, dict] = {}
    for c in tuning.choices:
        rest = ", ".join(f"{labels[k]}={value_text(v)}" for k, v in c.assignment.items() if k != size)
        chosen = ", ".join(value_text(v) for v in c.chosen.values()) + (" *" if c.edges else "")
        rows.setdefault(rest, {})[c.assignment[size]] = chosen
    lines = [f"| variant | {' | '.join(f'{labels[size]}={value_text(s)}' for s in sweep.grid[size])} |",
             "|---" * (len(sweep.grid[size]) + 1) + "|"]
    lines += [f"| {rest} | " + " | ".join(at.get(s, "—") for s in sweep.grid[size]) + " |" for rest, at in rows.items()]
    return "\n".join(lines) + "\n"


def rate_slopes(folder: Path, metrics: list[str]) -> str:
    """A tuned sweep that declares rate_slope_margin: each variant's best rate's slope against
    log2(width) over seeds, its t-test and TOST (Holm over the variants) and its verdict."""
    found = analysed(folder, metrics[0])["rate_transfer"]
    return "\n".join(markdown_table(SLOPE_COLUMNS, slope_rows(found))) + "\n"


def fits(folder: Path, metrics: list[str]) -> str:
    """A sweep over sizes: each variant's law, each difference carried past the largest size, and
    the fits' predictions at the sizes they left out against the measurements."""
    found = analysed(folder, metrics[0])["scaling"]
    parts = [markdown_table(*law_rows(found)), markdown_table(*difference_rows(found))]
    if found.checks:
        parts.append(markdown_table(*check_rows(found)))
    return "\n\n".join("\n".join(part) for part in parts) + "\n"


def sizes(folder: Path, metrics: list[str]) -> str:
    """Each difference at each model size, its interaction with size, and whether it holds."""
    found = analysed(folder, metrics[0])["sizes"]
    first = found[0]
    lines = ["| difference (paired) | " + " | ".join(f"{first.size_label}={value_text(s)}" for s in first.sizes)
             + f" | interaction ({', '.join(value_text(s) for s in first.sizes[1:])} vs {value_text(first.sizes[0])}) "
             "| verdict |", "|---" * (len(first.sizes) + 3) + "|"]
    for e in found:
        lines.append(f"| {e.label} | " + " | ".join(shown(d, h) for d, h in e.at_size) + " | "
                     + "; ".join(f"{shown(d, h)}, {holm_said(p, h, 2)}" for d, p, h in e.interactions) + f" | {e.verdict} |")
    return "\n".join(lines) + "\n"
