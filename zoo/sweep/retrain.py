"""A recorded cell trained again in a child process, so that its thread count and CPU capability
are the ones asked for (torch reads ATEN_CPU_CAPABILITY once, at start); inside
zoo.sweep.warm_retrain's `warm_children()`, in a child kept for the next cell of that environment:

    python -m zoo.sweep.retrain EXPERIMENT.yaml OUT.json [--until N [--replay FILE]]

writes the run's record to OUT.json: its result.json, or with --until the losses logged to step N
(the rest of the run is not trained), with --replay from recorded batches (zoo.sweep.replay)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from contextvars import ContextVar
from pathlib import Path

import torch

from zoo.children import capability_name, ended
from zoo.errors import ZooError
from zoo.records import RunRecord, read_result
from zoo.specs.yamlio import dump_yaml

CAPABILITY = "ATEN_CPU_CAPABILITY"
X86_LEVELS = ("default", "avx2", "avx512")
"""torch's CPU capabilities on x86-64, each holding the one before: a process may be told to use
the one torch detects or any below it, never one above (its kernels would die of SIGILL)."""
ENTRY = [sys.executable, "-m", "zoo.sweep.retrain"]
"""The command that runs this module's main."""
KEPT: ContextVar = ContextVar("kept_children", default=None)
"""Inside zoo.sweep.warm_retrain's `warm_children()`, the children it keeps: `retrain` hands them its cell."""


def retrain(experiment: dict, threads: int, scratch: Path, until: int | None = None,
            environment: dict[str, str] | None = None, entry: list[str] | None = None,
            replay: Path | None = None) -> RunRecord:
    """Train `experiment` (W&B off, its folder under `scratch`) in a child process with `threads`
    threads and the environment variables given; a failure raises ZooError with its last line.
    `entry` is the command that runs this module's main (a benchmark's, to change the code)."""
    command, env, out = retrain_command(experiment, threads, scratch, until, environment, entry, replay)
    children = KEPT.get()
    if children is not None and entry is None:  # this module's own main, run in a child kept warm
        return children.retrain(command[len(ENTRY):], env, out)
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    return retrained(done.returncode, done.stderr, out, env)


def retrain_command(experiment: dict, threads: int, scratch: Path, until: int | None = None,
                    environment: dict[str, str] | None = None, entry: list[str] | None = None,
                    replay: Path | None = None) -> tuple[list[str], dict[str, str], Path]:
    """The child's command, its environment and the file it writes its record to (a benchmark
    starts it itself, to read the child's own resource use)."""
    work = scratch / f"retrain-{len(list(scratch.glob('retrain-*')))}"  # each run in a folder of its own
    work.mkdir(parents=True)
    experiment = {**experiment, "train": {**experiment["train"], "out_dir": str(work / "runs")},
                  "wandb": {**experiment["wandb"], "mode": "disabled", "dir": str(work)}}
    file, out = work / "experiment.yaml", work / "record.json"
    file.write_text(dump_yaml(experiment), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), **(environment or {})}
    command = [*(entry or ENTRY), str(file), str(out)]
    command += ["--until", str(until)] if until else []
    command += ["--replay", str(replay)] if replay else []
    return command, env, out


def retrained(returncode: int, stderr: str, out: Path, env: dict[str, str]) -> RunRecord:
    """The record a finished child wrote, or ZooError with why it wrote none."""
    if returncode < 0:  # a signal: its name says more than whatever the child printed before it
        raise ZooError(f"training it again failed: {ended(returncode, env.get(CAPABILITY))}")
    if returncode != 0 or not out.is_file():
        raise ZooError("training it again failed: " + (stderr.strip().splitlines() or [ended(returncode)])[-1])
    return read_result(out)


def cpu_capabilities() -> tuple[tuple[str, ...], dict[str, str]]:
    """The CPU capabilities a child may be told to use here (torch's own detection and every level
    below it), and each level above it with why it cannot be tried."""
    current = torch.backends.cpu.get_cpu_capability().lower()
    if current not in X86_LEVELS:  # another architecture's ladder (sve256, vsx, zvector): itself and the default
        return ("default", current), {}
    top = X86_LEVELS.index(current) + 1
    capped = os.environ.get(CAPABILITY)
    why = (f"{CAPABILITY}={capped} holds this process to {capability_name(current)}" if capped
           else f"this CPU lacks it (torch detects {capability_name(current)})")
    return X86_LEVELS[:top], {level: why for level in X86_LEVELS[top:]}


def other_roundings(threads: int) -> list[tuple[dict[str, str], str]]:
    """Every other rounding this machine can run, with how to say each: each other CPU capability
    of torch's kernels it runs (never one above its own), and one thread more. A final metric's
    spread is sampled over them all: one draw does not bound what another machine moves it."""
    current = torch.backends.cpu.get_cpu_capability().lower()
    levels = [level for level in cpu_capabilities()[0] if level != current]
    more = str(threads + 1)
    return [*(({CAPABILITY: level}, f"CPU capability {level.upper()} instead of {current.upper()}") for level in levels),
            ({"OMP_NUM_THREADS": more, "MKL_NUM_THREADS": more}, f"{more} threads instead of {threads}")]


def other_rounding(threads: int) -> tuple[dict[str, str], str]:
    """Environment variables that make this machine round otherwise, and how to say it: another
    CPU capability of torch's kernels where there is one, else another thread count."""
    current = torch.backends.cpu.get_cpu_capability()
    if current != "DEFAULT":
        return {CAPABILITY: "default"}, f"CPU capability DEFAULT instead of {current}"
    more = str(threads + 1)
    return {"OMP_NUM_THREADS": more, "MKL_NUM_THREADS": more}, f"{more} threads instead of {threads}"


def retrain_here(argv: list[str]) -> None:
    """Train what `argv` (this module's arguments) asks, in this process, and write its record;
    ZooError says why it could not."""
    from zoo.provenance import environment
    from zoo.specs.experiment import load_experiment
    from zoo.sweep.replay import replayed_task
    from zoo.trainer.freed_memory import freed_memory_kept
    from zoo.trainer.loop import Trainer, train

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment")
    parser.add_argument("out")
    parser.add_argument("--until", type=int)
    parser.add_argument("--replay")
    args = parser.parse_args(argv)
    experiment = load_experiment(args.experiment)
    if args.replay and not args.until:
        raise ZooError("--replay holds an early window's batches only: give --until")
    if args.until:
        task = replayed_task(args.replay, experiment.task, experiment.train.seed) if args.replay else None
        trainer = Trainer(experiment, task=task)
        with freed_memory_kept():
            history = trainer.first_steps(args.until)
        record = RunRecord(status="interrupted", name=trainer.name, steps=trainer.step, history=history,
                           first_loss=trainer.watch.first_loss, threads=torch.get_num_threads(),
                           environment=environment(trainer.device))
    else:
        result = train(experiment)
        record = read_result(result.run_dir / "result.json")
    Path(args.out).write_text(json.dumps(record.model_dump(mode="json")), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    try:
        retrain_here(sys.argv[1:] if argv is None else argv)
    except ZooError as err:
        sys.exit(f"zoo: {err}")


if __name__ == "__main__":
    main()
