"""torch.compile for training: static graphs, one per bucketed batch shape, and a clock of what
compiling cost.

With `dynamic=False` every bucket (zoo.trainer.buckets) is compiled once, for kernels specialized
to its shape; torch's default instead recompiles the first changed length as a dynamic-shape
graph. Dynamo stops compiling after a few graphs of one function (8 in torch 2.13) and runs the
rest eagerly without a word: the limit is raised to hold every bucket.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch
from torch import nn

BACKEND = "inductor"
"""What torch.compile hands the captured graphs to; the tests count graphs with "eager"."""

GRAPH_LIMIT = 64
"""Graphs of one compiled function. A (source, target) pair of buckets is a graph: lengths of one
corpus meet a handful of pairs (`reverse` with lengths 3-40 in batches of 4: 6)."""


def compiled(module: nn.Module) -> nn.Module:
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # renamed in torch 2.7
    setattr(config, name, max(getattr(config, name), GRAPH_LIMIT))
    return torch.compile(module, backend=BACKEND, dynamic=False)


def graphs_so_far() -> int:
    """Graphs dynamo has captured in this process."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


class CompileClock:
    """The graphs a run compiled and the wall seconds of the steps that compiled them (compiling
    runs on the host, before the step's kernels)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.graphs, self.seconds = enabled, 0, 0.0

    @contextmanager
    def step(self):
        if not self.enabled:  # an eager run's steps pay nothing for the clock
            yield
            return
        before, start = graphs_so_far(), time.perf_counter()
        yield
        if graphs_so_far() > before:
            self.graphs += graphs_so_far() - before
            self.seconds += time.perf_counter() - start

    def metrics(self) -> dict[str, float]:
        """What the log shows of compiling: nothing for an eager run."""
        if not self.enabled:
            return {}
        return {"train/compiled_graphs": float(self.graphs), "train/compile_s": self.seconds}
