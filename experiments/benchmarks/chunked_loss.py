"""The training loss a chunk of positions at a time (`train.loss_chunk`) against the whole logits at
once: the memory autograd keeps for the backward pass, and the time of a training step.

    python experiments/benchmarks/chunked_loss.py [--rows 8] [--length 128] [--chunk 1024] [--rounds 5]
    python experiments/benchmarks/chunked_loss.py --smoke     # tiny: checks the script

The model is the base size (d_model 512, 8 heads, d_ff 2048, 6+6 layers) with a 32,000-token
vocabulary, on the GPU where there is one. Kept bytes are counted with autograd's saved-tensor
hooks over one forward and loss (the same on any device); on CUDA the peak of allocated memory over
a whole step is reported too. Step times are medians of interleaved rounds. The chunked loss
computes each chunk's logits twice (forward, and again in the backward pass), so it trades a
little time for the memory of the full logits.
"""

from __future__ import annotations

import argparse

import torch
from common import batch, emit, interleaved, machine, say

import zoo
from zoo.trainer.objective import chunked_loss_sum, training_loss_sum


def loss_of(model, data, chunk: int | None) -> torch.Tensor:
    src, tgt_in, tgt = data
    masks = type(model).input_masks(model.spec, (src.cpu(), tgt_in.cpu()))
    masks = tuple(None if m is None else m.to(src.device) for m in masks)
    casting = torch.autocast("cuda", torch.bfloat16) if src.is_cuda else torch.autocast("cpu", enabled=False)
    with casting:
        if chunk is None:
            return training_loss_sum(model(src, tgt_in, masks), tgt, 0)
        return chunked_loss_sum(model(src, tgt_in, masks, head=False), model.generator, tgt, 0, chunk)


def kept_bytes(model, data, chunk: int | None) -> int:
    kept = []

    def pack(tensor):
        kept.append(tensor.numel() * tensor.element_size())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss_of(model, data, chunk)
    return sum(kept)


def peak_bytes(step) -> int | None:
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--chunk", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one round: checks the script")
    args = parser.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    sizes = (dict(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1, vocab_size=500)
             if args.smoke else dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6,
                                     vocab_size=32000))
    rows, length, chunk, rounds = (2, 16, 8, 1) if args.smoke else (args.rows, args.length, args.chunk, args.rounds)
    model = zoo.build("pre-ln", max_len=max(length, 64), dropout=0.0, seed=0, **sizes).to(device).train()
    data = tuple(t.to(device) for t in batch(rows, length, sizes["vocab_size"], seed=0))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step_with(chunk_size):
        def step() -> None:
            loss = loss_of(model, data, chunk_size) / rows
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return step

    contenders = {"whole logits": step_with(None), f"chunks of {chunk}": step_with(chunk)}
    kept = {"whole logits": kept_bytes(model, data, None), f"chunks of {chunk}": kept_bytes(model, data, chunk)}
    peaks = {name: peak_bytes(step) for name, step in contenders.items()}
    say(f"kept for backward: {kept}")
    seconds = interleaved(contenders, rounds, warmup=1)
    names = list(contenders)
    result = {"benchmark": "chunked_loss", "smoke": args.smoke, "machine": machine(), "device": str(device),
              "rows": rows, "length": length, "vocab": sizes["vocab_size"], "d_model": sizes["d_model"],
              "logits_mib": round(rows * length * sizes["vocab_size"] * 4 / 2**20, 1),
              "kept_mib": {name: round(b / 2**20, 1) for name, b in kept.items()},
              "peak_mib": {name: None if p is None else round(p / 2**20, 1) for name, p in peaks.items()},
              "ms_per_step": {name: round(s * 1e3, 1) for name, s in seconds.items()},
              "kept_ratio_chunked_to_whole": round(kept[names[1]] / kept[names[0]], 3),
              "time_ratio_chunked_to_whole": round(seconds[names[1]] / seconds[names[0]], 3)}
    emit(result)
    return result


if __name__ == "__main__":
    main()
