"""Freed memory kept on the heap while a run trains (zoo.trainer.freed_memory) against glibc's own
behaviour: the early window of a published cell, trained from its record (its replay where its
corpus is not shipped) in child processes started in turn, each arm once a round.

    python experiments/benchmarks/freed_memory.py [--ledger NAME ...] [--until N] [--rounds R]   # prints JSON

For each arm: the median wall, user and system seconds of a child and its peak RSS, the ratio of
the kept arm's wall time to the default's, and whether both logged the same losses, bit for bit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import emit, machine, say

from zoo.sweep.reproduce import early_window, recorded_cells, sensitive_cell
from zoo.sweep.retrain import retrain_command, retrained
from zoo.sweep.spec import cell_experiment, read_saved_sweep
from zoo.trainer.freed_memory import OPT_OUT

RESULTS = Path(__file__).resolve().parents[1] / "results"
ARMS = {"glibc default": {OPT_OUT: "0"}, "freed memory kept": {OPT_OUT: "1"}}


def child(command: list[str], env: dict[str, str]) -> tuple[dict[str, float], int, str]:
    """Run one child; its wall, user and system seconds and peak RSS (MiB), its exit status and stderr."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        said = stderr.read()
    spent = {"wall_s": time.perf_counter() - start, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
             "peak_rss_mib": usage.ru_maxrss / 1024}
    return spent, process.returncode, said


def measure(ledger: str, until: int | None, rounds: int) -> dict:
    path = RESULTS / ledger / "ledger.jsonl"
    replay = RESULTS / ledger / "replay.pt.gz"
    replay = replay if replay.is_file() else None
    task = read_saved_sweep(RESULTS / ledger)[1].get("task", {})
    sets = [f"task.{key}=/nonexistent/corpus" for key in ("data_dir", "path") if key in task] if replay else []
    sweep, base, finished = recorded_cells(path, sets)  # with a replay, nothing is read from the corpus
    name = sensitive_cell(path)
    cell, record = finished[name]
    experiment = cell_experiment(sweep, base, cell).model_dump(mode="json")
    experiment["train"]["device"] = "cpu"
    window = until or early_window(record.history)
    spent: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    losses: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(rounds):
            for arm, variables in ARMS.items():
                say(f"{ledger} {name}: {arm}, round {round_index + 1} of {rounds} ...")
                command, env, out = retrain_command(experiment, record.threads or 1, Path(scratch), window,
                                                    variables, replay=replay)
                used, code, said = child(command, env)
                now = retrained(code, said, out, env)
                spent[arm].append(used)
                losses.setdefault(arm, [[row.get("train/loss") for row in now.history], now.first_loss])
    medians = {arm: {key: statistics.median(run[key] for run in runs) for key in runs[0]} for arm, runs in spent.items()}
    default, kept = (medians[arm] for arm in ARMS)
    return {"ledger": ledger, "cell": name, "steps": window, "threads": record.threads or 1, "arms": medians,
            "ratio_wall_kept_to_default": kept["wall_s"] / default["wall_s"],
            "ratio_rss_kept_to_default": kept["peak_rss_mib"] / default["peak_rss_mib"],
            "same_losses": len({repr(value) for value in losses.values()}) == 1}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledger", nargs="+", default=["multi30k-norm", "seed-axes"])
    parser.add_argument("--until", type=int, help="train to this step (default: each cell's early window)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="a tiny check that it runs: 2 steps, one round")
    args = parser.parse_args(argv)
    until, rounds = (2, 1) if args.smoke else (args.until, args.rounds)
    result = {"machine": machine(), "results": [measure(ledger, until, rounds) for ledger in args.ledger]}
    emit(result)
    return result


if __name__ == "__main__":
    main()
