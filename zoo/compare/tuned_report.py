"""What `zoo compare` adds for a tuned sweep: each variant's chosen value and every value it tried
(report.md, the console, a W&B table), the "tune further" flags, and for a tuned learning rate the
loss against the rate and Wortsman et al.'s sensitivity compared between variants."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from zoo.compare.plots import grid_order, rate_png
from zoo.compare.sensitivity import LOSS, SENSITIVITY, learning_rate_keys, sensitivities, sensitivity_sweep
from zoo.compare.stats import AxisEffect, VariantRow, axis_effects, seed_noise, variant_rows
from zoo.compare.tables import effect_lines, effect_table, effects_text, markdown_table, number, table, text_table
from zoo.compare.tuned import (
    Choice,
    check_compared_metric,
    choose,
    compared_runs,
    tried_text,
    tuning_runs,
    unconfirmed,
)
from zoo.compare.wandb_run import Rows
from zoo.files import atomic_write
from zoo.records import RunRecord
from zoo.sweep.names import value_text
from zoo.sweep.spec import SweepSpec


@dataclass
class Tuning:
    sweep: SweepSpec
    """The sweep as compared: the grid alone."""
    records: list[RunRecord]
    """The chosen runs, as runs of their variants."""
    lines: list[str] = field(default_factory=list)
    text: str = ""
    tables: dict[str, Rows] = field(default_factory=dict)
    plots: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    choices: list[Choice] = field(default_factory=list)
    sensitivity: dict[str, tuple[list[VariantRow], list[AxisEffect]]] = field(default_factory=dict)
    """For each tuned learning rate: the variants' LR sensitivity, ranked, and its effects by axis."""


RULE = ("Each variant trained every tuned value ({values}) with every seed. Its value is chosen on `{choose_on}` "
        "(the validation split) alone: the best mean over its seeds, one value for all its seeds (pooled, as a user "
        "runs a variant: one recipe whatever the seed); a value where a seed diverged or failed ranks after every "
        "value whose seeds all finished, and ties go to the value listed first. The variants are then compared on "
        "`{metric}`, a split the choice never saw, over the chosen value's runs, paired by seed: the test set never "
        "chooses, so the comparison carries none of the choice's optimism (the validation means below do; they are "
        "what chose, not results). A value at the end of its range is flagged: the best may lie beyond it.")


def tuned(sweep: SweepSpec, records: list[RunRecord], folder: Path, suffix: str) -> Tuning:
    check_compared_metric(sweep)
    every_run, records = records, tuning_runs(sweep, records)  # only the tuning seeds choose and show the choice
    choices = choose(sweep, records)
    compared, runs, said = compared_runs(sweep, every_run, choices)
    out = Tuning(compared, runs, choices=choices)
    labels = sweep.labels()
    keys = list(sweep.tune)
    rows = [[c.variant, *(value_text(c.chosen[k]) for k in keys), number(c.best.score.mean), str(c.best.score.n),
             "; ".join(c.edges) + (": tune further" if c.edges else ""),
             "; ".join(tried_text(sweep, t, t.values == c.chosen) for t in c.tried)] for c in choices]
    columns = ["variant", *(f"chosen {labels[k]}" for k in keys), f"{sweep.choose_on} (chose)", "seeds",
               "at the edge", f"every value tried: mean {sweep.choose_on}"]
    values = "; ".join(f"`{k}`: {', '.join(value_text(v) for v in sweep.tune[k])}" for k in keys)
    out.lines = ["## Tuning", "", RULE.format(values=values, choose_on=sweep.choose_on, metric=sweep.metric), "",
                 *markdown_table(columns, rows), ""]
    out.text = text_table(columns[:-1], [r[:-1] for r in rows])
    out.tables["choices"] = (columns[:-1], [[c.variant, *(value_text(c.chosen[k]) for k in keys), c.best.score.mean,
                                             c.best.score.n, "; ".join(c.edges)] for c in choices])
    out.tables["tried"] = ([*(labels[k] for k in keys), "variant", "chosen", f"{sweep.choose_on} mean", "seeds",
                            "diverged or failed"],
                           [[*(value_text(t.values[k]) for k in keys), c.variant, t.values == c.chosen, t.score.mean,
                             t.score.n, t.bad] for c in choices for t in c.tried])
    out.warnings = [f"{c.variant}: {'; '.join(c.edges)}: tune further" for c in choices if c.edges]
    out.warnings += list(unconfirmed(sweep, [r for r in every_run if r.seed in sweep.confirm_seeds], choices).values())
    out.notes = [*said, *(f"{c.variant}: some tuned value has fewer finished seeds than the sweep's "
                          f"{len(sweep.seeds)}; its choice rests on the cells there are" for c in choices if c.incomplete)]
    add_seed_choices(out, sweep, records, choices)
    for key in learning_rate_keys(sweep):
        add_sensitivity(out, sweep, records, choices, key, folder, suffix)
    write_choices(folder / f"tuning{suffix}.json", sweep, choices)
    return out


