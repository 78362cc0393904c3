"""A sweep's worker process: it trains cell after cell, so a cell no longer pays a process start
(Python, torch, the CUDA context, W&B's service: about 5 s a cell on CPU, measured by
experiments/benchmarks/sweep_workers.py). Each cell is what `zoo train FILE --resume` does (the
same function, called without argument strings, with the same exit codes), its output goes to
its own log.txt, and a cell that ends in anything but a result or a user's mistake (a bug's
traceback, a signal) ends the worker too, so the next cell starts in a fresh process and no cell
can change another.

Protocol: one JSON line per cell on stdin, {"experiment": FILE, "log": FILE}; one JSON line back,
{"code": EXIT_CODE}, on the stdout the worker was started with (cells never write there).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from typing import IO

KEEP_GOING = (0, 2)
"""Exit codes after which the worker takes another cell: a result (finished, already finished) or
a refusal the zoo explained (2). A diverged run also exits 2, with its result written."""


@contextmanager
def output_to(log_file: str) -> Iterator[None]:
    """Inside, what the cell prints goes to `log_file`: Python's sys.stdout and sys.stderr, and
    file descriptors 1 and 2 for what C code and other processes write."""
    sys.stdout.flush(), sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_file, "a", encoding="utf-8", buffering=1) as log:
        os.dup2(log.fileno(), 1), os.dup2(log.fileno(), 2)
        try:
            with redirect_stdout(log), redirect_stderr(log):
                yield
        finally:
            for fd, before in zip((1, 2), saved):
                os.dup2(before, fd)
                os.close(before)


def train_cell_file(experiment_file: str) -> int:
    """What `zoo train FILE --resume` does, called in this process: its exit code (1 with the
    traceback printed for anything the zoo does not catch, as Python would)."""
    import torch

    from zoo.errors import exit_code_of
    from zoo.specs.experiment import load_experiment
    from zoo.trainer.console import train_and_report

    threads = torch.get_num_threads()  # a part that sets its own is not heard by the next cell
    try:
        return exit_code_of(lambda: train_and_report(load_experiment(experiment_file), resume=True))
    except SystemExit as done:  # the zoo raises none; a plugin's sys.exit still gets the cell its code
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except Exception:  # a bug: shown in the cell's log, and this process is not trusted further
        traceback.print_exc()
        return 1
    finally:
        torch.set_num_threads(threads)


def forget_compiled() -> None:
    """Drop the last cell's compiled graphs: dynamo counts a function's graphs across models, and a
    later cell must get the same graph budget as a cell in a process of its own."""
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].reset()


def serve(requests: IO[str], replies: IO[str]) -> None:
    """Train each requested cell until stdin closes or a cell ends the worker."""
    for line in requests:
        request = json.loads(line)
        try:
            with output_to(request["log"]):
                code = train_cell_file(request["experiment"])
        except OSError as err:  # the log cannot be opened (a folder in its place, a full disk): nothing ran
            if err.filename != request["log"]:
                raise
            print(f"zoo: {request['log']}: cannot open the cell's log ({err.strerror or err}); the cell did not run",
                  file=sys.stderr, flush=True)
            code = 2
        forget_compiled()
        replies.write(json.dumps({"code": code}) + "\n")
        replies.flush()
        if code not in KEEP_GOING:
            return


def replies_channel() -> IO[str]:
    """The stdout this process was started with, kept for its replies alone: file descriptor 1
    goes to /dev/null, so nothing a cell prints can reach the parent through it."""
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    return replies


def main() -> None:
    from zoo.trainer.guards import die_with_parent

    die_with_parent()  # as `zoo train` does: a worker outlives no sweep
    replies = replies_channel()
    try:
        serve(sys.stdin, replies)
    except KeyboardInterrupt:  # the sweep's Ctrl-C, passed on between cells: nothing to save
        raise SystemExit(130) from None
    except BrokenPipeError:  # the sweep is gone; the cell it asked for is saved in its folder
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, replies.fileno())  # so the reply's last flush at exit cannot fail again
        raise SystemExit(0) from None

