"""A W&B sweep configuration of the same grid, for teams that run `wandb sweep` and `wandb agent`
online: W&B's agent then picks the cells, and each one runs `zoo train` with `--set`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from zoo.sweep.spec import SweepSpec


def wandb_sweep_config(sweep: SweepSpec, base_file: str) -> dict[str, Any]:
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
    base_file.write_text(yaml.safe_dump(base, sort_keys=False, allow_unicode=True), encoding="utf-8")
    out = folder / "wandb_sweep.yaml"
    out.write_text(yaml.safe_dump(wandb_sweep_config(sweep, str(base_file)), sort_keys=False), encoding="utf-8")
    return out
