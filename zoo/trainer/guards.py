"""What stops a run early, and how: divergence (a non-finite or exploding loss, non-finite weights)
and a polite request to stop (SIGTERM, SIGINT) that still leaves a checkpoint of a whole step."""

from __future__ import annotations

import ctypes
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from zoo.errors import Diverged
from zoo.specs.experiment import ExplosionSpec


def finite_weights(model: nn.Module) -> bool:
    """Whether every parameter is finite (one host synchronization for the whole model)."""
    flags = [p.detach().isfinite().all() for p in model.parameters()]
    return bool(torch.stack(flags).all()) if flags else True


class LossWatch:
    """The divergence rules over logged training losses: a non-finite loss, or a loss that stays
    above `factor` times the loss of the first step, before any update (an explosion)."""

    def __init__(self, rule: ExplosionSpec | None, first_loss: float | None = None, high_logs: int = 0):
        self.rule, self.first_loss, self.high_logs = rule, first_loss, high_logs

    @property
    def threshold(self) -> float | None:
        if self.rule is None or self.first_loss is None:
            return None
        return self.rule.factor * self.first_loss

    @property
    def suspect(self) -> bool:
        """The last log was above the threshold: weights from now on are not a good checkpoint."""
        return self.high_logs > 0

    def first_step(self, loss: float) -> None:
        """The initial loss, the base of the rule (kept in checkpoints, so a resume keeps it)."""
        if self.first_loss is None and math.isfinite(loss):
            self.first_loss = loss

    def observe(self, loss: float, step: int) -> None:
        """One logged (windowed) training loss."""
        if not math.isfinite(loss):
            raise Diverged(f"step {step}: the loss is {loss}")
        self.first_step(loss)
        threshold = self.threshold
        self.high_logs = self.high_logs + 1 if threshold is not None and loss > threshold else 0
        if self.rule is not None and self.high_logs >= self.rule.logs:
            raise Diverged(self._explained(loss, step, f"for {self.rule.logs} logs in a row"))

    def at_end(self, loss: float | None, step: int) -> None:
        """A run may not finish while its loss is above the explosion threshold."""
        if self.suspect and loss is not None:
            raise Diverged(self._explained(loss, step, "at the end of training"))

    def _explained(self, loss: float, step: int, when: str) -> str:
        return (f"step {step}: the training loss {loss:.4g} is above {self.rule.factor:g} x its initial value "
                f"{self.first_loss:.4g} {when} (train.explosion)")


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def signals_to(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """Inside, SIGTERM and SIGINT go to `handler`; the previous handlers come back after. Only
    the main thread can hold signal handlers; elsewhere this does nothing."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler_before in previous.items():
            signal.signal(sig, handler_before)


class StopSignals:
    """A handler for signals_to: the first signal asks training to stop after the current step and
    checkpoint it. A second SIGINT (Ctrl-C pressed again) stops at once; a further SIGTERM does not,
    since it comes from a machine, not a person: a scheduler's preemption sends one to the sweep,
    which passes it on, then kills the sweep, whose death sends the cell another (PDEATHSIG), and
    the cell must still save its last step."""

    def __init__(self):
        self.received: int | None = None

    def handle(self, signum: int, frame: Any = None) -> None:
        if self.received is None:
            self.received = signum
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt

    @property
    def name(self) -> str:
        return signal.Signals(self.received).name if self.received else ""


def die_with_parent() -> None:
    """In a sweep's child (ZOO_PARENT_PID set): ask Linux for SIGTERM when the sweep dies, even by
    SIGKILL, so no training is left behind as an orphan; it then checkpoints and stops."""
    parent = os.environ.get("ZOO_PARENT_PID")
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # the sweep died before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)
