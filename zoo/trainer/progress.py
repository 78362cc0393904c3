"""A tqdm bar on a terminal; plain log lines otherwise (CI logs, files, pipes), each with the rate
so far and an estimate of the time left, so a loaded machine's twenty minutes show as such."""

from __future__ import annotations

import sys
import time

from zoo.metric_names import MetricName


def _short(metrics: dict[str, float]) -> str:
    keep = ("train/loss", "train/tokens_per_s", "eval/loss", "eval/token_acc", "eval/exact_match", "eval/bleu",
            "train/compiled_graphs", "train/compile_s")
    return " ".join(f"{MetricName.parse(k).metric}={metrics[k]:.4g}" for k in keep if k in metrics)


def duration(seconds: float) -> str:
    """`1 h 05 min`, `3 min 20 s`, `45 s`."""
    seconds = max(0, round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


class ProgressBar:
    def __init__(self, total: int, done: int, enabled: bool = True, clock=time.perf_counter):
        self.enabled, self.bar, self.clock = enabled, None, clock
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="step", dynamic_ncols=True)  # shows rate and time left
        self.last = self.first = done
        self.total = total
        self.started = clock()

    def pace(self, step: int) -> str:
        """`2.10 steps/s, 1 min 35 s left`: the rate since this process started (a resume counts
        from its own first step) and the steps left at that rate."""
        elapsed = self.clock() - self.started
        if step <= self.first or elapsed <= 0:
            return ""
        rate = (step - self.first) / elapsed
        return f"| {rate:.3g} steps/s, {duration((self.total - step) / rate)} left"

    def update(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(step - self.last)
            self.bar.set_postfix_str(_short(metrics))
        else:
            print(" ".join(filter(None, [f"step {step}/{self.total}", _short(metrics), self.pace(step)])), flush=True)
        self.last = step

    def write(self, line: str) -> None:
        """A line of its own (above the bar on a terminal)."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(line)
        else:
            print(line, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
