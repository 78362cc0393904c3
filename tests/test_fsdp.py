"""train.parallel fsdp (torch's FSDP2) under torchrun with 2 CPU processes and gloo: it follows one
process on the same global batch, resumes bitwise from its sharded checkpoint (and at world size 1
on purpose), consolidates to the weights it trained, and trains every variant of the grid or
refuses it in one line. Tolerance as in test_distributed: 1e-5, apart from attention's key biases,
whose true gradient is zero (Adam turns the rounding noise of the ranks' sums into steps)."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import GRID, tiny
from fsdp_grid import parts_of

import zoo
from trainkit import offline_run, run_dir_of, tiny_experiment
from zoo.model.canonical import canonical_state

pytestmark = pytest.mark.slow  # starts torchrun: not in the fast tier

TOL = 1e-5
HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def launch(experiment_file: Path, processes: int | None, *flags: str, wait: bool = True):
    """`zoo train` alone (None) or under torchrun with that many processes, in a session of its own."""
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"] if processes else []
    process = subprocess.Popen([sys.executable, *launcher, "-m", "zoo.cli", "train", str(experiment_file), *flags],
                               env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    if not wait:
        return process
    out, err = process.communicate(timeout=600)
    said = [line for line in err.splitlines() if "zoo:" in line or "Error" in line]
    assert process.returncode == 0, "\n".join(said[:5]) or err[-3000:]
    return out


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (torchrun puts each rank in a process group of its own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_all(process: subprocess.Popen) -> None:
    """SIGKILL torchrun and its ranks at once (as a machine failing would), and wait for the ranks to end."""
    ranks = descendants(process.pid)
    for pid in [process.pid, *ranks]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait(timeout=60)
    deadline = time.monotonic() + 60
    while any(Path(f"/proc/{pid}").exists() and "Z" not in status(pid) for pid in ranks):
        assert time.monotonic() < deadline, "a rank outlived SIGKILL by a minute"
        time.sleep(0.05)


def status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def write(tmp_path: Path, name: str, wandb: str = "offline", **train) -> tuple[Path, dict]:
    experiment = tiny_experiment(tmp_path / name, train={"steps": 60, "eval_every": 30, "log_every": 10,
                                                         "checkpoint_every": 30, "device": "cpu", **train},
                                 wandb={"mode": wandb})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path, experiment


def losses(wandb_dir: Path) -> list[float]:
    _, records = offline_run(wandb_dir)
    return [r["history"]["item"]["train/loss"] for r in records
            if r["type"] == "history" and "train/loss" in r["history"]["item"]]


def same_weights(one: zoo.ZooModel, other: zoo.ZooModel, tol: float) -> None:
    mine, theirs = canonical_state(one), canonical_state(other)
    for name, tensor in mine.items():
        if not name.endswith(".k.bias"):
            assert torch.allclose(tensor, theirs[name], rtol=0, atol=tol), name


TRAIN = {"keep_best": "eval/loss", "average_last": 2, "loss_chunk": 7, "accumulate": 2, "batch_size": 16,
         "activation_checkpointing": "every_k"}
"""The best and the averaged checkpoints kept (gathered whole), the loss a chunk at a time (the
generator outside the model's forward), two micro-batches a step (gradients reduced once), and
every second block recomputed."""


def test_two_sharded_processes_follow_one_process(tmp_path):
    train = TRAIN
    one_file, one = write(tmp_path, "one", **train)
    two_file, two = write(tmp_path, "two", parallel="fsdp", **train)
    launch(one_file, None)
    printed = launch(two_file, 2)
    assert printed.count("final eval/loss") == 1, "rank 0 alone reports"

    assert losses(tmp_path / "one") == pytest.approx(losses(tmp_path / "two"), abs=TOL)
    (one_info, _), (two_info, _) = offline_run(tmp_path / "one"), offline_run(tmp_path / "two")
    assert two_info["config"]["world_size"] == 2 and two_info["config"]["train"]["parallel"] == "fsdp"
    assert one_info["config"]["world_size"] == 1
    for name in ("eval/loss", "eval/token_acc", "eval/exact_match"):
        assert one_info["summary"][name] == pytest.approx(two_info["summary"][name], abs=TOL)
    one_dir, two_dir = run_dir_of(one), run_dir_of(two)
    record = json.loads((two_dir / "result.json").read_text())
    assert record["world_size"] == 2 and "world_size" not in json.loads((one_dir / "result.json").read_text())

    shards = two_dir / "checkpoint.dcp"
    assert (shards / ".metadata").is_file() and len(list(shards.glob("*.distcp"))) == 2
    subprocess.run([sys.executable, "-m", "zoo.cli", "consolidate", str(shards)], check=True, env=ENV,
                   capture_output=True, timeout=300)
    whole, _ = zoo.load(two_dir / "checkpoint.pt")
    same_weights(zoo.load(one_dir / "checkpoint.pt")[0], whole, TOL)
    on_demand, _ = zoo.load(shards)
    assert all(torch.equal(a, b) for a, b in zip(whole.state_dict().values(), on_demand.state_dict().values(), strict=True))
    # the last snapshot: the trained weights, gathered by the ranks as they were
    last = torch.load(two_dir / "averaging" / f"step_{60:09d}.pt", weights_only=True)["model"]
    assert all(torch.equal(last[name], tensor) for name, tensor in whole.state_dict().items())
    assert record["best_checkpoint"]["metrics"] and record["averaged"]["metrics"]


def test_a_sharded_checkpoint_resumes_bitwise_and_at_world_size_one_on_purpose(tmp_path):
    steps = {"steps": 80, "checkpoint_every": 5, "eval_every": 40}
    whole_file, whole = write(tmp_path, "whole", "disabled", parallel="fsdp", **steps)
    cut_file, cut = write(tmp_path, "cut", "disabled", parallel="fsdp", **steps)
    shards = run_dir_of(cut) / "checkpoint.dcp"
    killed = launch(cut_file, 2, wait=False)
    deadline = time.monotonic() + 300
    while not (shards / "zoo.pt").exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    kill_all(killed)
    stopped_at = torch.load(shards / "zoo.pt", weights_only=True)["progress"]["step"]
    assert 0 < stopped_at < 80 and killed.returncode == -signal.SIGKILL
    aside = tmp_path / "aside"
    shutil.copytree(run_dir_of(cut), aside)

    launch(cut_file, 2, "--resume")
    launch(whole_file, 2)
    (mine, _), (theirs, _) = zoo.load(shards), zoo.load(run_dir_of(whole) / "checkpoint.dcp")
    assert all(torch.equal(a, b) for a, b in zip(mine.state_dict().values(), theirs.state_dict().values(), strict=True))

    shutil.rmtree(run_dir_of(cut))
    shutil.copytree(aside, run_dir_of(cut))
    launch(cut_file, 1, "--resume", "--reshard")  # without --reshard: refused (tests/test_sharding.py)
    resharded, _ = zoo.load(shards)
    same_weights(theirs, resharded, 1e-3)  # one rank sums in another order: rounding, grown over the steps since


def test_every_variant_trains_sharded_or_is_refused_in_one_line(tmp_path):
    """Every variant of the pairwise grid, one sharded step each with every block recomputed
    (tests/fsdp_grid.py), against data parallelism by hand; a variant is refused exactly where its
    model holds a scalar parameter."""
    out = tmp_path / "grid.json"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(HERE / "fsdp_grid.py"), str(out)], env=ENV, capture_output=True, text=True, timeout=600,
                          cwd=HERE)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert list(results) == GRID
    every = {(axis, name) for axis in zoo.AXES for name in zoo.registry(axis).names()}
    assert every <= set().union(*map(parts_of, results)), "a registered part no variant brought"
    for name, result in results.items():
        scalars = [n for n, p in zoo.build(tiny(name), seed=0).named_parameters() if p.dim() == 0]
        if scalars:
            assert "ConfigError: train.parallel fsdp: the model holds a scalar parameter" in result.get("error", ""), name
            continue
        assert "error" not in result, f"{name}: {result.get('error')}"
        assert result["gradient"] <= TOL and result["weights"] <= 1e-6 and not result["missing"], (name, result)
    trained = set().union(*(parts_of(name) for name, result in results.items() if "error" not in result))
    refused = {("norm", "rezero"), ("norm", "fixup"), ("norm_type", "scalenorm")}
    assert every - refused <= trained, "a part that holds no scalar trained in no variant"


def test_a_submitit_task_trains_its_sweep_cells_sharded_under_torchrun(tmp_path, capsys):
    """Each cell of the task is a torchrun of two ranks (the task's GPUs, here CPU processes); the
    ledger records the world size, and `zoo compare` reads the cells as any."""
    from test_launch import sweep_file

    from zoo.cli import main
    from zoo.sweep import Ledger

    sweep_file(tmp_path, {"model.norm": ["post", "pre"]}, parallel="fsdp", device="cpu")
    file = tmp_path / "sweep.yaml"
    main(["sweep", str(file), "--launcher", "submitit", "--cluster", "local", "--tasks", "1", "--procs-per-cell", "2"])
    out = capsys.readouterr().out
    assert "sweep tiny: 2 finished" in out
    latest = Ledger(tmp_path / "tiny" / "ledger.jsonl").latest()
    assert {name: (r["status"], r["world_size"]) for name, r in latest.items()} == {
        "norm=post,seed=0": ("finished", 2), "norm=pre,seed=0": ("finished", 2)}
    for name in latest:
        assert len(list((tmp_path / "tiny" / "runs" / name / "checkpoint.dcp").glob("*.distcp"))) == 2, name
    main(["compare", str(tmp_path / "tiny"), "--wandb-mode", "disabled"])
    assert "norm=pre" in capsys.readouterr().out
