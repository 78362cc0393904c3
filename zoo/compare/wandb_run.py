"""The W&B run that holds a comparison: tables and plots in the group of the runs it compares.
A W&B failure is only a warning: the report on disk stands without it."""

from __future__ import annotations

import hashlib
import math
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

Rows = tuple[list[str], list[list[Any]]]
"""(columns, rows) of one table."""


def cell(value: Any) -> Any:
    """A table cell as W&B stores it: nan (no interval) as an empty cell."""
    return None if isinstance(value, float) and math.isnan(value) else value


def log_tables(wandb_settings: dict[str, Any], group: str, job_type: str, name: str, folder: Path, mode: str,
               config: dict[str, Any], tables: dict[str, Rows], plots: list[Path],
               scalars: dict[str, float] | None = None) -> str | None:
    """One run of `job_type` in `group` holding `tables` as W&B Tables and `scalars` (its key
    numbers) in its summary, and `plots` as images logged once, so that a viewer's media pane
    (the web app's, `wandb leet`'s) shows them (a table is a file a viewer may not open); no number
    is logged at a step: nothing of a comparison is a metric over training. Its folder, or None
    when W&B failed."""
    try:
        import wandb

        run_id = stable_id(folder, job_type, name)  # compared again, the same W&B run is updated
        run = wandb.init(project=wandb_settings.get("project", "zoo"), entity=wandb_settings.get("entity"),
                         group=group, job_type=job_type, name=name, dir=str(folder), mode=mode, config=config,
                         id=run_id, resume="allow",
                         settings=wandb.Settings(console="off", silent=True))  # the table is what the console shows
        # Into the summary, not run.log: a logged table is a history row too, whose nrows and ncols
        # a W&B view charts as if they were metrics of a step.
        if plots:
            run.log({f"plots/{p.stem}": wandb.Image(str(p)) for p in plots})
        run.summary.update({**{key: wandb.Table(columns=columns, data=[[cell(v) for v in row] for row in rows])
                               for key, (columns, rows) in tables.items()},
                            **{key: cell(value) for key, value in (scalars or {}).items()}})
        run_dir = Path(run.dir).parent
        run.finish()
        drop_stale_offline(run_dir, run_id)
        return str(run_dir)
    except Exception as err:
        warnings.warn(f"W&B {job_type} run failed, the report is on disk only: {err!r}", RuntimeWarning, stacklevel=2)
        return None


def stable_id(folder: Path, job_type: str, name: str) -> str:
    """One W&B run id per comparison (the folder compared, the kind, the name): comparing again
    updates that run, where a fresh id each time added another run to the group."""
    key = f"{Path(folder).resolve()}\n{job_type}\n{name}"
    return f"{job_type}{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def drop_stale_offline(current: Path, run_id: str) -> None:
    """The earlier offline folders of the same run: `wandb sync` would upload each in turn, and a
    reader of the folder would find a stale comparison beside the current one."""
    pattern = re.compile(rf"offline-run-\d{{8}}_\d{{6}}-{re.escape(run_id)}(-\d+)?")
    for old in current.parent.glob(f"offline-run-*-{run_id}*"):
        if old != current and pattern.fullmatch(old.name) and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
