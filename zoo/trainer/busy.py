"""Cores that other processes share: torch's threads then wait on each other and a CPU run's step
rate falls, on a busy 2-core machine 3.4 to 3.7 times below one thread's. The rate of training
steps alone (evaluations and checkpoints left out) is watched, and a fall is said once, with the
setting that helps."""

from __future__ import annotations

import os

import torch

BUSY_FACTOR = 0.5
"""A logging window whose step rate is below this share of the best window's says the cores look busy."""


def allowed_cores() -> int:
    """The CPUs this process may run on: its affinity (a container's, job scheduler's or taskset's
    cores, not the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def usable_threads() -> int:
    """The threads a run takes by default: torch's own count (OMP_NUM_THREADS where set, as a
    sweep's worker sets its share), never more than allowed_cores()."""
    current = torch.get_num_threads()
    return current if "OMP_NUM_THREADS" in os.environ else max(1, min(current, allowed_cores()))


class BusyCores:
    """The step rate per logging window, and one line the first time it falls below BUSY_FACTOR of
    the best window's (the first window, with its warm-up, is not a measure)."""

    def __init__(self, threads: int):
        self.threads, self.seconds, self.steps, self.windows = threads, 0.0, 0, 0
        self.best: float | None = None
        self.said = False

    def add(self, seconds: float) -> None:
        self.seconds += seconds
        self.steps += 1

    def read(self) -> str | None:
        """Close the window: the line to say, once, or None."""
        rate = self.steps / self.seconds if self.seconds > 0 and self.steps else None
        self.seconds, self.steps, self.windows = 0.0, 0, self.windows + 1
        if rate is None or self.windows == 1:
            return None
        if self.best is None or rate > self.best:
            self.best = rate
            return None
        if self.said or rate >= BUSY_FACTOR * self.best:
            return None
        self.said = True
        advice = (f"with {self.threads} threads a busy machine can run slower than with one: set train.threads "
                  "(train.threads=1, say); the run stays the same run" if self.threads > 1 else
                  "the run already uses one thread")
        return (f"the step rate fell to {rate:.3g} steps/s from {self.best:.3g}: the cores look busy (other processes "
                f"on them?); {advice}")
