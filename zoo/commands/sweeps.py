"""The commands of sweeps: `zoo sweep` (here or as a submitit job array), `zoo compare` (one
sweep's report, or whether two sweeps' rankings transfer) and `zoo reproduce`."""

from __future__ import annotations

import argparse
from pathlib import Path

from zoo.commands import Command, add_sets, positive_int, register
from zoo.errors import ConfigError, ZooError


@register("sweep", 90)
class SweepCommand(Command):
    """train a grid of variants over seeds in worker processes"""

    def run(self, args: argparse.Namespace) -> None:
        from zoo.sweep import cell_experiment, expand, export_wandb, load_sweep, run_sweep, shard
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
            for cell in cells:  # steps that tokens_per_parameter derives are said, to be seen before anything trains
                steps = f"  ({cell_experiment(sweep, base, cell).train.steps:,} steps)" if sweep.tokens_per_parameter else ""
                print(f"{cell.name}  ->  {sweep.directory() / 'runs' / cell.name}{steps}")
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

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", help="a SweepSpec YAML file")
        parser.add_argument("--workers", type=positive_int, default=1,
                            help="cells at once (at least 1), each worker a process that trains cell after cell; "
                            "CPU threads are divided between them")
        parser.add_argument("--cells-per-process", type=positive_int, metavar="N",
                            help="start a worker's process afresh after N cells (default: never; 1: a process per cell)")
        parser.add_argument("--procs-per-cell", type=positive_int, metavar="N",
                            help="train each cell by N processes under torchrun on this machine (GPUs, or CPU "
                            "processes with gloo); train.parallel fsdp cells always go through torchrun (default 1; "
                            "with --launcher submitit, one per GPU of a task)")
        parser.add_argument("--max-cells", type=positive_int, metavar="N",
                            help="allow a grid of up to N cells (default 10,000; counted before the grid expands)")
        parser.add_argument("--shard", default="0/1", metavar="I/N", help="run only shard I of N (0-based)")
        parser.add_argument("--dry-run", action="store_true", help="print the cells and the run folder each would train in")
        parser.add_argument("--export", choices=["wandb"], help="write a W&B sweep configuration instead of running")
        parser.add_argument("--cell", nargs="+", metavar="KEY=VALUE",
                            help="train only the cell of these grid and tuned values and seed (seed=N), as W&B's agent "
                            "asks for an exported sweep's cells")
        add_sets(parser, "experiment fields (train.steps=100) or sweep fields (seeds=[0,1,2])")
        add_slurm_args(parser.add_argument_group("a job array through submitit (--launcher submitit)"))


def add_slurm_args(slurm) -> None:
    slurm.add_argument("--launcher", choices=["local", "submitit"], default="local",
                       help="local: this process runs the cells; submitit: one array task per cell on Slurm, or "
                       "submitit's local executor where there is no Slurm")
    slurm.add_argument("--cluster", choices=["auto", "slurm", "local", "debug"], default="auto",
                       help="submitit's executor (auto: Slurm where sbatch exists, else local)")
    slurm.add_argument("--tasks", type=positive_int, help="array tasks, each a shard of the sweep (default: one per cell)")
    slurm.add_argument("--partition", help="Slurm partition")
    slurm.add_argument("--gpus-per-cell", type=int, default=0, help="GPUs of each task")
    slurm.add_argument("--cpus-per-cell", type=positive_int, help="CPU cores of each task")
    slurm.add_argument("--time-limit", type=positive_int, default=24 * 60, metavar="MINUTES",
                       help="each task's time limit; a task stopped by it is requeued and resumes (default 1440)")
    slurm.add_argument("--array-parallelism", type=positive_int, help="array tasks running at once (Slurm's %%N)")


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


@register("compare", 100)
class CompareCommand(Command):
    """table, effects with 95% intervals, plots and report of a sweep; of two sweeps with the same
    grid: whether the ranking transfers"""

    def run(self, args: argparse.Namespace) -> None:
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

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("sweep_dirs", nargs="+", metavar="SWEEP_DIR", help="one sweep folder, or two (A B)")
        parser.add_argument("--out", help="the folder of a two-sweep report (default: A-vs-B beside A, by the sweeps' "
                            "names)")
        parser.add_argument("--metric", help="another logged metric than the sweep's, e.g. long/exact_match, or a "
                            "kept model's: best_checkpoint/test/bleu")
        parser.add_argument("--by", action="append", default=[], metavar="AXIS",
                            help="draw every other axis's paired effects within each value of AXIS (a grid key or its "
                            "label) into effects_by_AXIS.png; repeatable; model sizes always get one")
        parser.add_argument("--wandb-mode", choices=["offline", "online", "disabled"],
                            help="default: the sweep's own mode (WANDB_MODE wins)")


@register("reproduce", 110)
class ReproduceCommand(Command):
    """train recorded cells of a sweep's ledger again: where all that decides the rounding is the
    recorded one every final metric must match bit for bit, elsewhere the losses logged to step 20
    must agree within rounding (exit 1 if not; 3 where another rounding here moves this cell past
    the tolerance too)"""

    def run(self, args: argparse.Namespace) -> None:
        from zoo.sweep.reproduce import reproduce

        results = reproduce(args.ledger, args.cells, args.set, early=args.early, replay=args.replay)
        if not all(result.matches if args.strict else result.agrees or result.inconclusive for result in results):
            raise SystemExit(1)
        if any(result.inconclusive for result in results):
            raise SystemExit(3)

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("ledger", help="a sweep's ledger.jsonl (its sweep.yaml beside it)")
        parser.add_argument("cells", nargs="*", help="cell names, e.g. 'norm=pre,ffn=gelu,seed=0' (default: every "
                            "finished cell)")
        add_sets(parser, "where the data is now, e.g. task.data_dir=/path/to/multi30k", "task.KEY=VALUE")
        parser.add_argument("--strict", action="store_true",
                            help="exit 1 unless every cell matches bit for bit, in another environment too")
        parser.add_argument("--early", action="store_true",
                            help="train only each cell's first steps (to step 20, or its first logged step) and judge "
                            "them: what CI runs on one cell of every published ledger")
        parser.add_argument("--replay", metavar="FILE", help="with --early and one cell: train it from the batches a "
                            "replay recorded (python -m zoo.sweep.record_replay), where its corpus is not")
