"""Children that train recorded cells again, kept warm from one cell to the next.

A cell trained again in a fresh process pays Python's and torch's start first (torch, the compiler
modules its optimizers load, the zoo: about 3 s of CPU, more than a short early window trains).
Inside `warm_children()` a child is kept for each environment asked for (thread count, CPU
capability: what torch reads once, at start) and trains cell after cell, as a sweep's worker does
(zoo.sweep.worker: a cell's numbers do not depend on what its process trained before, which
tests/test_sweep_workers.py holds). A child that fails in a way the zoo did not explain (a bug's
exception, a signal) trains nothing more; the next cell gets a fresh one.

Protocol: one JSON line per cell on the child's stdin, {"argv": zoo.sweep.retrain's arguments,
"log": FILE}; one JSON line back, {"error": null} or {"error": the failure's last line, "ends": whether
the child ends with it}, on the stdout the child was started with (what the cell prints goes to
its log).
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from zoo.errors import ZooError
from zoo.records import RunRecord, read_result
from zoo.sweep.retrain import KEPT, retrain_here, retrained

CHILD = "from zoo.sweep.warm_retrain import serve_retraining; serve_retraining()"
"""A warm child's program."""

BOOKKEEPING = ("PYTEST_CURRENT_TEST",)
"""Variables of the environment that no training reads and that change from one cell to the next
(pytest names the test running in it): a child started under another value takes the cell."""


class WarmChildren:
    """One live child per environment; `retrain` hands it a cell and reads back the cell's record."""

    def __init__(self) -> None:
        self.children: dict[frozenset[tuple[str, str]], subprocess.Popen] = {}

    def retrain(self, argv: list[str], env: dict[str, str], out: Path) -> RunRecord:
        """What zoo.sweep.retrain's `retrain` returns for a child started with `argv` and `env`."""
        key = frozenset((name, value) for name, value in env.items() if name not in BOOKKEEPING)
        child = self.children.get(key)
        if child is None or child.poll() is not None:
            child = self.children[key] = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                                                          stdout=subprocess.PIPE, text=True, env=env)
        log = out.with_name("log.txt")
        try:
            child.stdin.write(json.dumps({"argv": argv, "log": str(log)}) + "\n")
            child.stdin.flush()
            reply = child.stdout.readline()
        except BrokenPipeError:
            reply = ""
        if not reply:  # it died: a signal's name, or the last line it printed
            del self.children[key]
            said = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
            return retrained(child.wait() or 1, said, out, env)
        reply = json.loads(reply)
        if reply["error"] is not None:
            if reply["ends"]:
                self._retire(key)
            raise ZooError(f"training it again failed: {reply['error']}")
        return read_result(out)

    def _retire(self, key: frozenset[tuple[str, str]]) -> None:
        child = self.children.pop(key)
        with suppress(BrokenPipeError):
            child.stdin.close()
        child.wait()

    def close(self) -> None:
        for key in list(self.children):
            self._retire(key)


@contextmanager
def warm_children(children: WarmChildren | None = None) -> Iterator[WarmChildren]:
    """Inside, zoo.sweep.retrain's `retrain` trains in kept children: those given (left open for
    another time), or new ones ended at the end; nested, the outermost's."""
    outer = KEPT.get()
    if outer is not None:
        yield outer
        return
    mine = children or WarmChildren()
    token = KEPT.set(mine)
    try:
        yield mine
    finally:
        KEPT.reset(token)
        if children is None:
            mine.close()


def kept() -> WarmChildren | None:
    """The children kept by the `warm_children()` this runs inside, if any."""
    return KEPT.get()


def serve_retraining() -> None:
    """A warm child: train each requested cell until stdin closes or a cell fails unexplained."""
    import torch

    from zoo.sweep.worker import forget_compiled, output_to, replies_channel

    replies = replies_channel()
    for line in sys.stdin:
        request = json.loads(line)
        threads, error, trusted = torch.get_num_threads(), None, True
        with output_to(request["log"]):
            try:
                retrain_here(request["argv"])
            except ZooError as err:
                error = f"zoo: {err}"
            except Exception as err:  # a bug: shown in the log, and this process is not trusted further
                traceback.print_exc()
                error, trusted = traceback.format_exception_only(err)[-1].strip(), False
            finally:
                torch.set_num_threads(threads)  # a cell's train.threads is not heard by the next
                forget_compiled()
        replies.write(json.dumps({"error": error, "ends": not trusted}) + "\n")
        replies.flush()
        if not trusted:
            return
