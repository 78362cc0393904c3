"""`zoo sweep FILE --launcher submitit`: the sweep as a job array through submitit, one task per
cell (or per shard, with --tasks). Each task runs its shard with the same code as `zoo sweep
--shard i/n`, so the ledger, the locks and `zoo compare` work unchanged. A task that Slurm preempts
or stops at its time limit is requeued (submitit's Checkpointable) and runs its shard again:
finished cells are skipped, and the cell that was cut off resumes from its checkpoint (it saved
its last step when the task's death reached it). Without Slurm, submitit's local executor runs
the same code path. With GPUs a task, each cell trains under torchrun on them (zoo.sweep.torchrun_cell)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import submitit

from zoo.errors import ConfigError
from zoo.sweep.runner import check_folder, run_sweep
from zoo.sweep.spec import SweepSpec, cell_experiment, expand
from zoo.trainer.parallelism import check_fsdp_world


class ShardTask(submitit.helpers.Checkpointable):
    """One array task: shard `index` of `shards` of the sweep (requeued as it is: the ledger knows
    what is done), each cell by `processes_per_cell` processes (torchrun on the task's GPUs)."""

    def __init__(self, sweep: dict[str, Any], base: dict[str, Any], shards: int, workers: int = 1,
                 processes_per_cell: int = 1):
        self.sweep, self.base, self.shards, self.workers = sweep, base, shards, workers
        self.processes_per_cell = processes_per_cell

    def __call__(self, index: int) -> dict[str, str]:
        sweep = SweepSpec.model_validate(self.sweep)
        return run_sweep(sweep, self.base, self.workers, (index, self.shards), processes_per_cell=self.processes_per_cell)


@dataclass
class Resources:
    """What each array task asks the cluster for."""

    partition: str | None = None
    gpus_per_cell: int = 0
    cpus_per_cell: int | None = None
    time_limit_min: int = 24 * 60
    array_parallelism: int | None = None


def launch(sweep: SweepSpec, base: dict[str, Any], resources: Resources, cluster: str | None = None,
           tasks: int | None = None, workers: int = 1, echo: Callable[[str], None] = print,
           processes_per_cell: int | None = None) -> list[submitit.Job]:
    """Submit the array: `tasks` shards (default one per cell), each cell trained by
    `processes_per_cell` processes (default: one per GPU of the task, torchrun where that is over
    one). Everything is validated first."""
    if resources.gpus_per_cell < 0:
        raise ConfigError(f"--gpus-per-cell {resources.gpus_per_cell}: give 0 or more")
    processes = max(1, resources.gpus_per_cell) if processes_per_cell is None else processes_per_cell
    if resources.gpus_per_cell and processes > resources.gpus_per_cell:
        raise ConfigError(f"--procs-per-cell {processes}: more processes than the {resources.gpus_per_cell} GPUs of "
                          "each task (--gpus-per-cell); give at most that many, or ask for more GPUs")
    cells = expand(sweep)
    for cell in cells:
        check_fsdp_world(cell_experiment(sweep, base, cell).train, processes)
    check_folder(sweep.directory(), sweep, base)
    shards = len(cells) if tasks is None else tasks
    if not 1 <= shards <= len(cells):
        raise ConfigError(f"--tasks {shards}: give 1 to {len(cells)} (the sweep's cells)")
    try:
        executor = submitit.AutoExecutor(folder=sweep.directory() / "submitit" / "%j", cluster=cluster)
    except RuntimeError as err:  # submitit's word for "no Slurm here"
        raise ConfigError(f"--cluster {cluster}: {err}") from None
    params: dict[str, Any] = {"name": f"zoo-{sweep.name}", "timeout_min": resources.time_limit_min,
                              "gpus_per_node": resources.gpus_per_cell}
    if resources.cpus_per_cell is not None:
        params["cpus_per_task"] = resources.cpus_per_cell
    slurm = {"slurm_partition": resources.partition, "slurm_array_parallelism": resources.array_parallelism}
    if executor.cluster == "slurm":
        params.update({key: value for key, value in slurm.items() if value is not None})
    elif any(value is not None for value in slurm.values()):
        raise ConfigError(f"--partition and --array-parallelism are Slurm's; submitit found no Slurm here (cluster "
                          f"{executor.cluster!r})")
    executor.update_parameters(**params)
    task = ShardTask(sweep.model_dump(mode="json"), base, shards, workers, processes)
    jobs = executor.map_array(task, list(range(shards)))
    echo(f"sweep {sweep.name}: {len(jobs)} {executor.cluster} task(s) for {len(cells)} cells "
         f"(job {jobs[0].job_id.split('_')[0]}); logs in {sweep.directory() / 'submitit'}")
    return jobs
