"""The commands of sweeps: `zoo sweep` (here or as a submitit job array), `zoo compare` and
`zoo reproduce`; the parser that reads their arguments is zoo.cli's."""

from __future__ import annotations

import argparse
from pathlib import Path

from zoo.errors import ConfigError, ZooError


def cmd_sweep(args: argparse.Namespace) -> None:
    from zoo.sweep import expand, export_wandb, load_sweep, run_sweep, shard
    from zoo.sweep.export import find_cell
    from zoo.sweep.runner import check_folder

    sweep, base = load_sweep(args.file, [*args.set, *([f"max_cells={args.max_cells}"] if args.max_cells else [])])
    index, _, count = args.shard.partition("/")
    if not (index.isdigit() and count.isdigit()):
        raise ZooError(f"--shard {args.shard}: expected i/n, e.g. 0/4")
    if args.export:
        print(f"W&B sweep file: {export_wandb(sweep, base)}  (then: wandb sweep FILE; wandb agent SWEEP_ID)")
        return
    if args.dry_run:
        check_folder(sweep.directory(), sweep, base)
        cells = shard(expand(sweep), int(index), int(count))
        for cell in cells:
            print(cell.name)
        print(f"{len(cells)} cells of {len(expand(sweep))} in shard {args.shard}; folder {sweep.directory()}")
        return
    if args.cell:
        if args.shard != "0/1" or args.launcher == "submitit":
            raise ConfigError("--cell trains one named cell here; it goes without --shard and --launcher submitit")
        statuses = run_sweep(sweep, base, 1, only=find_cell(sweep, args.cell), processes_per_cell=args.procs_per_cell or 1)
    elif args.launcher == "submitit":
        statuses = submit(args, sweep, base)
        if statuses is None:
            return
    else:
        statuses = run_sweep(sweep, base, args.workers, (int(index), int(count)),
                             cells_per_process=args.cells_per_process, processes_per_cell=args.procs_per_cell or 1)
        statuses.update(confirm(args, sweep, base, statuses))
    counts = {s: list(statuses.values()).count(s) for s in sorted(set(statuses.values()))}
    print(f"sweep {sweep.name}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    print(f"compare: zoo compare {sweep.directory()}")
    if counts.get("failed"):
        raise SystemExit(1)


def confirm(args: argparse.Namespace, sweep, base, statuses: dict[str, str]) -> dict[str, str]:
    """A tuned sweep's confirmation (confirm_seeds): once every tuning cell is done, each variant
    trains again at its chosen value on the fresh seeds. A shard alone cannot know the choice."""
    from zoo.compare.confirm import cells_to_confirm
    from zoo.records import DONE
    from zoo.sweep import run_sweep

    if not sweep.confirm_seeds:
        return {}
    if args.shard != "0/1":
        print(f"sweep {sweep.name}: the confirmation on seeds {sweep.confirm_seeds} runs once every shard is done: "
              f"run `zoo sweep {args.file}` without --shard then")
        return {}
    if any(status not in DONE for status in statuses.values()):
        print(f"sweep {sweep.name}: tuning cells are not all done; the confirmation waits for them")
        return {}
    cells = cells_to_confirm(sweep.directory())
    print(f"sweep {sweep.name}: confirming each variant's chosen value on seeds {sweep.confirm_seeds} ({len(cells)} cells)")
    return run_sweep(sweep, base, args.workers, cells=cells, cells_per_process=args.cells_per_process,
                     processes_per_cell=args.procs_per_cell or 1)


def cmd_reproduce(args: argparse.Namespace) -> None:
    from zoo.sweep.reproduce import reproduce

    results = reproduce(args.ledger, args.cells, args.set, early=args.early, replay=args.replay)
    if not all(result.matches if args.strict else result.agrees or result.inconclusive for result in results):
        raise SystemExit(1)
    if any(result.inconclusive for result in results):
        raise SystemExit(3)


def submit(args: argparse.Namespace, sweep, base) -> dict[str, str] | None:
    """The sweep as a submitit job array; on Slurm, returns once submitted (None), elsewhere waits for
    the local tasks and returns every cell's status."""
    from zoo.sweep.launch import Resources, launch

    if args.shard != "0/1":
        raise ConfigError("--shard goes with the local launcher; with --launcher submitit, --tasks N splits the sweep")
    resources = Resources(args.partition, args.gpus_per_cell, args.cpus_per_cell, args.time_limit, args.array_parallelism)
    jobs = launch(sweep, base, resources, None if args.cluster == "auto" else args.cluster, args.tasks, args.workers,
                  processes_per_cell=args.procs_per_cell)
    if jobs[0].__class__.__name__ not in ("LocalJob", "DebugJob"):
        print(f"watch: squeue -j {jobs[0].job_id.split('_')[0]}; when done: zoo compare {sweep.directory()}")
        return None
    return {name: status for job in jobs for name, status in job.result().items()}


def cmd_compare(args: argparse.Namespace) -> None:
    from zoo.compare import compare, transfer

    if len(args.sweep_dirs) > 2:
        raise ConfigError(f"zoo compare takes one sweep folder, or two to compare across tasks; got {len(args.sweep_dirs)}")
    if len(args.sweep_dirs) == 2 and args.by:
        raise ConfigError("--by draws one sweep's effects within each value of one of its axes; give one sweep folder")
    if len(args.sweep_dirs) == 2:
        report = transfer(*args.sweep_dirs, out=args.out, wandb_mode=args.wandb_mode, metric=args.metric)
        print(report.table_text)
    elif args.out:
        raise ConfigError("--out names the folder of a comparison of two sweeps; one sweep's report goes in its folder")
    else:
        report = compare(Path(args.sweep_dirs[0]), wandb_mode=args.wandb_mode, metric=args.metric, by=args.by)
        print(f"{report.table_text}\n\n{report.effects_text}")
    print(f"report: {report.markdown}")
    for plot in report.plots:
        print(f"plot:   {plot}")
    if report.wandb_run:
        print(f"W&B:    {report.wandb_run}  (its tables and plots, in the sweep's group; upload: wandb sync)")
