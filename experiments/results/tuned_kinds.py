"""The results page's tables of tuned sweeps and sizes: each variant's chosen values, its LR
sensitivity (Wortsman et al. 2023), each difference across model sizes, and the laws fitted
across them."""

from __future__ import annotations

from pathlib import Path

from formats import compared, figure, shown

from zoo.compare.load import read_sweep
from zoo.compare.scaling import scaling
from zoo.compare.scaling_report import check_rows, difference_rows, law_rows
from zoo.compare.sensitivity import learning_rate_keys, sensitivities, sensitivity_sweep
from zoo.compare.sizes import across_sizes, size_keys
from zoo.compare.stats import axis_effects, simple_effects, variant_rows
from zoo.compare.tables import markdown_table
from zoo.compare.tuned import choose, compared_sweep
from zoo.sweep.names import value_text


def choices(folder: Path, metrics: list[str]) -> str:
    """A tuned sweep: each variant's chosen values, the edge flags, and what chose them (the
    validation mean over seeds of every value tried)."""
    read = read_sweep(folder, metrics[0])
    sweep, labels = read.sweep, read.sweep.labels()
    picked = choose(sweep, read.records)
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
    read = read_sweep(folder, metrics[0])
    key = learning_rate_keys(read.sweep)[0]
    measured, _, _ = sensitivities(read.sweep, read.records, choose(read.sweep, read.records), key)
    scored = sensitivity_sweep(compared_sweep(read.sweep))
    lines = ["| variant | LR sensitivity [95% CI] |", "|---|---|"]
    lines += [f"| {row.variant} | {shown(row.metric)} |" for row in variant_rows(scored, measured)]
    lines += ["", "| axis: paired difference | LR sensitivity [95% CI]; Holm p |", "|---|---|"]
    for effect in axis_effects(scored, measured):
        lines += [f"| {effect.label}: {value_text(v)} − {value_text(effect.values[0])} | {shown(e, h)}; Holm p {h:.2g} |"
                  for (v, e), (_, h) in zip(effect.differences, effect.tests, strict=True)]
    return "\n".join(lines) + "\n"


def best_rates(folder: Path, metrics: list[str]) -> str:
    """A tuned sweep over sizes: each variant's chosen values at every size side by side, so a row
    shows whether the best value moves with the size (an edge of the range tried marked *)."""
    read = read_sweep(folder, metrics[0])
    sweep, labels = read.sweep, read.sweep.labels()
    size = size_keys(sweep)[0]
    rows: dict[str, dict] = {}
    for c in choose(sweep, read.records):
        rest = ", ".join(f"{labels[k]}={value_text(v)}" for k, v in c.assignment.items() if k != size)
        chosen = ", ".join(value_text(v) for v in c.chosen.values()) + (" *" if c.edges else "")
        rows.setdefault(rest, {})[c.assignment[size]] = chosen
    lines = [f"| variant | {' | '.join(f'{labels[size]}={value_text(s)}' for s in sweep.grid[size])} |",
             "|---" * (len(sweep.grid[size]) + 1) + "|"]
    lines += [f"| {rest} | " + " | ".join(at.get(s, "—") for s in sweep.grid[size]) + " |" for rest, at in rows.items()]
    return "\n".join(lines) + "\n"


def fits(folder: Path, metrics: list[str]) -> str:
    """A sweep over sizes: each variant's law, each difference carried past the largest size, and
    the fits' predictions at the sizes they left out against the measurements."""
    sweep, records = compared(folder, metrics[0])
    found = scaling(sweep, records)
    parts = [markdown_table(*law_rows(found)), markdown_table(*difference_rows(found))]
    if found.checks:
        parts.append(markdown_table(*check_rows(found)))
    return "\n\n".join("\n".join(part) for part in parts) + "\n"


def sizes(folder: Path, metrics: list[str]) -> str:
    """Each difference at each model size, its interaction with size, and whether it holds."""
    sweep, records = compared(folder, metrics[0])
    found = across_sizes(sweep, records, simple_effects(sweep, records))
    first = found[0]
    lines = ["| difference (paired) | " + " | ".join(f"{first.size_label}={value_text(s)}" for s in first.sizes)
             + f" | interaction ({', '.join(value_text(s) for s in first.sizes[1:])} vs {value_text(first.sizes[0])}) "
             "| verdict |", "|---" * (len(first.sizes) + 3) + "|"]
    for e in found:
        lines.append(f"| {e.label} | " + " | ".join(shown(d, h) for d, h in e.at_size) + " | "
                     + "; ".join(f"{shown(d, h)}, Holm p {h:.2g}" for d, _, h in e.interactions) + f" | {e.verdict} |")
    return "\n".join(lines) + "\n"
