"""A W&B sweep configuration of the same grid, for teams that run `wandb sweep` and `wandb agent`
online: W&B's agent then picks the cells, and each one runs `zoo train` with `--set`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zoo.errors import ConfigError
from zoo.files import atomic_write
from zoo.specs.yamlio import dump_yaml
from zoo.sweep.spec import SweepSpec


def wandb_sweep_config(sweep: SweepSpec, base_file: str) -> dict[str, Any]:
    if sweep.rows:
        raise ConfigError(f"sweep {sweep.name!r}: its rows each set several fields, which a W&B grid cannot; run it "
                          "with `zoo sweep` (or --shard on several machines)")
    parameters = {key: {"values": list(values)} for key, values in sweep.grid.items()}
    parameters["train.seed"] = {"values": list(sweep.seeds)}
    return {
        "name": sweep.name,
        "method": "grid",
        "metric": {"name": sweep.metric, "goal": "maximize" if sweep.goal == "max" else "minimize"},
        "parameters": parameters,
        # ${args_no_hyphens} expands to `key=value` words, which `--set` takes one after another
        "command": ["zoo", "train", base_file, "--set", f"wandb.group={sweep.name}", "wandb.job_type=sweep",
                    "wandb.mode=online", "${args_no_hyphens}"],
    }


def export_wandb(sweep: SweepSpec, base: dict[str, Any]) -> Path:
    """Write the base experiment and the W&B sweep file into the sweep's folder; returns the file."""
    folder = sweep.directory()
    folder.mkdir(parents=True, exist_ok=True)
    base_file = folder / "base.yaml"
    atomic_write(base_file, dump_yaml(base))
    out = folder / "wandb_sweep.yaml"
    atomic_write(out, dump_yaml(wandb_sweep_config(sweep, str(base_file))))
    return out
