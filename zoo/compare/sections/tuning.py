"""A tuned sweep's choice: each variant's chosen value and every value it tried (report.md, the
console, W&B tables, tuning.json beside the ledger), what each seed alone would choose, and the
"tune further" flags. The sections after it compare the chosen runs, on the grid alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from zoo.compare.comparison import Comparison
from zoo.compare.sections import Analysis, Section, register
from zoo.compare.sensitivity import learning_rate_keys, sensitivities
from zoo.compare.tables import markdown_table, number, text_table
from zoo.compare.tuned import (
    TunedChoice,
    as_variant_run,
    choose,
    compared_runs,
    compared_sweep,
    tried_text,
    tuning_runs,
    unconfirmed,
)
from zoo.compare.wandb_run import Rows
from zoo.errors import ConfigError
from zoo.files import atomic_write
from zoo.metrics import by_comparison
from zoo.records import RunRecord
from zoo.sweep.names import value_text

RULE = ("Each variant trained every tuned value ({values}) with every seed. Its value is chosen on `{choose_on}` "
        "(the validation split) alone: the best mean over its seeds, one value for all its seeds (pooled, as a user "
        "runs a variant: one recipe whatever the seed); a value where a seed diverged or failed ranks after every "
        "value whose seeds all finished, and ties go to the value listed first. The variants are then compared on "
        "`{metric}`, a split the choice never saw, over the chosen value's runs, paired by seed: the test set never "
        "chooses, so the comparison carries none of the choice's optimism (the validation means below do; they are "
        "what chose, not results). A value at the end of its range is flagged: the best may lie beyond it.")


@dataclass
class Tuning:
    tuned: Comparison
    """The sweep as tuned: its grid and tuned keys."""
    comparison: Comparison
    """The sweep as compared: the grid alone."""
    records: list[RunRecord]
    """The chosen runs, as runs of their variants."""
    choosing: list[RunRecord]
    """The tuning seeds' runs: what chose."""
    choices: list[TunedChoice]
    said: list[str]
    per_seed: dict[str, dict[int, str]] | None
    """What each seed alone would have chosen for each variant (None: one tuning seed)."""
    unconfirmed: list[str]


def seed_choices(sweep: Comparison, records: list[RunRecord]) -> dict[str, dict[int, str]]:
    """What each seed alone would have chosen for each variant: a choice that flips between seeds
    rests on the seeds' luck as much as on the values."""
    per_seed: dict[str, dict[int, str]] = {}
    for seed in sweep.seeds:
        alone = [r for r in records if r.seed == seed]
        for choice in choose(sweep, alone) if alone else []:
            per_seed.setdefault(choice.variant, {})[seed] = ",".join(
                f"{sweep.labels()[k]}={value_text(v)}" for k, v in choice.chosen.items())
    return per_seed


def seed_rows(result: Tuning) -> tuple[list[str], list[list[str]]]:
    """Each variant's choice on each seed alone, and whether it flips."""
    seeds = result.tuned.seeds
    rows = [[c.variant, *(result.per_seed.get(c.variant, {}).get(s, "—") for s in seeds),
             "flips" if len(set(result.per_seed.get(c.variant, {}).values())) > 1 else "stable"] for c in result.choices]
    return ["variant", *(f"seed {s} alone" for s in seeds), "choice"], rows


def choice_rows(result: Tuning) -> tuple[list[str], list[list[str]]]:
    sweep, keys = result.tuned, list(result.tuned.tune)
    labels = sweep.labels()
    rows = [[c.variant, *(value_text(c.chosen[k]) for k in keys), number(c.best.score.mean), str(c.best.score.n),
             "; ".join(c.edges) + (": tune further" if c.edges else ""),
             "; ".join(tried_text(sweep, t, t.values == c.chosen) for t in c.tried)] for c in result.choices]
    columns = ["variant", *(f"chosen {labels[k]}" for k in keys), f"{sweep.choose_on} (chose)", "seeds",
               "at the edge", f"every value tried: mean {sweep.choose_on}"]
    return columns, rows


def at_values(sweep: Comparison, records: list[RunRecord], at: dict[str, Any]):
    """The grid alone and the runs at the tuned values `at` (not the chosen ones), as runs of
    their variants; a key that is not tuned is refused by name."""
    unknown = [key for key in at if key not in sweep.tune]
    if unknown:
        raise ConfigError(f"{unknown[0]}: not a tuned key of sweep {sweep.name!r}; choices: {', '.join(sweep.tune)}")
    return compared_sweep(sweep), [as_variant_run(sweep, r) for r in records
                                   if all(r.assignment.get(key) == value for key, value in at.items())]


