"""torch.compile on batches of varying length, as whole runs of the trainer: eager, torch's default
compile (a static graph, then one dynamic-shape graph once a length changes), and the zoo's
`train.compile` (static graphs of bucketed shapes, zoo.trainer.buckets).

    python experiments/benchmarks/compile.py [--data-dir /path/to/multi30k] [--steps 400]   # prints JSON
    python experiments/benchmarks/compile.py --smoke     # tiny, backend "eager": checks the script

Each contender trains the same experiment from scratch in a process of its own, with inductor's
on-disk cache off, so every compile is paid in full. Reported per contender: the wall seconds of
the run's training steps (the trainer's `train/wall_s` at the last log, the evaluation at the
end excluded), the graphs and the seconds of the steps that compiled them (the trainer's clock),
and the steady tokens/s over the second half of the steps. Compiling pays for itself where a
compiled run's wall seconds are below eager's.

With --data-dir: Multi30k de-en at experiments/multi30k.yaml's model (d_model 256, 3+3 layers),
batches of 128 sentences. Without: `reverse` with lengths 3 to 40 at d_model 128, 2+2 layers,
batches of 32 strings (a length distribution made on the spot).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from common import emit, machine, say

from zoo.children import ended

CONTENDERS = ("eager", "torch default compile", "zoo compile (buckets)")


def experiment(args: argparse.Namespace, out_dir: str) -> dict:
    train = {"steps": args.steps, "batch_size": 128, "eval_every": args.steps, "log_every": max(1, args.steps // 10),
             "checkpoint_every": args.steps, "eval_size": 64, "device": args.device, "out_dir": out_dir,
             "warmup_steps": 0, "schedule": "constant"}
    if args.data_dir:
        model = {"preset": "vaswani2017", "position": "learned", "d_model": 256, "n_heads": 8, "d_ff": 512,
                 "n_encoder_layers": 3, "n_decoder_layers": 3, "dropout": 0.1}
        task = {"name": "parallel", "data_dir": args.data_dir, "valid_split": "val", "test_split": None,
                "vocab_size": 8000}
    else:
        d = 16 if args.smoke else 128
        model = {"preset": "vaswani2017", "d_model": d, "n_heads": 4, "d_ff": 4 * d, "n_encoder_layers": 2,
                 "n_decoder_layers": 2, "dropout": 0.1}
        task = {"name": "reverse", "min_len": 3, "max_len": 12 if args.smoke else 40}  # the smoke run: few buckets
        train["batch_size"] = 32
        train["eval_size"] = 8 if args.smoke else train["eval_size"]
    return {"model": model, "task": task, "train": train, "wandb": {"mode": "disabled", "dir": out_dir}}


def run_contender(name: str, args: argparse.Namespace) -> dict:
    """One whole run in this process; `name` picks how the trainer's step is compiled."""
    import zoo
    import zoo.trainer.compiled as compiled
    import zoo.trainer.loop as loop

    compiled.BACKEND = args.backend
    data = experiment(args, tempfile.mkdtemp(prefix="zoo-compile-"))
    data["train"]["compile"] = name != "eager"
    if name == "torch default compile":  # no buckets, torch.compile's own defaults
        feed = loop.BatchFeed
        loop.compiled = lambda module: torch.compile(module, backend=args.backend)
        loop.BatchFeed = lambda *given: feed(*given[:6])
    history = zoo.train(data).history
    rows = [row for row in history if "train/loss" in row]
    steady = [row["train/tokens_per_s"] for row in rows if row["train/step"] > args.steps / 2]
    return {"wall_s": round(rows[-1]["train/wall_s"], 2), "compile_s": round(rows[-1].get("train/compile_s", 0.0), 2),
            "graphs": int(rows[-1].get("train/compiled_graphs", 0)),
            "steady_tokens_per_s": round(sum(steady) / max(len(steady), 1)), "final_train_loss": rows[-1]["train/loss"]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="a Multi30k folder (train/val .de/.en[.gz]); default: reverse")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--backend", default="inductor", help="torch.compile's backend (the smoke run: eager)")
    parser.add_argument("--smoke", action="store_true", help="a tiny model, 12 steps, backend eager: checks the script")
    parser.add_argument("--contender", choices=CONTENDERS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.backend = 12, "eager"
    if args.contender:
        print(json.dumps(run_contender(args.contender, args)))
        return {}
    given = [arg for arg in (argv if argv is not None else sys.argv[1:]) if arg != "--smoke"]
    env = {**os.environ, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    results = {}
    for name in CONTENDERS:
        say(f"{name} ...")
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *given, *(["--smoke"] if args.smoke else []),
                               "--contender", name], capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{name} failed ({ended(done.returncode)}): {done.stderr.strip().splitlines()[-1:]}")
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
    eager = results["eager"]["wall_s"]
    result = {"benchmark": "compile", "smoke": args.smoke, "machine": machine(), "backend": args.backend,
              "corpus": "multi30k" if args.data_dir else f"reverse, lengths 3-{12 if args.smoke else 40}, made on the spot",
              "steps": args.steps,
              "device": "cuda" if args.device != "cpu" and torch.cuda.is_available() else "cpu", "results": results,
              "wall_ratio_to_eager": {name: round(r["wall_s"] / eager, 3) for name, r in results.items()}}
    emit(result)
    return result


if __name__ == "__main__":
    main()