def seed_choices(sweep: SweepSpec, records: list[RunRecord]) -> dict[str, dict[int, str]]:
    """What each seed alone would have chosen for each variant: a choice that flips between seeds
    rests on the seeds' luck as much as on the values."""
    per_seed: dict[str, dict[int, str]] = {}
    for seed in sweep.seeds:
        alone = [r for r in records if r.seed == seed]
        for choice in choose(sweep, alone) if alone else []:
            per_seed.setdefault(choice.variant, {})[seed] = ",".join(
                f"{sweep.labels()[k]}={value_text(v)}" for k, v in choice.chosen.items())
    return per_seed


def add_seed_choices(out: Tuning, sweep: SweepSpec, records: list[RunRecord], choices: list[Choice]) -> None:
    """The table of each seed's own choice, and a warning that counts the choices that flip."""
    if len(sweep.seeds) < 2:
        return
    per_seed = seed_choices(sweep, records)
    rows = [[c.variant, *(per_seed.get(c.variant, {}).get(s, "—") for s in sweep.seeds),
             "flips" if len(set(per_seed.get(c.variant, {}).values())) > 1 else "stable"] for c in choices]
    columns = ["variant", *(f"seed {s} alone" for s in sweep.seeds), "choice"]
    flips = [row[0] for row in rows if row[-1] == "flips"]
    out.lines += ["### What each seed alone would choose", "",
                  f"{len(flips)} of {len(rows)} variants choose otherwise on different seeds: where the choice flips, "
                  "the comparison at the chosen values rests on the seeds' luck as much as on the values; "
                  "confirming the choice on fresh seeds would separate the two.", "", *markdown_table(columns, rows), ""]
    out.tables["seed_choices"] = (columns, rows)
    if flips:
        out.warnings.append(f"the tuned choice flips by seed for {len(flips)} of {len(rows)} variants "
                            f"({', '.join(flips[:4])}{', ...' if len(flips) > 4 else ''}): it is not stable")


def write_choices(path: Path, sweep: SweepSpec, choices: list[Choice]) -> None:
    """Beside the ledger: which runs were chosen for each variant and why (every value's validation
    mean over its seeds, and the rule), so the choice can be checked by hand from the ledger."""
    data = {"rule": RULE.format(values=", ".join(sweep.tune), choose_on=sweep.choose_on, metric=sweep.metric),
            "choose_on": sweep.choose_on, "goal": sweep.resolved_choose_on.goal, "metric": sweep.metric,
            "variants": [{"variant": c.variant, "chosen": c.chosen, "edges": c.edges,
                          "chosen_cells": c.best.cells,
                          "tried": [{"values": t.values, "mean": t.score.mean if t.score.n else None, "seeds": t.seeds,
                                     "diverged_or_failed": t.bad} for t in c.tried]} for c in choices]}
    atomic_write(path, json.dumps(data, indent=1) + "\n")


def add_sensitivity(out: Tuning, sweep: SweepSpec, records: list[RunRecord], choices, key: str, folder: Path,
                    suffix: str) -> None:
    label = sweep.labels()[key]
    measured, curves, notes = sensitivities(sweep, records, choices, key)
    out.notes += notes
    path = folder / f"loss_vs_{value_text(label)}{suffix}.png"
    assignments = {choice.variant: dict(choice.assignment) for choice in choices}
    out.plots.append(rate_png(sweep, label, sorted(curves, key=lambda c: grid_order(sweep, assignments[c.variant])),
                              assignments, path))
    out.lines += ["## Learning-rate sensitivity", "",
                  f"Wortsman et al. (2023): for each variant and seed, the mean over the {len(sweep.tune[key])} tried "
                  f"values of `{key}` of min(final `{LOSS}`, initial loss) minus its lowest; a run that diverged or "
                  "failed counts at the initial loss (the training loss of step 1, the model as initialized; the same at "
                  "every rate of a seed). Other tuned keys stay at the variant's chosen values. Lower is flatter: the "
                  "loss depends less on the rate. Differences are paired by seed and every other grid value; Holm's "
                  "family is every difference of this table (a question of its own, apart from the comparison on "
                  f"`{sweep.metric}`).", ""]
    if not measured:
        out.lines += ["No variant has every rate trained for a seed yet.", ""]
        return
    scored = sensitivity_sweep(out.sweep)
    rows, effects = variant_rows(scored, measured), axis_effects(scored, measured)
    out.sensitivity[key] = (rows, effects)
    columns, data = table(scored, rows)
    out.lines += [*markdown_table(columns, data), "", *effect_lines(effects), f"![{path.stem}]({path.name})", ""]
    out.text += f"\n\nLR sensitivity ({SENSITIVITY}, lower is flatter) over {label}:\n" + text_table(columns, data)
    out.text += "\n" + effects_text(effects, seed_noise(scored, measured))
    out.tables[SENSITIVITY] = (columns, data)
    out.tables[f"{SENSITIVITY}_effects"] = effect_table(effects)
    out.tables[f"{SENSITIVITY}_curves"] = (["variant", label, "mean", "band_low", "band_high", "seeds", "diverged"],
                                           [[c.variant, rate, b.mean, b.low, b.high, b.n, bad]
                                            for c in curves for rate, b, bad in zip(c.rates, c.bands, c.diverged) if b])
