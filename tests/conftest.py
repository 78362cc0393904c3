"""Shared fixtures. Every per-variant test parametrizes over COMBOS, the product of all registries,
so a newly registered part is covered without a new test."""

import itertools
import os

import pytest
import torch

import zoo
from zoo.generate import never_emitted

if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # each worker its share of the cores, not all of them
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

COMBOS = [zoo.spec("post.sinusoidal.fused.relu", vocab_size=19, **dict(zip(zoo.AXES, combo))).name
          for combo in itertools.product(*(zoo.registry(axis).names() for axis in zoo.AXES))]

TINY = dict(
    vocab_size=19, d_model=16, n_heads=4, n_kv_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=2, dropout=0.0,
    max_len=40,
)
"""A model small enough that the whole grid of variants runs in seconds."""


@pytest.fixture(params=COMBOS)
def variant(request) -> str:
    return request.param


def tiny(name: str, **overrides) -> zoo.ModelSpec:
    return zoo.spec(name, **{**TINY, **overrides})


def padded_batch(lengths, vocab_size: int, seed: int = 0, spec: zoo.ModelSpec | None = None) -> torch.Tensor:
    """Rows of random ordinary tokens, each ending in eos and right-padded to the longest row."""
    pad, eos = (spec.pad_id, spec.eos_id) if spec is not None else (0, 2)
    gen = torch.Generator().manual_seed(seed)
    batch = torch.full((len(lengths), max(lengths)), pad, dtype=torch.long)
    for row, length in enumerate(lengths):
        batch[row, : length - 1] = torch.randint(3, vocab_size, (length - 1,), generator=gen)
        batch[row, length - 1] = eos
    return batch


def reference_greedy(model: zoo.EncoderDecoder, src: torch.Tensor, steps: int) -> torch.Tensor:
    """Greedy decoding the slow, obvious way: re-run the whole model on the prefix every step."""
    spec = model.spec
    tokens = torch.full((src.size(0), 1), spec.bos_id)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(steps):
        logits = model(src, tokens)[:, -1]
        logits[:, never_emitted(spec)] = float("-inf")
        nxt = torch.where(done, spec.pad_id, logits.argmax(-1))
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        done |= nxt == spec.eos_id
        if done.all():
            break
    return tokens


@pytest.fixture(autouse=True)
def _wandb_mode_from_the_spec(monkeypatch):
    """WANDB_MODE in the environment wins over a spec; tests decide their mode themselves."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
