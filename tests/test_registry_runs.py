"""Every optimizer and schedule that no published ledger trains, and every corpus format, trains a
run of the main job's size (experiments/seed_axes.yaml's base: d_model 64, 2+2 layers, 240 steps of
128 pairs) on a parallel corpus; the run learns, and it reports every metric a translation task
does (all but perplexity, a next-token task's, and lr_sensitivity, a tuned sweep's:
tests/test_metrics.py). Those the published ledgers train (Adam, AdamW, constant, cosine) trained
their cells at full size (experiments/results/), and tests/test_reproduce_published.py holds each
ledger's first steps at HEAD. The lists are walked together, so that as many runs as the longest
list cover every entry, present and future: run i takes the i-th optimizer, schedule and format,
each list starting again when it runs out."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from corpuskit import WRITERS, opener

import zoo
from zoo.sweep.spec import cell_experiment, expand, read_saved_sweep

MAIN_JOB = Path(__file__).parents[1] / "experiments" / "seed_axes.yaml"
WORDS = [f"w{i}" for i in range(24)]
LR = {"sgd": 0.1, "adafactor": 0.01}
"""The rates these optimizers are used at (SGD with Nesterov's momentum, Adafactor's update
scaled by each weight's size); every other optimizer at the main job's 1e-3."""
SETTINGS = {"sgd": {"momentum": 0.9, "nesterov": True}}


def corpus(folder: Path, fmt: str) -> None:
    """Word-level reversal as a parallel corpus: 3 to 7 words of 24, the target the source reversed."""
    draw = random.Random(0)
    for split, size in (("train", 4000), ("valid", 128), ("test", 128)):
        sources = [[draw.choice(WORDS) for _ in range(draw.randint(3, 7))] for _ in range(size)]
        WRITERS[fmt](folder, split, [(" ".join(s), " ".join(reversed(s))) for s in sources], opener(False))


def published() -> dict[str, set[str]]:
    """The optimizers and schedules the published ledgers' cells train."""
    found: dict[str, set[str]] = {"optimizer": set(), "schedule": set()}
    for ledger in (MAIN_JOB.parent / "results").glob("*/ledger.jsonl"):
        sweep, base = read_saved_sweep(ledger.parent)
        for cell in expand(sweep):
            train = cell_experiment(sweep, base, cell).train
            found["optimizer"].add(train.optimizer.name)
            found["schedule"].add(train.schedule.name)
    return found


PUBLISHED = published()
TRAINED_HERE = {kind: [name for name in zoo.registry(kind).names() if name not in PUBLISHED.get(kind, ())]
                for kind in ("optimizer", "schedule", "format")}
RUNS = max(map(len, TRAINED_HERE.values()))


def entries(kind: str, i: int) -> str:
    names = TRAINED_HERE[kind]
    return names[i % len(names)]


def test_the_published_ledgers_train_what_this_module_leaves_out():
    assert {"optimizer": {"adam", "adamw"}, "schedule": {"constant", "cosine"}} == PUBLISHED
    assert {"muon", "sgd", "adafactor"} <= set(TRAINED_HERE["optimizer"]) and "wsd" in TRAINED_HERE["schedule"]


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
    assert last < 0.7 * first, f"{optimizer} with {schedule}: loss {first:.3f} at the first log, {last:.3f} held out"
    assert run.metrics["test/token_acc"] > 0.2, "five times the 1/24 of a guess"
    assert run.metrics["test/bleu"] > 1 and run.metrics["test/chrf"] > 20 and run.metrics["test/ter"] < 100
