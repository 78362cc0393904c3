"""Which cells confirm a tuned sweep's choice: each variant at the value its tuning seeds chose, on
every confirm seed. `zoo sweep` trains them once every tuning cell is done; zoo.compare.tuned
compares the variants on them alone."""

from __future__ import annotations

from pathlib import Path

from zoo.compare.load import read_sweep
from zoo.compare.tuned import at_choice, choose, chosen_keys, tuning_runs
from zoo.sweep.spec import Cell, confirmation_cells


def cells_to_confirm(sweep_dir: str | Path) -> list[Cell]:
    """The confirmation cells of the chosen values, from the sweep folder's ledger."""
    read = read_sweep(sweep_dir)
    sweep = read.comparison
    chosen = chosen_keys(choose(sweep, tuning_runs(sweep, read.records)))
    return [cell for cell in confirmation_cells(sweep.design) if at_choice(sweep, chosen, dict(cell.assignment))]
