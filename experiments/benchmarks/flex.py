"""Every position scheme at fused-kernel speed? A training step's time for each position scheme
and attention kernel, against `sdpa` without positions in the scores (what the flash kernel runs).

    python experiments/benchmarks/flex.py [--rows 64] [--length 256] [--rounds 10]
    python experiments/benchmarks/flex.py --smoke     # tiny, on the CPU: checks the script

d_model 512, 8 heads, d_ff 2048, 6+6 layers, bf16 autocast, dropout 0 (FlexAttention has no
attention dropout: with it the reference computes), padded batches as the trainer builds them.
`fused` is the zoo's reference kernel, `sdpa` passes biases and padding as a dense float mask and
computes soft-capped scores with the reference, `flex` reads them inside FlexAttention's kernel.
Steps of all contenders are interleaved (common.interleaved). On the CPU FlexAttention has no
backward pass, so `flex` trains with the reference there: only a GPU measures it.
"""

from __future__ import annotations

import argparse

import torch
from common import batch, emit, interleaved, machine, say, train_step

import zoo

KERNELS = ("fused", "sdpa", "flex")
SCHEMES = {**{name: {} for name in zoo.registry("position").names() if name != "none"},
           "sinusoidal+softcap": {"attn_softcap": 50.0}, "rope+window": {"window": 64}}
"""Every registered position scheme, and two score changes beyond them (Gemma 2's cap, Mistral's window)."""


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="a tiny model on the CPU, one round: checks the script")
    args = parser.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    sizes = (dict(d_model=32, n_heads=4, d_ff=64, n_encoder_layers=1, n_decoder_layers=1, vocab_size=100)
             if args.smoke else dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6,
                                     vocab_size=8000))
    rows, length, rounds = (2, 16, 1) if args.smoke else (args.rows, args.length, args.rounds)
    data = tuple(t.to(device) for t in batch(rows, length, sizes["vocab_size"], seed=0))
    autocast = (device.type, torch.bfloat16 if device.type == "cuda" else None)
    steps = {}
    for scheme, extra in {"none": {}, **SCHEMES}.items():
        for kernel in KERNELS if scheme != "none" else ("sdpa",):
            model = zoo.build(f"pre.{scheme.split('+')[0]}.{kernel}.gelu", dropout=0.0, max_len=length, seed=0,
                              **sizes, **extra).to(device)
            steps[f"{scheme} {kernel}"] = train_step(model, data, autocast=autocast)
    say(f"{len(steps)} contenders on {device}, batch {rows} x {length}")
    seconds = interleaved(steps, rounds, warmup=2)
    base = seconds["none sdpa"]
    result = {"benchmark": "flex", "smoke": args.smoke, "machine": machine(), "device": str(device),
              "rows": rows, "length": length, "d_model": sizes["d_model"],
              "ms_per_step": {name: round(s * 1e3, 2) for name, s in seconds.items()},
              "ratio_to_sdpa_without_positions": {name: round(s / base, 3) for name, s in seconds.items()}}
    emit(result)
    return result


if __name__ == "__main__":
    main()
