"""A run's CPU threads: `train.threads` sets them for the run alone (the caller's count is its own
again after), a thread count is never part of the run's identity, and a step rate that falls on
busy cores is said once, with the setting that helps."""

import pytest
import torch

import zoo
from trainkit import run_dir_of, tiny_experiment
from zoo.trainer.busy import BusyCores, usable_threads


def test_train_threads_sets_the_runs_threads_alone_and_is_not_its_identity(tmp_path, capsys, monkeypatch):
    before = torch.get_num_threads()
    short = {"steps": 20, "checkpoint_every": 20, "eval_every": 20}
    chosen = 1 if before > 1 else 2
    experiment = tiny_experiment(tmp_path, train={**short, "threads": chosen})
    assert run_dir_of(experiment) == run_dir_of(tiny_experiment(tmp_path, train=short)), "the same run, any threads"
    result = zoo.train(experiment)
    said = capsys.readouterr().out.splitlines()
    assert said[1] == (f"run {result.run_dir.name}: device cpu, {chosen} threads, precision fp32 "
                       "(train.precision auto), 1 process")
    assert torch.get_num_threads() == before, "the caller's thread count is its own again"
    again = zoo.train(tiny_experiment(tmp_path, train={**short, "steps": 30, "threads": before}), resume=True)
    assert again.run_dir == result.run_dir, "a resume may change the threads"
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda _: {0}, raising=False)
    assert usable_threads() == 1, "never more threads than the CPUs the process may run on"
    monkeypatch.setenv("OMP_NUM_THREADS", str(before))
    assert usable_threads() == before, "a count the environment sets (a sweep worker's share) stands"


def test_a_step_rate_that_falls_below_half_its_best_is_said_once_naming_the_setting():
    busy = BusyCores(threads=2)

    def window(seconds_a_step: float, steps: int = 10) -> str | None:
        for _ in range(steps):
            busy.add(seconds_a_step)
        return busy.read()

    assert window(1.0) is None, "the first window holds the warm-up: no measure"
    assert window(0.01) is None and window(0.012) is None and busy.best == pytest.approx(100.0)
    line = window(0.03)
    assert line == ("the step rate fell to 33.3 steps/s from 100: the cores look busy (other processes on them?); "
                    "with 2 threads a busy machine can run slower than with one: set train.threads (train.threads=1, "
                    "say); the run stays the same run")
    assert window(0.05) is None, "said once"
    alone = BusyCores(threads=1)
    for seconds in (1.0, 0.01, 0.05):
        for _ in range(4):
            alone.add(seconds)
        said = alone.read()
    assert said.endswith("the cores look busy (other processes on them?); the run already uses one thread")
