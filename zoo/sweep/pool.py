"""The sweep's pool of worker processes (each runs zoo.sweep.worker's program), and the share of
the cores each gets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from contextlib import suppress
from pathlib import Path

from zoo.sweep.torchrun_cell import torchrun_command
from zoo.sweep.worker import KEEP_GOING
from zoo.trainer.busy import allowed_cores


def threads_per_worker(workers: int) -> int:
    """Each worker's share of the cores this process may use: its CPU affinity (a job scheduler's
    or taskset's cores, not the machine's), or OMP_NUM_THREADS where that is set lower."""
    cores = allowed_cores()
    limit = os.environ.get("OMP_NUM_THREADS", "")
    if limit.isdigit() and int(limit) > 0:
        cores = min(cores, int(limit))
    return max(1, cores // workers)


WORKER = "from zoo.sweep.worker import main; main()"
"""A worker process's program (not `-m zoo.sweep.worker`: this package imports that module)."""


class Workers:
    """The sweep's worker processes (zoo.sweep.worker): one per pool thread, started for its first
    cell, kept for the next, and started afresh after a cell that ended it (a crash, a bug, a
    signal). Each runs in a session of its own, so a Ctrl-C reaches it once, through `forward`, and
    it dies with the sweep if the sweep is killed (see guards.die_with_parent). `cells_per_process`
    retires a worker after that many cells (as multiprocessing's maxtasksperchild does: a bound on
    what a long sweep's process can accumulate; 1 is a process per cell). A cell trained by several
    processes is a torchrun of its own instead (zoo.sweep.torchrun_cell), the worker's threads
    shared between its ranks."""

    def __init__(self, threads: int, cells_per_process: int | None = None, processes_per_cell: int = 1):
        self.cells_per_process, self.threads, self.processes_per_cell = cells_per_process, threads, processes_per_cell
        self.env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
                    "ZOO_PARENT_PID": str(os.getpid())}
        self.live: set[subprocess.Popen] = set()
        self.launched: set[subprocess.Popen] = set()
        self.stopping: int | None = None
        self._lock = threading.Lock()
        self._mine = threading.local()

    def train(self, experiment_file: Path, log_file: Path, processes: int | None = None) -> int | None:
        """`zoo train FILE --resume`'s exit code for the cell (negative: the signal that killed its
        worker), or None when the sweep is stopping and the cell was not started; `processes`: the
        cell trains under torchrun with that many, not in a worker."""
        if processes is not None:
            return self._torchrun(experiment_file, log_file, processes)
        request = json.dumps({"experiment": str(experiment_file), "log": str(log_file)}) + "\n"
        while True:
            with self._lock:
                if self.stopping is not None:
                    return None
                worker = getattr(self._mine, "worker", None) or self._start()
            try:
                worker.stdin.write(request)
                worker.stdin.flush()
                break
            except BrokenPipeError:  # it died between cells, before taking this one: a fresh one takes it
                self._retire(worker)
        reply = worker.stdout.readline()
        code = json.loads(reply)["code"] if reply else None
        worker.cells = getattr(worker, "cells", 0) + 1
        if code not in KEEP_GOING or worker.cells == self.cells_per_process:  # the worker ends with this cell
            died_of = self._retire(worker)
            code = died_of if code is None else code
        return code

    def _torchrun(self, experiment_file: Path, log_file: Path, processes: int) -> int | None:
        """The cell as a torchrun of `processes` ranks writing to its log: torchrun's exit code."""
        threads = str(max(1, self.threads // processes))
        with self._lock:
            if self.stopping is not None:
                return None
            with open(log_file, "a", encoding="utf-8") as log:
                launcher = subprocess.Popen(torchrun_command(experiment_file, processes), stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                            env={**self.env, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads})
            self.launched.add(launcher)
        code = launcher.wait()
        with self._lock:
            self.launched.discard(launcher)
        return code

    def _start(self) -> subprocess.Popen:
        worker = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=self.env, start_new_session=True)
        self.live.add(worker)
        self._mine.worker = worker
        return worker

    def _retire(self, worker: subprocess.Popen) -> int:
        """Let the worker end (no more cells for it) and wait for it; its exit code."""
        with suppress(BrokenPipeError):
            worker.stdin.close()
        code = worker.wait()
        with self._lock:
            self.live.discard(worker)
        if getattr(self._mine, "worker", None) is worker:
            self._mine.worker = None
        return code

    def close(self) -> None:
        """End every worker: called while the pool's threads live, since a worker's death signal
        is tied to the thread that started it."""
        for worker in list(self.live):
            self._retire(worker)

    def forward(self, signum: int, frame=None) -> None:
        with self._lock:
            self.stopping = signum
            for child in self.live | self.launched:
                child.send_signal(signum)
