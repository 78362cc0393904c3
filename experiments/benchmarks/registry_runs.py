"""Runs of the main job's size for every optimizer and schedule no published ledger trains, and
every corpus format: experiments/seed_axes.yaml's base (d_model 64, 2+2 layers, 240 steps of 128
pairs) on a word-reversal parallel corpus written in each format. Prints each run's first logged
loss and its held-out metrics as JSON (one rate per optimizer, one seed: not a comparison of them).

    python experiments/benchmarks/registry_runs.py [--smoke]     # about a minute on 2 cores

The lists are walked together, so that as many runs as the longest list cover every entry: run i
takes the i-th optimizer, schedule and format, each list starting again when it runs out. Those the
published ledgers train (Adam, AdamW, constant, cosine) trained their cells at full size.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
from pathlib import Path

import yaml
from common import emit, machine

import zoo
from zoo.sweep.spec import cell_experiment, expand, read_saved_sweep

EXPERIMENTS = Path(__file__).resolve().parents[1]
MAIN_JOB = EXPERIMENTS / "seed_axes.yaml"
WORDS = [f"w{i}" for i in range(24)]


def write_corpus(folder: Path, fmt: str, train_size: int) -> None:
    """Word-level reversal: 3 to 7 words of 24, the target the source reversed, in format `fmt`."""
    draw = random.Random(0)
    for split, size in (("train", train_size), ("valid", 128), ("test", 128)):
        sources = [[draw.choice(WORDS) for _ in range(draw.randint(3, 7))] for _ in range(size)]
        pairs = [(" ".join(words), " ".join(reversed(words))) for words in sources]
        zoo.registry("format").get(fmt).write(folder, split, pairs)


def published() -> dict[str, set[str]]:
    """The optimizers and schedules the published ledgers' cells train."""
    found: dict[str, set[str]] = {"optimizer": set(), "schedule": set()}
    for ledger in (EXPERIMENTS / "results").glob("*/ledger.jsonl"):
        sweep, base = read_saved_sweep(ledger.parent)
        for cell in {cell.assignment: cell for cell in expand(sweep)}.values():  # seeds share their train settings
            train = cell_experiment(sweep, base, cell).train
            found["optimizer"].add(train.optimizer.name)
            found["schedule"].add(train.schedule.name)
    return found


def lists() -> dict[str, list[str]]:
    left_out = published()
    return {kind: [name for name in zoo.registry(kind).names() if name not in left_out.get(kind, ())]
            for kind in ("optimizer", "schedule", "format")}


def train_one(folder: Path, optimizer: str, schedule: str, fmt: str, steps: int, train_size: int):
    """The main job's base with this optimizer, schedule and format, trained in `folder` (the
    corpus too); returns zoo.train's result."""
    write_corpus(folder, fmt, train_size)
    experiment = yaml.safe_load(MAIN_JOB.read_text())["base"]
    experiment["task"] = {"name": "parallel", "data_dir": str(folder), "format": fmt, "tokenizer": "word",
                          "min_frequency": 1}
    experiment["train"] |= {
        "steps": steps, "optimizer": {"name": optimizer, **zoo.registry("optimizer").get(optimizer).usual},
        "schedule": schedule, "warmup_steps": min(24, steps // 2), "eval_every": steps, "eval_size": 128,
        "checkpoint_every": steps, "log_every": min(20, steps), "out_dir": str(folder / "runs")}
    experiment["wandb"] = {"mode": "disabled"}
    return zoo.train(experiment)


def first_loss(run) -> float:
    return next(row["train/loss"] for row in run.history if "train/loss" in row)


def one_run(folder: Path, optimizer: str, schedule: str, fmt: str, steps: int, train_size: int) -> dict:
    run = train_one(folder, optimizer, schedule, fmt, steps, train_size)
    return {"optimizer": optimizer, "schedule": schedule, "format": fmt, "first_loss": first_loss(run),
            **{key: value for key, value in run.metrics.items() if key.startswith(("eval/", "test/"))}}


def walked(lists: dict[str, list[str]], i: int) -> list[str]:
    """Run i's optimizer, schedule and format: the i-th of each list, each starting again when it runs out."""
    return [names[i % len(names)] for names in lists.values()]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="4 steps on 200 pairs: checks the script")
    args = parser.parse_args(argv)
    steps, train_size = (4, 200) if args.smoke else (240, 4000)
    entries = lists()
    runs = []
    for i in range(max(map(len, entries.values()))):
        with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(sys.stderr):  # stdout: the JSON
            runs.append(one_run(Path(folder), *walked(entries, i), steps, train_size))
    result = {"benchmark": "registry_runs", "smoke": args.smoke, "machine": machine(), "steps": steps,
              "lists": entries, "runs": runs}
    emit(result)
    return result


if __name__ == "__main__":
    main()
