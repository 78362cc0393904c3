"""Every registered optimizer, schedule and corpus format trains a run of the main job's size
(experiments/seed_axes.yaml's base: d_model 64, 2+2 layers, 240 steps of 128 pairs) on a parallel
corpus, the run learns, and it reports every metric a translation task does (all but perplexity, a
next-token task's, and lr_sensitivity, a tuned sweep's: tests/test_metrics.py). The registries are
walked together, so that as many runs as the longest of them cover every entry, present and future:
run i takes the i-th optimizer, schedule and format, each registry starting again from its first
when it runs out."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from corpuskit import WRITERS, opener

import zoo

MAIN_JOB = Path(__file__).parents[1] / "experiments" / "seed_axes.yaml"
WORDS = [f"w{i}" for i in range(24)]
LR = {"sgd": 0.1, "adafactor": 0.01}
"""The rates these optimizers are used at (SGD with Nesterov's momentum, Adafactor's update
scaled by each weight's size); every other optimizer at the main job's 1e-3."""
SETTINGS = {"sgd": {"momentum": 0.9, "nesterov": True}}


def corpus(folder: Path, fmt: str) -> None:
    """Word-level reversal as a parallel corpus: 4 to 9 words of 24, the target the source reversed."""
    draw = random.Random(0)
    for split, size in (("train", 4000), ("valid", 128), ("test", 128)):
        sources = [[draw.choice(WORDS) for _ in range(draw.randint(4, 9))] for _ in range(size)]
        WRITERS[fmt](folder, split, [(" ".join(s), " ".join(reversed(s))) for s in sources], opener(False))


def entries(kind: str, i: int) -> str:
    names = zoo.registry(kind).names()
    return names[i % len(names)]


RUNS = max(len(zoo.registry(kind).names()) for kind in ("optimizer", "schedule", "format"))


@pytest.mark.parametrize("i", range(RUNS), ids=[f"{entries('optimizer', i)}-{entries('schedule', i)}-"
                                                  f"{entries('format', i)}" for i in range(RUNS)])
def test_each_entry_trains_a_run_of_the_main_jobs_size_that_learns(tmp_path, i):
    optimizer, schedule, fmt = (entries(kind, i) for kind in ("optimizer", "schedule", "format"))
    corpus(tmp_path, fmt)
    experiment = yaml.safe_load(MAIN_JOB.read_text())["base"]
    experiment["task"] = {"name": "parallel", "data_dir": str(tmp_path), "format": fmt, "tokenizer": "word",
                          "min_frequency": 1}
    experiment["train"] |= {
        "optimizer": {"name": optimizer, "lr": LR.get(optimizer, 1e-3), **SETTINGS.get(optimizer, {})},
        "schedule": schedule, "warmup_steps": 24, "eval_every": 240, "eval_size": 128, "checkpoint_every": 240,
        "out_dir": str(tmp_path / "runs")}
    experiment["wandb"] = {"mode": "disabled"}
    run = zoo.train(experiment)

    record = json.loads((run.run_dir / "result.json").read_text())
    assert record["steps"] == 240 and record["data_summary"]["train_examples"] == 4000
    reported = zoo.registry("task").get("parallel").metrics()
    assert {"loss", "token_acc", "bleu", "chrf", "ter"} <= set(reported)
    for split in ("eval", "test"):
        assert {f"{split}/{name}" for name in reported} <= run.metrics.keys(), "every metric the task reports"
    first, last = next(row["train/loss"] for row in run.history if "train/loss" in row), run.metrics["eval/loss"]
    assert last < 0.5 * first, f"{optimizer} with {schedule}: loss {first:.3f} at the first log, {last:.3f} held out"
    assert run.metrics["test/token_acc"] > 0.3, "seven times the 1/24 of a guess"
    assert run.metrics["test/bleu"] > 5 and run.metrics["test/chrf"] > 30 and run.metrics["test/ter"] < 80
