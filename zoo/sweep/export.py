"""A W&B sweep configuration of the same cells, for teams that run `wandb sweep` and `wandb agent`
online: W&B's agent picks the cells (every grid, row and tuned value, and the seed), and each one
runs `zoo sweep FILE --cell KEY=VALUE ...`, which trains that cell as a local sweep does: the same
run name, group, job type (its variant, so seed bands group the same way online), tags and ledger."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zoo.errors import ConfigError
from zoo.files import atomic_write
from zoo.specs.experiment import parse_sets
from zoo.specs.yamlio import dump_yaml
from zoo.sweep.spec import Cell, SweepSpec, expand

SEED = "seed"
"""The W&B parameter that holds a cell's seed."""


def wandb_sweep_config(sweep: SweepSpec, sweep_file: str) -> dict[str, Any]:
    parameters = {key: {"values": list(values)} for key, values in sweep.axes().items()}
    parameters[SEED] = {"values": list(sweep.seeds)}
    return {
        "name": sweep.name,
        "method": "grid",
        "metric": {"name": sweep.metric, "goal": "maximize" if sweep.goal == "max" else "minimize"},
        "parameters": parameters,
        # ${args_no_hyphens} expands to `key=value` words, which `--cell` takes one after another
        "command": ["zoo", "sweep", sweep_file, "--cell", "${args_no_hyphens}"],
    }


def export_wandb(sweep: SweepSpec, base: dict[str, Any]) -> Path:
    """Write the sweep with its base experiment inline (logging online) and the W&B sweep file
    into the sweep's folder; returns the W&B file."""
    folder = sweep.directory()
    folder.mkdir(parents=True, exist_ok=True)
    online = copy.deepcopy(base)
    online.setdefault("wandb", {})["mode"] = "online"
    sweep_file = folder / "exported_sweep.yaml"
    atomic_write(sweep_file, dump_yaml({**sweep.model_dump(mode="json"), "base": online}))
    out = folder / "wandb_sweep.yaml"
    atomic_write(out, dump_yaml(wandb_sweep_config(sweep, str(sweep_file))))
    return out


def same_value(given: Any, value: Any) -> bool:
    """A value as W&B's agent passes it back (YAML text: 0.001, pre, 100) against the sweep's."""
    if value is None:  # W&B writes Python's None as the word None
        return given is None or given == "None"
    if isinstance(given, bool) or isinstance(value, bool):
        return given is value
    if isinstance(given, int | float) and isinstance(value, int | float):
        return float(given) == float(value)
    return json.dumps(given, sort_keys=True) == json.dumps(value, sort_keys=True)


def find_cell(sweep: SweepSpec, words: Sequence[str]) -> Cell:
    """The cell that `KEY=VALUE` words name: a value for every grid and tuned key, and `seed`."""
    given = dict(parse_sets(words))
    keys = [*sweep.axes(), SEED]
    unknown, missing = [k for k in given if k not in keys], [k for k in keys if k not in given]
    if unknown or missing:
        said = "; ".join(filter(None, [unknown and f"unknown {', '.join(unknown)}", missing and f"missing {', '.join(missing)}"]))
        raise ConfigError(f"--cell: {said}; a cell of sweep {sweep.name!r} is named by {', '.join(keys)}")
    for cell in expand(sweep):
        if cell.seed == given[SEED] and all(same_value(given[k], v) for k, v in cell.assignment):
            return cell
    values = "; ".join(f"{k}: {v}" for k, v in [*sweep.axes().items(), (SEED, sweep.seeds)])
    raise ConfigError(f"--cell: no cell of sweep {sweep.name!r} has {dict(given)}; its values are {values}")
