"""Memory per rank against world size under train.parallel fsdp, step time against DDP, and what
activation checkpointing saves, on CPU processes with gloo.

    python experiments/benchmarks/fsdp.py [--worlds 1 2 4] [--checkpointing none blocks every_k] [--steps 4] [--smoke]

Each contender is a torchrun of this script: every rank builds the same model (decoder-only,
d_model 512, 6 layers, a 16,000-token vocabulary: 35M parameters), trains `steps` steps of the
trainer's own step (zoo.trainer.step.TrainStep, AdamW) on its share of a 16-row global batch of
64 tokens, and reports its peak resident memory above what it held after its imports (the OS's
ru_maxrss), the peak of the bytes its live allocations held (heap.py: what the OS's figure
holds beside them is what malloc kept of freed tensors), the median step time, and the zoo's
estimate of the rank's training memory (zoo.model.memory, as a run prints it at its start). Both
peaks also count the whole model each rank builds before fully_shard keeps its share (4 bytes a
parameter), which the training estimate leaves out: it is printed too. Activation checkpointing
runs in one process (train.parallel ddp, which one process trains plainly), each choice of
--checkpointing on the same batch. Targets: memory per rank falls as the world grows; the
estimate within 25% of the peak bytes in use.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from heap import ONE_ARENA, HeapPeak

SIZES = {"full": {"d_model": 512, "n_heads": 8, "d_ff": 2048, "n_decoder_layers": 6, "vocab_size": 16000},
         "smoke": {"d_model": 32, "n_heads": 2, "d_ff": 64, "n_decoder_layers": 2, "vocab_size": 50}}
ROWS, LENGTH = 16, 64


def rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def current_rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rank_main(size: str, parallel: str, checkpointing: str, steps: int, out: str) -> None:
    """One rank: build, shard or wrap, train, report."""
    before = current_rss()
    import zoo
    from zoo.model.kinds import model_class
    from zoo.model.memory import training_memory
    from zoo.model.size_checks import exact_parameters
    from zoo.specs.experiment import TrainSpec
    from zoo.trainer.feed import Batch
    from zoo.trainer.parallelism import Parallelism
    from zoo.trainer.step import TrainStep

    train = TrainSpec(parallel=parallel, device="cpu", batch_size=ROWS, optimizer={"name": "adamw", "lr": 1e-4},
                      activation_checkpointing=checkpointing)
    device = torch.device("cpu")
    dist = Parallelism.from_env(device, train)
    baseline = current_rss() - before
    spec = zoo.spec("decoder.pre.rope.fused.gelu", dropout=0.0, max_len=LENGTH + 1, **SIZES[size])
    kind = model_class(spec)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(4, spec.src_vocab_size, (ROWS, LENGTH), generator=gen)
    inputs, labels = kind.frame(spec, ids, ids)
    tokens = int((labels != spec.pad_id).sum())
    inputs, labels = tuple(dist.shard(t) for t in inputs), dist.shard(labels)
    batch = Batch(inputs, kind.input_masks(spec, inputs), labels, tokens)
    start_rss = current_rss()
    with HeapPeak() as heap:
        model = zoo.build(spec, seed=0)
        step = TrainStep(model, train, device, dist, None)
        times = []
        for index in range(1, steps + 2):  # the first step allocates the optimizer's state: not timed
            began = time.perf_counter()
            step(index, [batch])
            step.window.settle()
            times.append(time.perf_counter() - began)
    peak = rss_bytes() - start_rss
    params = exact_parameters(spec)
    estimate = training_memory(spec, params, labels.size(0), 0, labels.size(1), dist.world, parallel == "fsdp", checkpointing)
    report = {"rank": dist.rank, "world": dist.world, "parallel": parallel, "checkpointing": checkpointing,
              "parameters": params,
              "peak_rss_above_start": peak, "peak_in_use_above_start": heap.above_start,
              "imports_and_group": baseline, "step_s": statistics.median(times[1:]),
              "estimate": estimate.total, "estimate_text": estimate.text(), "build": params * 4}
    Path(out).with_suffix(f".{dist.rank}.json").write_text(json.dumps(report))
    dist.close()


def launch(size: str, parallel: str, world: int, checkpointing: str, steps: int, folder: Path) -> list[dict]:
    out = folder / f"{parallel}-{world}-{checkpointing}"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}",
               __file__, "--rank", "--size", size, "--parallel", parallel, "--checkpointing", checkpointing,
               "--steps", str(steps), "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // world)), **ONE_ARENA}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"{parallel} at world size {world} failed:\n{done.stderr[-3000:]}")
    return [json.loads(out.with_suffix(f".{rank}.json").read_text()) for rank in range(world)]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="*", default=[1, 2, 4], help="world sizes of fsdp (and ddp above 1)")
    parser.add_argument("--checkpointing", nargs="*", default=["none", "blocks", "every_k"],
                        help="activation checkpointing choices, each in one process")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one step: checks the script only")
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--size", default="full", help=argparse.SUPPRESS)
    parser.add_argument("--parallel", default="fsdp", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank:
        rank_main(args.size, args.parallel, args.checkpointing[0], args.steps, args.out)
        return {}
    size, steps = ("smoke", 1) if args.smoke else ("full", args.steps)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        contenders = [("fsdp", world, "none") for world in args.worlds]
        contenders += [("ddp", world, "none") for world in args.worlds if world > 1]
        contenders += [("ddp", 1, choice) for choice in args.checkpointing]
        for parallel, world, checkpointing in contenders:
            print(f"{parallel} x{world}, checkpointing {checkpointing} ...", file=sys.stderr, flush=True)
            ranks = launch(size, parallel, world, checkpointing, steps, Path(folder))
            worst = max(ranks, key=lambda r: r["peak_rss_above_start"])
            heaviest = max(ranks, key=lambda r: r["peak_in_use_above_start"] or 0)
            in_use = heaviest["peak_in_use_above_start"]
            rows.append({"parallel": parallel, "world": world, "checkpointing": checkpointing,
                         "peak_rss_mib": round(worst["peak_rss_above_start"] / 2**20),
                         "peak_in_use_mib": None if in_use is None else round(in_use / 2**20),
                         "ratio_in_use_to_estimate": None if in_use is None else round(in_use / heaviest["estimate"], 2),
                         "estimate_mib": round(worst["estimate"] / 2**20), "build_mib": round(worst["build"] / 2**20),
                         "ratio_measured_to_estimate": round(worst["peak_rss_above_start"] / worst["estimate"], 2),
                         "step_s": round(max(r["step_s"] for r in ranks), 3), "estimate": worst["estimate_text"]})
    fsdp = {row["world"]: row for row in rows if row["parallel"] == "fsdp"}
    ddp = {row["world"]: row for row in rows if row["parallel"] == "ddp" and row["world"] > 1}
    alone = {row["checkpointing"]: row for row in rows if row["parallel"] == "ddp" and row["world"] == 1}
    result = {"machine": {"torch": torch.__version__, "cpus": os.cpu_count()}, "parameters": ranks[0]["parameters"],
              "rows": rows,
              "memory_falls_with_world": all(fsdp[a]["peak_rss_mib"] > fsdp[b]["peak_rss_mib"]
                                             for a, b in zip(sorted(fsdp), sorted(fsdp)[1:])),
              "estimate_within_25pct_of_in_use": {f"{row['parallel']} x{row['world']}":
                                                  abs(row["ratio_in_use_to_estimate"] - 1) <= 0.25 for row in rows
                                                  if row["ratio_in_use_to_estimate"] is not None
                                                  and row["checkpointing"] == "none"},
              "step_ratio_fsdp_to_ddp": {w: round(fsdp[w]["step_s"] / ddp[w]["step_s"], 2) for w in ddp if w in fsdp},
              "checkpointing_memory_ratio_to_none": {c: round(alone[c]["peak_rss_mib"] / alone["none"]["peak_rss_mib"], 2)
                                                     for c in alone if "none" in alone},
              "checkpointing_in_use_ratio_to_none": {c: round(alone[c]["peak_in_use_mib"] / alone["none"]["peak_in_use_mib"], 2)
                                                     for c in alone if "none" in alone and alone[c]["peak_in_use_mib"]},
              "checkpointing_step_ratio_to_none": {c: round(alone[c]["step_s"] / alone["none"]["step_s"], 2)
                                                   for c in alone if "none" in alone}}
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
