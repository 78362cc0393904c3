"""Which cells confirm a tuned sweep's choice: each variant at the value its tuning seeds chose, on
every confirm seed. `zoo sweep` trains them once every tuning cell is done; zoo.compare.tuned
compares the variants on them alone."""

from __future__ import annotations

from pathlib import Path

from zoo.compare.load import read_sweep
from zoo.compare.tuned import choose, grid_variant, tuning_runs, value_key
from zoo.sweep.spec import Cell, confirmation_cells


def cells_to_confirm(sweep_dir: str | Path) -> list[Cell]:
    """The confirmation cells of the chosen values, from the sweep folder's ledger."""
    read = read_sweep(sweep_dir)
    sweep = read.sweep
    chosen = {c.variant: value_key(c.chosen) for c in choose(sweep, tuning_runs(sweep, read.records))}
    return [cell for cell in confirmation_cells(sweep)
            if chosen.get(grid_variant(sweep, dict(cell.assignment)))
            == value_key({key: dict(cell.assignment)[key] for key in sweep.tune})]