@register("tuning")
class TuningSection(Section):
    order, plot_order, stream = 10, 10, "table"

    @classmethod
    def compute(cls, analysis: Analysis) -> Tuning | None:
        sweep = analysis.read.comparison
        if not sweep.tune:
            return None
        every_run = analysis.read.records
        choosing = tuning_runs(sweep, every_run)  # only the tuning seeds choose and show the choice
        choices = choose(sweep, choosing)
        if by_comparison(sweep.metric):  # compared on a metric of every rate's runs, one record per variant and seed
            (key,) = learning_rate_keys(sweep)
            compared, (runs, _, said) = compared_sweep(sweep), sensitivities(sweep, choosing, choices, key)
        elif analysis.at is None:
            compared, runs, said = compared_runs(sweep, every_run, choices)
        else:
            (compared, runs), said = at_values(sweep, choosing, analysis.at), []
        stale = unconfirmed(sweep, [r for r in every_run if r.seed in sweep.confirm_seeds], choices)
        per_seed = seed_choices(sweep, choosing) if len(sweep.seeds) >= 2 else None
        return Tuning(sweep, compared, runs, choosing, choices, said, per_seed, list(stale.values()))

    @classmethod
    def notes(cls, result: Tuning, analysis: Analysis) -> list[str]:
        return [*result.said, *(f"{c.variant}: some tuned value has fewer finished seeds than the sweep's "
                                f"{len(result.tuned.seeds)}; its choice rests on the cells there are"
                                for c in result.choices if c.incomplete)]

    @classmethod
    def warnings(cls, result: Tuning, analysis: Analysis) -> list[str]:
        said = [f"{c.variant}: {'; '.join(c.edges)}: tune further" for c in result.choices if c.edges]
        said += result.unconfirmed
        if result.per_seed is not None:
            flips = [row[0] for row in seed_rows(result)[1] if row[-1] == "flips"]
            if flips:
                said.append(f"the tuned choice flips by seed for {len(flips)} of {len(result.choices)} variants "
                            f"({', '.join(flips[:4])}{', ...' if len(flips) > 4 else ''}): it is not stable")
        return said

    @classmethod
    def markdown(cls, result: Tuning, analysis: Analysis) -> list[str]:
        sweep = result.tuned
        values = "; ".join(f"`{k}`: {', '.join(value_text(v) for v in sweep.tune[k])}" for k in sweep.tune)
        lines = ["## Tuning", "", RULE.format(values=values, choose_on=sweep.choose_on, metric=sweep.metric), "",
                 *markdown_table(*choice_rows(result)), ""]
        if result.per_seed is not None:
            columns, rows = seed_rows(result)
            flips = [row[0] for row in rows if row[-1] == "flips"]
            lines += ["### What each seed alone would choose", "",
                      f"{len(flips)} of {len(rows)} variants choose otherwise on different seeds: where the choice "
                      "flips, the comparison at the chosen values rests on the seeds' luck as much as on the values; "
                      "confirming the choice on fresh seeds would separate the two.", "", *markdown_table(columns, rows),
                      ""]
        return lines

    @classmethod
    def console(cls, result: Tuning, analysis: Analysis) -> str:
        columns, rows = choice_rows(result)
        return f"Chosen on {result.tuned.choose_on}:\n" + text_table(columns[:-1], [r[:-1] for r in rows])

    @classmethod
    def tables(cls, result: Tuning, analysis: Analysis) -> dict[str, Rows]:
        sweep, keys = result.tuned, list(result.tuned.tune)
        labels, choices = sweep.labels(), result.choices
        columns = choice_rows(result)[0]
        tables = {"choices": (columns[:-1], [[c.variant, *(value_text(c.chosen[k]) for k in keys), c.best.score.mean,
                                              c.best.score.n, "; ".join(c.edges)] for c in choices]),
                  "tried": ([*(labels[k] for k in keys), "variant", "chosen", f"{sweep.choose_on} mean", "seeds",
                             "diverged or failed"],
                            [[*(value_text(t.values[k]) for k in keys), c.variant, t.values == c.chosen, t.score.mean,
                              t.score.n, t.bad] for c in choices for t in c.tried])}
        return {**tables, **({"seed_choices": seed_rows(result)} if result.per_seed is not None else {})}

    @classmethod
    def write(cls, result: Tuning, analysis: Analysis) -> None:
        """Beside the ledger: which runs were chosen for each variant and why (every value's
        validation mean over its seeds, and the rule), so the choice can be checked by hand."""
        sweep = result.tuned
        data = {"rule": RULE.format(values=", ".join(sweep.tune), choose_on=sweep.choose_on, metric=sweep.metric),
                "choose_on": sweep.choose_on, "goal": sweep.resolved_choose_on.goal, "metric": sweep.metric,
                "variants": [{"variant": c.variant, "chosen": c.chosen, "edges": c.edges,
                              "chosen_cells": c.best.cells,
                              "tried": [{"values": t.values, "mean": t.score.mean if t.score.n else None,
                                         "seeds": t.seeds, "diverged_or_failed": t.bad} for t in c.tried]}
                             for c in result.choices]}
        atomic_write(analysis.folder / f"tuning{analysis.suffix}.json", json.dumps(data, indent=1) + "\n")
