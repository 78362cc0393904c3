"""Training speed on one GPU at the base size: bf16 autocast, torch.compile, and model FLOPs utilization.

    python experiments/benchmarks/gpu.py [--steps 20] [--peak-tflops N] [--no-compile]   # prints JSON

d_model 512, 8 heads, d_ff 2048, 6+6 layers, 256-token sources and targets, dropout 0.1, the
largest batch (a power of two) that every contender fits, for the zoo's `fused`, `per_head` and
`sdpa` (preset `torch-transformer`) and torch.nn.Transformer with the same embeddings.

Model FLOPs per step: 6 x (encoder parameters x source tokens + decoder and generator parameters x
target tokens), embeddings excluded, plus attention's score and weighted-sum products, 12 x L^2 x
d_model per layer and sequence for training (encoder self, decoder self counted in full as PaLM's
appendix does, cross). MFU is that over the step time, against the dense bf16 peak of the GPU
(named in the output: 989 TFLOPs for an H100 SXM or H200; --peak-tflops for others).
Targets: MFU >= 40% on an H100, and >= 1.2x torch.nn.Transformer's tokens/s.

Without CUDA the script says so and exits 0; `--smoke` runs the same code at a tiny size on CPU,
to check the script, and measures nothing.
"""

from __future__ import annotations

import argparse
import time

import torch
from common import batch, emit, machine, say, train_step
from core import TorchSeq2Seq
from torch import nn

import zoo

PEAKS = {"H100 80GB HBM3": 989.0, "H100 SXM": 989.0, "H200": 989.0, "H100 PCIe": 756.0, "H100 NVL": 835.0,
         "A100": 312.0, "L40S": 362.0}
"""Dense bf16 tensor-core peaks in TFLOPs, by a part of the device's name."""


def peak_tflops(name: str, given: float | None) -> tuple[float | None, str]:
    if given is not None:
        return given, f"{given} TFLOPs (--peak-tflops)"
    for part, peak in PEAKS.items():
        if part in name:
            return peak, f"{peak} TFLOPs (dense bf16 of {part})"
    return None, f"unknown for {name}: pass --peak-tflops"


def model_flops(model: nn.Module, rows: int, src_len: int, tgt_len: int, d: int, layers: int) -> float:
    """Training FLOPs of one step (forward and backward) by the formula in the module docstring."""
    def count(prefixes: tuple[str, ...]) -> int:
        return sum(p.numel() for n, p in model.named_parameters() if n.startswith(prefixes) and "embed" not in n)

    encoder = count(("encoder", "transformer.encoder"))
    decoder = count(("decoder", "generator", "transformer.decoder"))
    dense = 6 * rows * (encoder * src_len + decoder * tgt_len)
    attention = 12 * rows * d * layers * (src_len**2 + tgt_len**2 + tgt_len * src_len)
    return float(dense + attention)


def contenders(d: int, heads: int, layers: int, vocab: int, length: int) -> dict[str, nn.Module]:
    def zoo_model(attention: str) -> nn.Module:
        return zoo.build("torch-transformer", vocab_size=vocab, d_model=d, n_heads=heads, d_ff=4 * d, dropout=0.1,
                         n_encoder_layers=layers, n_decoder_layers=layers, attention=attention, max_len=length, seed=0)

    torch_model = TorchSeq2Seq(d, heads, 4 * d, layers=layers, length=length, vocab=vocab)
    return {"zoo fused": zoo_model("fused"), "zoo per_head": zoo_model("per_head"), "zoo sdpa": zoo_model("sdpa"),
            "torch.nn.Transformer": torch_model}


def timed_steps(model: nn.Module, rows: int, length: int, vocab: int, device: torch.device, steps: int,
                compile_: bool, dtype: torch.dtype | None) -> tuple[float, float]:
    """(seconds per step, peak GiB) after warm-up steps (compilation included there)."""
    data = tuple(t.to(device) for t in batch(rows, length, vocab, seed=0))
    model = model.to(device)
    forward = torch.compile(model) if compile_ else model
    step = train_step(forward, data, optimizer_of=lambda params: torch.optim.Adam(params, lr=1e-4, fused=device.type == "cuda"),
                      autocast=(device.type, dtype))
    for _ in range(3):
        step()
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize(device)
    seconds = (time.perf_counter() - start) / steps
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0
    return seconds, peak


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def largest_batch(make, length, vocab, device, compile_, dtype, start: int, limit: int) -> int:
    """The largest power-of-two batch every contender trains without running out of memory."""
    rows, fits = start, 0
    while rows <= limit:
        try:
            for model in make().values():
                timed_steps(model, rows, length, vocab, device, 1, compile_=False, dtype=dtype)
                del model
        except torch.cuda.OutOfMemoryError:
            break
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
        fits, rows = rows, rows * 2
    if not fits:
        raise SystemExit(f"not even {start} rows of {length} tokens fit")
    return fits


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak, if its name is not known here")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a tiny size on CPU: checks the script, measures nothing")
    args = parser.parse_args(argv)
    if not args.smoke and not torch.cuda.is_available():
        result = {"benchmark": "gpu", "ran": False, "reason": "no CUDA device here", "machine": machine()}
        say("no CUDA device: nothing measured")
        emit(result)
        return result
    if args.smoke:
        device, d, heads, layers, length, vocab, steps, compile_ = torch.device("cpu"), 32, 4, 1, 16, 50, 1, False
    else:
        device, d, heads, layers, length, vocab, steps = torch.device("cuda"), 512, 8, 6, 256, 8000, args.steps
        compile_ = not args.no_compile
        torch.backends.cuda.matmul.allow_tf32 = True
    dtype = torch.bfloat16
    make = lambda: contenders(d, heads, layers, vocab, length)
    rows = 2 if args.smoke else largest_batch(make, length, vocab, device, compile_, dtype, start=16, limit=1024)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak, peak_text = peak_tflops(name, args.peak_tflops) if device.type == "cuda" else (None, "cpu: none")
    results = {}
    for label, model in make().items():
        flops = model_flops(model, rows, length, length, d, layers)
        seconds, memory = timed_steps(model, rows, length, vocab, device, steps, compile_, dtype)
        tokens = 2 * rows * length / seconds
        mfu = flops / seconds / (peak * 1e12) if peak else None
        results[label] = {"tokens_per_s": round(tokens), "ms_per_step": round(seconds * 1e3, 2),
                          "mfu": None if mfu is None else round(mfu, 4), "peak_memory_gib": round(memory, 2)}
        say(f"{label}: {tokens:.0f} tokens/s, MFU {mfu if mfu is None else f'{mfu:.1%}'}, {memory:.1f} GiB")
        del model
    best = max((k for k in results if k.startswith("zoo")), key=lambda k: results[k]["tokens_per_s"])
    ratio = results[best]["tokens_per_s"] / results["torch.nn.Transformer"]["tokens_per_s"]
    result = {"benchmark": "gpu", "ran": not args.smoke, "smoke": args.smoke, "machine": machine(), "device": name,
              "peak": peak_text, "batch": f"{rows} x {length} source and target tokens", "precision": "bf16 autocast",
              "compile": compile_, "results": results, "zoo_best": best, "ratio_zoo_to_torch": round(ratio, 3),
              "targets": {"mfu": 0.40, "ratio_zoo_to_torch": 1.2},
              "met": None if args.smoke else {"mfu": (results[best]["mfu"] or 0) >= 0.40,
                                              "ratio_zoo_to_torch": ratio >= 1.2}}
    emit(result)
    return result


if __name__ == "__main__":
    main()
