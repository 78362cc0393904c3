"""A tqdm bar on a terminal; plain log lines otherwise (CI logs, files, pipes)."""

from __future__ import annotations

import sys


def _short(metrics: dict[str, float]) -> str:
    keep = ("train/loss", "train/tokens_per_s", "eval/loss", "eval/token_acc", "eval/exact_match", "eval/bleu",
            "train/compiled_graphs", "train/compile_s")
    return " ".join(f"{k.split('/')[1]}={metrics[k]:.4g}" for k in keep if k in metrics)


class ProgressBar:
    def __init__(self, total: int, done: int, enabled: bool = True):
        self.enabled, self.bar = enabled, None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="step", dynamic_ncols=True)
        self.last = done
        self.total = total

    def update(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(step - self.last)
            self.bar.set_postfix_str(_short(metrics))
        else:
            print(f"step {step}/{self.total} {_short(metrics)}", flush=True)
        self.last = step

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
