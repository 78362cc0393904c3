"""What mechanism statistics cost (train.probes): one held-out batch's forward under the probe
against the evaluation it joins and against the training steps between two evaluations, at the
main job's size, interleaved in one process (ratios of medians).

    python experiments/benchmarks/probes.py [--rounds 5]     # prints JSON
    python experiments/benchmarks/probes.py --smoke          # a tiny model, one round: checks the script
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from statistics import median

import yaml
from common import emit, machine, say

from zoo.specs.experiment import validate_experiment
from zoo.trainer.evaluate import evaluate
from zoo.trainer.loop import Trainer

MAIN_JOB = Path(__file__).resolve().parents[1] / "seed_axes.yaml"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one round: checks the script")
    args = parser.parse_args(argv)
    experiment = yaml.safe_load(MAIN_JOB.read_text(encoding="utf-8"))["base"]
    experiment["model"]["attention"] = "fused"
    rounds = 1 if args.smoke else args.rounds
    if args.smoke:
        experiment["model"].update(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
        experiment["train"].update(batch_size=8, eval_size=8, eval_every=2)
    with tempfile.TemporaryDirectory() as scratch:
        experiment["train"] = {**experiment["train"], "probes": True, "out_dir": scratch}
        experiment["wandb"] = {"mode": "disabled", "dir": scratch}
        trainer = Trainer(validate_experiment(experiment))
        try:
            evaluator, t = trainer.evaluator, trainer.experiment.train
            times: dict[str, list[float]] = {"probes": [], "evaluation": [], "steps between evaluations": []}
            for index in range(rounds):
                say(f"round {index + 1} of {rounds} ...")
                start = time.perf_counter()
                evaluator.mechanism(trainer.model)
                times["probes"].append(time.perf_counter() - start)
                start = time.perf_counter()
                evaluate(trainer.model, evaluator.task, evaluator.batches, evaluator.device, evaluator.references,
                         **evaluator.decoding)
                times["evaluation"].append(time.perf_counter() - start)
                start = time.perf_counter()
                for step in range(index * t.eval_every + 1, (index + 1) * t.eval_every + 1):
                    trainer._train_step(step)
                times["steps between evaluations"].append(time.perf_counter() - start)
        finally:
            trainer.tracker.finish(failed=False)
            trainer.folder.release()
    seconds = {name: median(values) for name, values in times.items()}
    result = {"benchmark": "probes", "smoke": args.smoke, "machine": machine(), "rounds": rounds,
              "eval_every": t.eval_every, "ms": {name: round(1000 * s, 2) for name, s in seconds.items()},
              "ratio_probes_to_evaluation": round(seconds["probes"] / seconds["evaluation"], 4),
              "ratio_probes_to_training": round(seconds["probes"] / seconds["steps between evaluations"], 4)}
    emit(result)
    return result


if __name__ == "__main__":
    main()
