"""Every optimizer and schedule that no published ledger trains, and every corpus format, trains a
run of the main job's size (experiments/seed_axes.yaml's base: d_model 64, 2+2 layers, 240 steps of
128 pairs) on a parallel corpus of word reversal; the run learns, and it reports every metric a
translation task does (all but perplexity, a next-token task's, and lr_sensitivity, a tuned
sweep's: tests/test_metrics.py). The runs are experiments/benchmarks/registry_runs.py's (whose
README row gives their figures); those the published ledgers train (Adam, AdamW, constant, cosine)
trained their cells at full size, and tests/test_reproduce_published.py holds each ledger's first
steps at HEAD. The lists are walked together, so that as many runs as the longest list cover every
entry, present and future."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import zoo
from zoo.specs.experiment import validate_experiment

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments" / "benchmarks"))
import registry_runs  # the script's module (it imports its neighbour, common.py, by name)

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier

LISTS = registry_runs.lists()
RUNS = max(map(len, LISTS.values()))


def test_the_published_ledgers_train_what_the_runs_leave_out():
    assert registry_runs.published() == {"optimizer": {"adam", "adamw"}, "schedule": {"constant", "cosine"}}
    assert {"muon", "sgd", "adafactor"} <= set(LISTS["optimizer"]) and "wsd" in LISTS["schedule"]
    assert LISTS["format"] == zoo.registry("format").names()
    for kind, names in LISTS.items():
        assert {name for i in range(RUNS) for name in registry_runs.walked(LISTS, i)} >= set(names), kind


@pytest.mark.parametrize("i", range(RUNS), ids=["-".join(registry_runs.walked(LISTS, i)) for i in range(RUNS)])
def test_each_entry_trains_a_run_of_the_main_jobs_size_that_learns(tmp_path, i):
    optimizer, schedule, fmt = registry_runs.walked(LISTS, i)
    run = registry_runs.train_one(tmp_path, optimizer, schedule, fmt, steps=240, train_size=4000)
    record = json.loads((run.run_dir / "result.json").read_text())
    assert record["steps"] == 240 and record["data_summary"]["train_examples"] == 4000
    train = validate_experiment(record["experiment"]).train
    assert (train.optimizer.name, train.schedule.name, record["experiment"]["task"]["format"]) == (optimizer, schedule, fmt)
    reported = zoo.registry("task").get("parallel").metrics()
    assert {"loss", "token_acc", "bleu", "chrf", "ter"} <= set(reported)
    for split in ("eval", "test"):
        assert {f"{split}/{name}" for name in reported} <= run.metrics.keys(), "every metric the task reports"
    first, last = registry_runs.first_loss(run), run.metrics["eval/loss"]
    assert last < 0.7 * first, f"{optimizer} with {schedule}: loss {first:.3f} at the first log, {last:.3f} held out"
    assert run.metrics["test/token_acc"] > 0.2, "five times the 1/24 of a guess"
    assert run.metrics["test/bleu"] > 1 and run.metrics["test/chrf"] > 20 and run.metrics["test/ter"] < 100
