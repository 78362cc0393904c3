"""The W&B run that holds a comparison: tables and plots in the group of the runs it compares.
A W&B failure is only a warning: the report on disk stands without it."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

Rows = tuple[list[str], list[list[Any]]]
"""(columns, rows) of one table."""


def cell(value: Any) -> Any:
    """A table cell as W&B stores it: nan (no interval) as an empty cell."""
    return None if isinstance(value, float) and math.isnan(value) else value


def log_tables(wandb_settings: dict[str, Any], group: str, job_type: str, name: str, folder: Path, mode: str,
               config: dict[str, Any], tables: dict[str, Rows], plots: list[Path]) -> str | None:
    """One run of `job_type` in `group` holding `tables` as W&B Tables and `plots` as images in its
    summary (no step: nothing of a comparison is a metric over training); its folder, or None when
    W&B failed."""
    try:
        import wandb

        run = wandb.init(project=wandb_settings.get("project", "zoo"), entity=wandb_settings.get("entity"),
                         group=group, job_type=job_type, name=name, dir=str(folder), mode=mode, config=config,
                         settings=wandb.Settings(console="off", silent=True))  # the table is what the console shows
        # Into the summary, not run.log: a logged table is a history row too, whose nrows and ncols
        # a W&B view charts as if they were metrics of a step.
        run.summary.update({**{key: wandb.Table(columns=columns, data=[[cell(v) for v in row] for row in rows])
                               for key, (columns, rows) in tables.items()},
                            **{f"plots/{p.stem}": wandb.Image(str(p)) for p in plots}})
        run_dir = Path(run.dir).parent
        run.finish()
        return str(run_dir)
    except Exception as err:
        warnings.warn(f"W&B {job_type} run failed, the report is on disk only: {err!r}", RuntimeWarning, stacklevel=2)
        return None
