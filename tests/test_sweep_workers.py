"""A sweep's worker processes: cells trained one after another in one process give the numbers a
run of their own gives, a worker killed mid-cell fails that cell alone, a bug's traceback lands in
the cell's log and the next cell gets a fresh process."""

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

import zoo.trainer.console
from trainkit import tiny_experiment
from zoo.records import read_result
from zoo.specs.experiment import validate_experiment
from zoo.sweep import Ledger, SweepSpec, pool, run_sweep
from zoo.sweep.worker import serve

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier

TIMED = ("wall", "tokens_per_s", "compile")


def learning_curve(history: list[dict]) -> list[dict]:
    """A run's logged rows without what the clock decides."""
    return [{k: v for k, v in row.items() if not any(word in k for word in TIMED)} for row in history]


def count_starts(monkeypatch) -> list[int]:
    """The pids of the worker processes the sweep starts."""
    pids, start = [], pool.Workers._start

    def counted(self):
        worker = start(self)
        pids.append(worker.pid)
        return worker

    monkeypatch.setattr(pool.Workers, "_start", counted)
    return pids


def test_cells_trained_in_one_worker_match_runs_of_their_own(tmp_path, monkeypatch):
    base = tiny_experiment(tmp_path, model={"dropout": 0.1}, train={"steps": 12, "eval_every": 6, "log_every": 3})
    sweep = SweepSpec.model_validate({"name": "one", "grid": {"model.norm": ["post", "pre"]}, "seeds": [0, 1],
                                      "out_dir": str(tmp_path)})
    pids = count_starts(monkeypatch)
    assert set(run_sweep(sweep, base, workers=1, echo=lambda _: None).values()) == {"finished"}
    assert len(pids) == 1, "four cells, one process"
    runs = tmp_path / "one" / "runs"
    for cell in ("norm=pre,seed=1", "norm=post,seed=0"):  # the last cell trained, and the first
        in_worker = read_result(runs / cell / "result.json")
        experiment = yaml.safe_load((runs / cell / "experiment.yaml").read_text())
        experiment["train"]["out_dir"] = str(tmp_path / "alone" / cell)
        file = tmp_path / "alone.yaml"
        file.write_text(yaml.safe_dump(experiment))
        threads = str(in_worker.threads)  # as many as the worker had: they change how sums round
        subprocess.run([sys.executable, "-m", "zoo.cli", "train", str(file)], check=True, capture_output=True,
                       env={**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}, timeout=300)
        (result,) = (tmp_path / "alone" / cell).rglob("result.json")
        alone = read_result(result)
        assert alone.threads == in_worker.threads
        assert in_worker.metrics == alone.metrics, cell
        assert learning_curve(in_worker.history) == learning_curve(alone.history), cell


def test_a_worker_killed_mid_cell_fails_that_cell_and_a_fresh_one_trains_the_next(tmp_path, monkeypatch):
    base = tiny_experiment(tmp_path, train={"steps": 20, "log_every": 10, "eval_every": 10})
    sweep = SweepSpec.model_validate({"name": "kill", "grid": {"train.steps": [100000, 20]}, "out_dir": str(tmp_path)})
    pids = count_starts(monkeypatch)
    statuses = {}
    sweeping = threading.Thread(target=lambda: statuses.update(run_sweep(sweep, base, echo=lambda _: None)))
    sweeping.start()
    log = tmp_path / "kill" / "runs" / "steps=100000,seed=0" / "log.txt"
    deadline = time.monotonic() + 120
    while "step 10/100000" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(pids[0], signal.SIGKILL)
    sweeping.join(timeout=300)
    assert statuses == {"steps=100000,seed=0": "failed", "steps=20,seed=0": "finished"}
    killed = Ledger(tmp_path / "kill" / "ledger.jsonl").latest()["steps=100000,seed=0"]
    assert killed["exit_code"] == -signal.SIGKILL and "step 10/100000" in killed["error"]
    assert len(pids) == 2 and pids[1] != pids[0]


def test_a_worker_that_died_between_cells_is_replaced_before_the_next(tmp_path):
    workers = pool.Workers(threads=1)
    files = []
    for norm in ("post", "pre"):
        experiment = validate_experiment(tiny_experiment(tmp_path, model={"norm": norm}, train={"steps": 5}))
        files.append(tmp_path / f"{norm}.yaml")
        files[-1].write_text(experiment.to_yaml())
    try:
        assert workers.train(files[0], tmp_path / "post.log") == 0
        (first,) = workers.live
        first.kill()
        first.wait()
        assert workers.train(files[1], tmp_path / "pre.log") == 0
        (second,) = workers.live
        assert second.pid != first.pid
        assert "final " in (tmp_path / "pre.log").read_text()
    finally:
        workers.close()
    assert not workers.live


def test_a_refusal_keeps_the_worker_and_a_bug_ends_it_with_its_traceback_in_the_cells_log(tmp_path, monkeypatch):
    def train_and_report(experiment, resume):
        raise RuntimeError("a bug in the trainer")

    monkeypatch.setattr(zoo.trainer.console, "train_and_report", train_and_report)
    (tmp_path / "bug.yaml").write_text("train: {steps: 1}\n")  # valid: the bug is in training
    cells = ["missing.yaml", "bug.yaml", "never.yaml"]
    requests = io.StringIO("".join(json.dumps({"experiment": str(tmp_path / cell), "log": str(tmp_path / f"{cell}.log")})
                                   + "\n" for cell in cells))
    replies = io.StringIO()
    serve(requests, replies)
    assert [json.loads(line)["code"] for line in replies.getvalue().splitlines()] == [2, 1], "nothing after the bug"
    assert "missing.yaml" in (tmp_path / "missing.yaml.log").read_text()
    bug_log = (tmp_path / "bug.yaml.log").read_text()
    assert "Traceback" in bug_log and "RuntimeError: a bug in the trainer" in bug_log
    assert not (tmp_path / "never.yaml.log").exists()


