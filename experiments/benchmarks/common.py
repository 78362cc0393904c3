"""What the benchmarks share: padded batches, a training step, interleaved timing, JSON output.

Ratios are taken of medians of runs interleaved in one process (each round runs every contender
once, in turn), because these machines are shared and noisy: a busy neighbour slows all alike.
"""

from __future__ import annotations

import contextlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date

import torch
import torch.nn.functional as F
from torch import nn

PAD, BOS = 0, 1


def batch(rows: int, length: int, vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A padded batch: source, decoder input (bos-shifted) and the target to predict. Half the rows
    end in a quarter of padding, as real batches do."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (rows, length), generator=gen)
    tgt = torch.randint(3, vocab, (rows, length), generator=gen)
    src[1::2, -length // 4 :] = PAD
    tgt[1::2, -length // 4 :] = PAD
    tgt_in = torch.cat([torch.full((rows, 1), BOS), tgt[:, :-1]], dim=1)
    return src, tgt_in, tgt


def train_step(model: nn.Module, data: tuple[torch.Tensor, ...], loss_of=None, optimizer_of=None,
               autocast: tuple[str, torch.dtype | None] | None = None) -> Callable[[], None]:
    """One Adam step on a fixed batch: forward (under `autocast` (device type, dtype) if given),
    token-mean cross-entropy, backward, step."""
    optimizer = (optimizer_of or (lambda params: torch.optim.Adam(params, lr=1e-4)))(model.parameters())
    src, tgt_in, tgt = data
    model.train()
    extra = host_masks(model, src, tgt_in)

    def loss() -> torch.Tensor:
        casting = torch.autocast(*autocast) if autocast and autocast[1] else contextlib.nullcontext()
        with casting:
            logits = model(src, tgt_in, **extra)
        return F.cross_entropy(logits.float().flatten(0, 1), tgt.flatten(), ignore_index=PAD)

    def step() -> None:
        value = loss() if loss_of is None else loss_of(model, data)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()

    return step


def host_masks(model: nn.Module, src: torch.Tensor, tgt_in: torch.Tensor) -> dict[str, tuple]:
    """On CUDA, a zoo model's padding masks built once from the ids on the host, as the trainer's
    feed builds them: given the masks, the model checks no ids on the device, so a step neither
    waits for the GPU nor breaks a compiled graph (measured on an H200: the check's `.item()` was a
    graph break in every compiled step). On the CPU the model builds and checks them itself."""
    if not src.is_cuda or not hasattr(model, "input_masks"):
        return {}
    masks = model.input_masks(model.spec, (src.cpu(), tgt_in.cpu()))
    return {"padding": tuple(None if m is None else m.to(src.device) for m in masks)}


def interleaved(contenders: dict[str, Callable[[], None]], rounds: int, warmup: int = 2) -> dict[str, float]:
    """Median seconds per call of each contender, run in turn within each round."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for round_index in range(warmup + rounds):
        for name, call in contenders.items():
            settle()
            start = time.perf_counter()
            call()
            settle()
            if round_index >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def settle() -> None:
    """Wait for the GPU's queued work, so a contender's time is its own (CUDA runs asynchronously)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def machine() -> dict[str, object]:
    return {"date": date.today().isoformat(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "cpu": platform.processor() or platform.machine(), "python": platform.python_version()}


def say(text: str) -> None:
    """Progress goes to stderr, so stdout is the JSON alone."""
    print(text, file=sys.stderr, flush=True)


def emit(result: dict) -> None:
    print(json.dumps(result, indent=1))
