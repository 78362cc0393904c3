"""A run killed with SIGKILL and resumed ends bitwise where an uninterrupted run ends: on the CPU in
float32, and on a GPU in bf16 autocast (train.precision auto), where the CUDA generator that draws
dropout is saved and restored too."""

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
import yaml

from trainkit import run_dir_of, signal_after_first_checkpoint, tiny_experiment

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier

STEPS = 300
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]


SELECTION = {"accumulate": 2, "batch_size": 16, "eval_every": 50, "keep_best": "eval/loss", "average_last": 3,
             "early_stop": {"metric": "eval/loss", "patience": 2, "min_delta": 100.0},
             "optimizer": {"name": "muon", "lr": 3e-3}}
"""Every piece of the trainer that keeps a state of its own: two micro-batches a step, early
stopping (no gain of 100 counts, so it stops two evaluations after the first, at step 150), the
best checkpoint, the average of the last 3 checkpoints, and Muon (whose state is two optimizers')."""


def write_experiment(tmp_path, name: str, device: str, train: dict | None = None):
    experiment = tiny_experiment(tmp_path / name, model={"dropout": 0.1},  # dropout draws from the RNG state
                                 train={"steps": STEPS, "checkpoint_every": 10, "eval_every": 100, "schedule": "cosine",
                                        "device": device, "precision": "auto", **(train or {})})
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


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("train", [None, SELECTION], ids=["plain", "accumulate, early stop, best, average, muon"])
def test_sigkill_then_resume_is_bitwise_an_uninterrupted_run(tmp_path, device, train):
    whole_file, whole_ckpt = write_experiment(tmp_path, "whole", device, train)
    cut_file, cut_ckpt = write_experiment(tmp_path, "cut", device, train)

    killed = zoo_train(cut_file)
    signal_after_first_checkpoint(killed, cut_ckpt)
    assert killed.returncode == -signal.SIGKILL, "the run had ended before it could be killed"
    stopped_at = torch.load(cut_ckpt, weights_only=True, map_location="cpu")["progress"]["step"]
    assert 0 < stopped_at < STEPS

    finish(zoo_train(cut_file, "--resume"))
    finish(zoo_train(whole_file))

    cut, whole = (torch.load(path, weights_only=True, map_location="cpu") for path in (cut_ckpt, whole_ckpt))
    assert cut["experiment"]["train"]["device"] == device
    assert cut["progress"]["step"] == whole["progress"]["step"] == (150 if train else STEPS)
    assert cut["model"].keys() == whole["model"].keys()
    for name, tensor in whole["model"].items():
        assert torch.equal(cut["model"][name], tensor), name
    assert cut["progress"]["last_eval"] == whole["progress"]["last_eval"]
    assert cut["progress"]["best"] == whole["progress"]["best"]
    assert torch.equal(cut["rng"]["torch"], whole["rng"]["torch"])
    if device == "cuda":
        assert torch.equal(cut["rng"]["cuda"], whole["rng"]["cuda"])
    if train:
        assert cut["pieces"] == whole["pieces"] and cut["pieces"]["early_stop"]["stopped_at"] == 150
        results = [json.loads((path.parent / "result.json").read_text()) for path in (cut_ckpt, whole_ckpt)]
        for kept in ("best_checkpoint", "averaged"):
            assert results[0][kept]["metrics"] == results[1][kept]["metrics"], kept
        for name in ("checkpoint_best.pt", "checkpoint_averaged.pt"):
            cut_kept, whole_kept = (torch.load(p.parent / name, weights_only=True)["model"] for p in (cut_ckpt, whole_ckpt))
            assert all(torch.equal(cut_kept[key], whole_kept[key]) for key in whole_kept), name