def test_cells_per_process_starts_a_worker_afresh_after_that_many_cells(tmp_path, monkeypatch):
    base = tiny_experiment(tmp_path, train={"steps": 5})
    sweep = SweepSpec.model_validate({"name": "fresh", "grid": {"model.norm": ["post", "pre", "res_post"]},
                                      "out_dir": str(tmp_path)})
    pids = count_starts(monkeypatch)
    statuses = run_sweep(sweep, base, workers=1, echo=lambda _: None, cells_per_process=2)
    assert set(statuses.values()) == {"finished"} and len(set(pids)) == 2, "cells 1 and 2 in one process, 3 in another"


def test_a_worker_killed_while_it_starts_a_cell_fails_that_cell_and_the_sweep_goes_on(tmp_path, monkeypatch):
    """Killed after it took the cell and before the cell wrote its log: the cell is recorded as
    failed, saying so, and the next cell trains in a fresh worker."""
    base = tiny_experiment(tmp_path, train={"steps": 5})
    sweep = SweepSpec.model_validate({"name": "early", "grid": {"model.norm": ["post", "pre"]}, "out_dir": str(tmp_path)})
    start, starts = pool.Workers._start, []

    def dying_first(self):
        starts.append(1)
        if len(starts) > 1:
            return start(self)
        worker = subprocess.Popen([sys.executable, "-c", "import os, signal, sys; sys.stdin.readline(); "
                                   "os.kill(os.getpid(), signal.SIGKILL)"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.live.add(worker)
        self._mine.worker = worker
        return worker

    monkeypatch.setattr(pool.Workers, "_start", dying_first)
    statuses = run_sweep(sweep, base, workers=1, echo=lambda _: None)
    assert statuses == {"norm=post,seed=0": "failed", "norm=pre,seed=0": "finished"}
    failed = Ledger(tmp_path / "early" / "ledger.jsonl").latest()["norm=post,seed=0"]
    assert failed["status"] == "failed" and failed["exit_code"] == -signal.SIGKILL
    assert failed["error"] == ("its worker ended (killed by SIGKILL: stopped from outside, often by the kernel's "
                               "out-of-memory killer) before the cell wrote anything")


def test_a_worker_whose_sweep_is_gone_saves_its_cell_and_ends_without_a_traceback(tmp_path):
    experiment = validate_experiment(tiny_experiment(tmp_path, train={"steps": 5}))
    (tmp_path / "cell.yaml").write_text(experiment.to_yaml())
    worker = subprocess.Popen([sys.executable, "-c", pool.WORKER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker.stdin.write(json.dumps({"experiment": str(tmp_path / "cell.yaml"), "log": str(tmp_path / "log.txt")}) + "\n")
    worker.stdin.close()
    worker.stdout.close()  # the sweep is gone before the reply
    assert worker.wait(timeout=300) == 0
    assert worker.stderr.read() == ""
    (result,) = tmp_path.rglob("result.json")
    assert read_result(result).status == "finished"


def test_a_cells_thread_count_does_not_reach_the_next_cell_of_its_worker(tmp_path, monkeypatch):
    import torch

    from zoo.sweep.worker import train_cell_file

    before = torch.get_num_threads()
    monkeypatch.setattr(zoo.trainer.console, "train_and_report", lambda experiment, resume: torch.set_num_threads(before + 1))
    (tmp_path / "cell.yaml").write_text("train: {steps: 1}\n")
    assert train_cell_file(str(tmp_path / "cell.yaml")) == 0
    assert torch.get_num_threads() == before


def test_a_cell_whose_log_cannot_be_opened_fails_in_one_line_without_a_traceback(tmp_path, capsys):
    """A folder where the cell's log.txt goes (or a full disk): the worker says so in one line and
    takes the next cell; the sweep records the cell failed with that reason, before it reaches a worker."""
    (tmp_path / "cell.yaml").write_text("train: {steps: 1}\n")
    (tmp_path / "blocked").mkdir()
    requests = io.StringIO(json.dumps({"experiment": str(tmp_path / "cell.yaml"), "log": str(tmp_path / "blocked")})
                           + "\n" + json.dumps({"experiment": str(tmp_path / "missing.yaml"),
                                                "log": str(tmp_path / "next.log")}) + "\n")
    replies = io.StringIO()
    serve(requests, replies)
    assert [json.loads(line)["code"] for line in replies.getvalue().splitlines()] == [2, 2], "the worker goes on"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "blocked: cannot open the cell's log" in err, err

    from test_sweep import tiny_sweep

    from zoo.sweep.spec import cell_experiment, expand
    sweep, base = tiny_sweep(tmp_path / "sweep", {"model.norm": ["post", "pre"]})
    first = expand(sweep)[0]
    (Path(cell_experiment(sweep, base, first).train.out_dir) / first.name / "log.txt").mkdir(parents=True)
    statuses = run_sweep(sweep, base, workers=1, echo=lambda _: None)
    assert statuses[first.name] == "failed" and list(statuses.values()).count("finished") == 1
    record = Ledger(sweep.directory() / "ledger.jsonl").latest()[first.name]
    assert "log.txt: cannot open the cell's log (Is a directory); the cell did not run" in record["error"]
