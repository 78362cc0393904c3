"""A run killed with SIGKILL and resumed ends bitwise where an uninterrupted run ends."""

import os
import signal
import subprocess
import sys
import time

import torch
import yaml

from trainkit import run_dir_of, tiny_experiment

STEPS = 300


def write_experiment(tmp_path, name: str):
    experiment = tiny_experiment(tmp_path / name, model={"dropout": 0.1},  # dropout draws from the RNG state
                                 train={"steps": STEPS, "checkpoint_every": 10, "eval_every": 100, "schedule": "cosine"})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path, run_dir_of(experiment) / "checkpoint.pt"


def zoo_train(*args) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "zoo.cli", "train", *map(str, args)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> None:
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err


def test_sigkill_then_resume_is_bitwise_an_uninterrupted_run(tmp_path):
    whole_file, whole_ckpt = write_experiment(tmp_path, "whole")
    cut_file, cut_ckpt = write_experiment(tmp_path, "cut")

    killed = zoo_train(cut_file)
    deadline = time.monotonic() + 120
    while not cut_ckpt.exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    assert killed.returncode == -signal.SIGKILL, "the run had ended before it could be killed"
    stopped_at = torch.load(cut_ckpt, weights_only=True)["progress"]["step"]
    assert 0 < stopped_at < STEPS

    finish(zoo_train(cut_file, "--resume"))
    finish(zoo_train(whole_file))

    cut, whole = torch.load(cut_ckpt, weights_only=True), torch.load(whole_ckpt, weights_only=True)
    assert cut["progress"]["step"] == whole["progress"]["step"] == STEPS
    assert cut["model"].keys() == whole["model"].keys()
    for name, tensor in whole["model"].items():
        assert torch.equal(cut["model"][name], tensor), name
    assert cut["progress"]["last_eval"] == whole["progress"]["last_eval"]
    assert cut["progress"]["best"] == whole["progress"]["best"]
    assert torch.equal(cut["rng"]["torch"], whole["rng"]["torch"])
