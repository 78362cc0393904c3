"""Speed of the core model on CPU, measured interleaved in one process and printed as ratios.

    python experiments/benchmarks/core.py [--rounds 30]

1. Training tokens/s of the zoo's `fused` attention against torch.nn.Transformer (the usual
   tutorial wrapper) at d_model 256, 4 heads, 2+2 layers, d_ff 1024, batch 32 x 64 tokens.
2. Training tokens/s of `per_head` against `fused`, same size.
3. Greedy generation of 64 new tokens for a batch of 32: the incremental cache against a full
   recompute of the prefix at every step.

Each round runs every contender once, in turn, so a noisy neighbour slows all of them alike; the
ratio is taken of the medians.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

import zoo

VOCAB, D, HEADS, LAYERS, D_FF, BATCH, LENGTH = 1000, 256, 4, 2, 1024, 32, 64


class TorchSeq2Seq(nn.Module):
    """torch.nn.Transformer with embeddings, sinusoidal positions and a generator, as in the tutorials."""

    def __init__(self):
        super().__init__()
        self.transformer = nn.Transformer(D, HEADS, LAYERS, LAYERS, D_FF, dropout=0.1, batch_first=True)
        self.src_embedding, self.tgt_embedding = nn.Embedding(VOCAB, D), nn.Embedding(VOCAB, D)
        self.generator = nn.Linear(D, VOCAB)
        self.dropout = nn.Dropout(0.1)  # the tutorials' PositionalEncoding drops out, as the zoo's embedder does
        position = torch.arange(LENGTH)[:, None]
        div_term = torch.exp(torch.arange(0, D, 2) * (-math.log(10000.0) / D))
        self.register_buffer("pe", torch.zeros(LENGTH, D))
        self.pe[:, 0::2], self.pe[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)

    def forward(self, src, tgt, pad=0):
        scale = math.sqrt(D)
        s = self.dropout(self.src_embedding(src) * scale + self.pe[: src.size(1)])
        t = self.dropout(self.tgt_embedding(tgt) * scale + self.pe[: tgt.size(1)])
        causal = torch.triu(torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool), diagonal=1)
        out = self.transformer(
            s, t, tgt_mask=causal, src_key_padding_mask=src == pad,
            tgt_key_padding_mask=tgt == pad, memory_key_padding_mask=src == pad,
        )
        return self.generator(out)


def batch(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A padded batch: source, decoder input (bos-shifted) and the target to predict."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(3, VOCAB, (BATCH, LENGTH), generator=gen)
    tgt = torch.randint(3, VOCAB, (BATCH, LENGTH), generator=gen)
    for row in range(BATCH):  # a quarter of each row's tail is padding in half the rows
        if row % 2:
            src[row, -LENGTH // 4 :] = 0
            tgt[row, -LENGTH // 4 :] = 0
    tgt_in = torch.cat([torch.ones(BATCH, 1, dtype=torch.long), tgt[:, :-1]], dim=1)
    return src, tgt_in, tgt


def train_step(model: nn.Module) -> Callable[[], None]:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    src, tgt_in, tgt = batch(0)
    model.train()

    def step() -> None:
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def interleaved(contenders: dict[str, Callable[[], None]], rounds: int, warmup: int = 3) -> dict[str, float]:
    """Median seconds per call of each contender, run in turn within each round."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for round_index in range(warmup + rounds):
        for name, call in contenders.items():
            start = time.perf_counter()
            call()
            if round_index >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def zoo_model(attention: str) -> zoo.EncoderDecoder:
    return zoo.build(
        "torch-transformer", vocab_size=VOCAB, d_model=D, n_heads=HEADS, d_ff=D_FF,
        n_encoder_layers=LAYERS, n_decoder_layers=LAYERS, attention=attention, max_len=256, seed=0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {BATCH} x {LENGTH} tokens")

    tokens = BATCH * LENGTH
    training = interleaved(
        {
            "torch.nn.Transformer": train_step(TorchSeq2Seq()),
            "zoo fused": train_step(zoo_model("fused")),
            "zoo per_head": train_step(zoo_model("per_head")),
        },
        args.rounds,
    )
    for name, seconds in training.items():
        print(f"train  {name:22s} {tokens / seconds:10.0f} tokens/s  ({seconds * 1e3:.1f} ms/step)")
    ratio = training["torch.nn.Transformer"] / training["zoo fused"]
    print(f"ratio  fused / torch.nn.Transformer   {ratio:.2f}x  (target >= 1.0)")
    print(f"ratio  per_head / fused               {training['zoo fused'] / training['zoo per_head']:.2f}x")

    model = zoo_model("fused").eval()
    with torch.no_grad():
        model.generator.bias[model.spec.eos_id] = -1e4  # no row stops early: every call decodes 64 steps
    src = batch(1)[0]
    generation = interleaved(
        {
            "cache": lambda: model.generate(src, max_new_tokens=64),
            "full recompute": lambda: model.generate(src, max_new_tokens=64, use_cache=False),
        },
        max(3, args.rounds // 6),
        warmup=1,
    )
    assert torch.equal(model.generate(src, 64), model.generate(src, 64, use_cache=False))
    for name, seconds in generation.items():
        print(f"decode {name:22s} {BATCH * 64 / seconds:10.0f} tokens/s  ({seconds:.2f} s for 64 steps)")
    print(f"ratio  cache / full recompute         {generation['full recompute'] / generation['cache']:.2f}x  (target >= 3)")


if __name__ == "__main__":
    main()
