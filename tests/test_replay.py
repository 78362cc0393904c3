"""A replay (zoo.sweep.replay) trains a cell's first steps without its corpus: for every task, the
losses from a replay are the recorded run's to the last bit, the file holds ids but no text, and a
replay of another task or seed, a step outside it or a file of another kind is refused by name."""

import gzip
from pathlib import Path

import pytest
import torch

import zoo
from trainkit import MULTI30K, task_fields, tiny_experiment
from zoo.specs.experiment import validate_experiment
from zoo.specs.registries import kinds
from zoo.sweep.record_replay import record
from zoo.sweep.replay import read_replay, replayed_task
from zoo.sweep.reproduce import reproduce
from zoo.tasks.corpus import read_lines
from zoo.trainer.loop import Trainer

RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "results"
TASKS = zoo.registry("task").names()
STEPS = 4


def experiment_of(tmp_path, name: str) -> dict:
    """The tiny experiment on task `name`, with the first kind that trains it."""
    cls = zoo.registry("task").get(name)
    kind = next(k for k, model in kinds().items() if model.trains_on == cls.shape and (cls.kinds is None or k in cls.kinds))
    fields = task_fields(name, **({"shared_vocab": True} if "shared_vocab" in cls.Params.model_fields else {}))
    return tiny_experiment(tmp_path / "runs", task=fields, model={"kind": kind, "dropout": 0.1},
                           train={"steps": 20, "log_every": 2, "eval_every": 10, "checkpoint_every": 10})


def losses(history: list[dict[str, float]]) -> list[dict[str, float]]:
    return [{key: value for key, value in row.items() if not key.endswith(("wall_s", "per_s"))} for row in history]


@pytest.mark.parametrize("name", TASKS)
def test_a_replay_trains_the_recorded_losses_bit_for_bit(tmp_path, name):
    experiment = experiment_of(tmp_path, name)
    recorded = record(experiment, STEPS, tmp_path / "replay.pt.gz")
    spec = validate_experiment(experiment)
    task = replayed_task(tmp_path / "replay.pt.gz", spec.task, spec.train.seed)
    replayed = Trainer(spec, task=task).first_steps(STEPS)
    assert len(recorded) == STEPS // 2 and losses(replayed) == losses(recorded)


def test_a_replay_holds_ids_but_no_text_of_the_corpus(tmp_path):
    experiment = experiment_of(tmp_path, "parallel")
    record(experiment, STEPS, tmp_path / "replay.pt.gz")
    replay, inflated = read_replay(tmp_path / "replay.pt.gz"), gzip.decompress((tmp_path / "replay.pt.gz").read_bytes())
    src, tgt = replay["batches"][f"{STEPS}:32"]
    assert src.dtype == tgt.dtype == torch.int32 and src.size(0) == 32 and int(src.max()) < replay["src_size"]
    lines = [line.split() for line in read_lines(MULTI30K / "train.en.gz")[:200]]
    pairs = {" ".join(words[i : i + 2]) for words in lines for i in range(len(words) - 1)}  # no two words of it
    assert len(pairs) > 1000 and not any(pair.encode() in inflated for pair in pairs)


def test_a_replay_of_another_task_or_seed_is_refused(tmp_path):
    experiment = experiment_of(tmp_path, "lm")
    record(experiment, STEPS, tmp_path / "replay.pt.gz")
    spec = validate_experiment(experiment)
    moved = {**spec.task, "data_dir": "/elsewhere"}  # where the data is is not what it is
    assert replayed_task(tmp_path / "replay.pt.gz", moved, spec.train.seed).train_batch(1, 32)[0].dtype == torch.long
    with pytest.raises(zoo.ConfigError, match=r"with seed 0, not of this cell's task .* with seed 1"):
        replayed_task(tmp_path / "replay.pt.gz", spec.task, 1)
    with pytest.raises(zoo.ConfigError, match="'vocab_size': 999"):
        replayed_task(tmp_path / "replay.pt.gz", {**spec.task, "vocab_size": 999}, spec.train.seed)
    task = replayed_task(tmp_path / "replay.pt.gz", spec.task, spec.train.seed)
    with pytest.raises(zoo.ConfigError, match="no batch of 32 rows for step 9: it holds the early window"):
        task.train_batch(9, 32)


def test_a_window_that_evaluates_cannot_be_recorded(tmp_path):
    with pytest.raises(zoo.ConfigError, match=r"train\.eval_every 10: the window to step 10 evaluates"):
        record(experiment_of(tmp_path, "lm"), 10, tmp_path / "replay.pt.gz")
    assert not (tmp_path / "replay.pt.gz").exists()


@pytest.mark.parametrize("content", [b"not gzip", gzip.compress(b"not a torch file", mtime=0), b""],
                         ids=["not-gzip", "gzip-of-other-bytes", "empty"])
def test_a_file_that_is_not_a_replay_is_one_error_naming_it(tmp_path, content):
    (tmp_path / "bad.pt.gz").write_bytes(content)
    with pytest.raises(zoo.ConfigError, match=r"bad\.pt\.gz: not a replay"):
        read_replay(tmp_path / "bad.pt.gz")


def test_a_missing_replay_or_one_without_its_early_window_is_refused(tmp_path):
    with pytest.raises(zoo.ConfigError, match="no replay file there"):
        read_replay(tmp_path / "missing.pt.gz")
    ledger = RESULTS / "lm-multi30k" / "ledger.jsonl"
    with pytest.raises(zoo.ConfigError, match="a replay holds one cell's early window; give --early and that cell"):
        reproduce(ledger, [], replay=ledger.with_name("replay.pt.gz"), early=True)
