"""Cells trained again in children kept warm (zoo.sweep.warm_retrain): the same record to the bit
as a child of its own, whatever the child trained before; one child per environment; a refusal
leaves the child to the next cell, a bug or a signal does not, and each is said as a fresh
child's would be."""

import os
import signal
import threading
import time

import pytest

from trainkit import tiny_experiment
from zoo.errors import ZooError
from zoo.sweep.record_differences import timing
from zoo.sweep.retrain import ENTRY, retrain, retrain_command
from zoo.sweep.warm_retrain import kept, warm_children

pytestmark = pytest.mark.slow  # starts processes: not in the fast tier


def numbers(record) -> tuple:
    """What a run computed: its logged history (timings aside), first loss, final metrics and steps."""
    history = [{key: value for key, value in row.items() if not timing(key)} for row in record.history]
    return history, record.first_loss, record.metrics, record.steps


def children() -> dict:
    return {key: child.pid for key, child in kept().children.items()}


def test_a_warm_child_trains_each_cell_to_the_bit_of_a_child_of_its_own(tmp_path):
    first = tiny_experiment(tmp_path, train={"steps": 20, "log_every": 5, "eval_every": 10})
    other = tiny_experiment(tmp_path, model={"norm": "pre"}, train={"steps": 20, "log_every": 5, "eval_every": 10})
    alone = [retrain(first, 1, tmp_path / "cold", until=20), retrain(first, 1, tmp_path / "cold")]
    with warm_children():
        after_another = [retrain(other, 1, tmp_path / "warm", until=20), retrain(first, 1, tmp_path / "warm", until=20),
                         retrain(first, 1, tmp_path / "warm")]
        (one,) = children().values()
        retrain(first, 2, tmp_path / "warm", until=5)
        assert len(children()) == 2 and one in children().values(), "a child per thread count, the first kept"
    assert kept() is None
    assert numbers(after_another[1]) == numbers(alone[0]) and numbers(after_another[2]) == numbers(alone[1])
    assert after_another[2].metrics and numbers(after_another[0]) != numbers(alone[0])


def test_a_refusal_keeps_the_child_and_a_bug_or_a_signal_ends_it_said_as_a_fresh_child_says_it(tmp_path):
    good = tiny_experiment(tmp_path, train={"steps": 4, "log_every": 2})
    bad = tiny_experiment(tmp_path, model={"norm": "sideways"})
    with pytest.raises(ZooError) as cold:
        retrain(bad, 1, tmp_path / "cold")
    with warm_children() as warm:
        retrain(good, 1, tmp_path / "warm", until=2)
        (pid,) = children().values()
        with pytest.raises(ZooError) as refused:
            retrain(bad, 1, tmp_path / "warm")
        assert str(refused.value) == str(cold.value).replace("cold/retrain-0", "warm/retrain-1")
        assert "unknown norm 'sideways'; choices: " in str(refused.value)
        assert list(children().values()) == [pid], "a refusal the zoo explained: the child takes the next cell"

        command, env, out = retrain_command(good, 1, tmp_path / "bug", until=2)
        out.mkdir()  # a folder where the record goes: writing it fails in a way the zoo does not explain
        with pytest.raises(ZooError, match=r"^training it again failed: IsADirectoryError: \[Errno 21\] Is a directory"):
            warm.retrain(command[len(ENTRY):], env, out)
        assert children() == {}, "an exception the zoo did not explain: the child trains nothing more"

        slow = tiny_experiment(tmp_path, train={"steps": 20_000, "log_every": 1_000})  # minutes: killed long before
        killer = threading.Thread(target=kill_when_training, args=(warm, tmp_path / "killed"))
        killer.start()
        with pytest.raises(ZooError, match=r"^training it again failed: killed by SIGKILL: stopped from outside"):
            retrain(slow, 1, tmp_path / "killed")
        killer.join()
        assert children() == {}
        assert retrain(good, 1, tmp_path / "warm", until=2).history, "a fresh child takes the next cell"


def kill_when_training(warm, scratch, deadline: float = 300) -> None:
    """SIGKILL the warm child once its cell has begun to train (its log holds the run's first line)."""
    start = time.monotonic()
    while time.monotonic() - start < deadline:
        logs = list(scratch.glob("retrain-*/log.txt"))
        if logs and "run " in logs[0].read_text():
            (child,) = warm.children.values()
            os.kill(child.pid, signal.SIGKILL)
            return
        time.sleep(0.05)
