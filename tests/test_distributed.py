"""`zoo train` under torchrun: 2 CPU processes with gloo match one process on the same global batch.

Tolerance: losses, eval metrics, outputs and weights agree within 1e-5 (about 2e-7 measured): the
ranks sum their halves of the loss in another order than one process does, so float rounding
differs. The key biases of attention are the exception: softmax over keys ignores a constant
shift, so their true gradient is zero and Adam (eps 1e-9) turns rounding noise into lr-sized
steps. They drift apart without changing what the model computes, which the output check shows.
"""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
import yaml

import zoo
from trainkit import offline_run, run_dir_of, text_task, tiny_experiment, write_corpus
from zoo.model.canonical import canonical_state
from zoo.model.kinds import model_class
from zoo.sweep.torchrun_cell import rank_exit_code
from zoo.tasks import build_task

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier

TOL = 1e-5


TASKS = {"encoder_decoder": None, "decoder": None, "encoder": "mlm"}
"""Each kind on a task it trains: the sequence task of tiny_experiment, or masked-token prediction."""


def run(tmp_path, name: str, processes: int, kind: str = "encoder_decoder", train: dict | None = None, **model):
    task = {} if TASKS[kind] is None else {"task": text_task(TASKS[kind], write_corpus(tmp_path / "corpus"))}
    experiment = tiny_experiment(tmp_path / name, model={"kind": kind, **model},
                                 train={"steps": 60, "eval_every": 60, "log_every": 10, "device": "cpu", **(train or {})},
                                 wandb={"mode": "offline"},
                                 **task)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(experiment))
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"] if processes > 1 else []
    done = subprocess.run([sys.executable, *launcher, "-m", "zoo.cli", "train", str(path)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir_of(experiment), experiment


CASES = {"encoder_decoder": ("encoder_decoder", {}), "encoder": ("encoder", {}),
         "decoder, chunked loss, 2 micro-batches": ("decoder", {"loss_chunk": 7, "accumulate": 2, "batch_size": 16})}
"""Every kind, the decoder's with the loss a chunk at a time, whose generator runs outside DDP's
forward, over two micro-batches a step, whose gradients the ranks average once (one run covering
both, as a plain decoder run adds nothing the other kinds' plain runs do not test: CI's time)."""


@pytest.mark.parametrize("case", list(CASES))
def test_two_gloo_processes_match_one_process(tmp_path, case):
    kind, train = CASES[case]
    one_dir, experiment = run(tmp_path, "one", 1, kind, train)
    two_dir, _ = run(tmp_path, "two", 2, kind, train)

    # one run each: rank 0 alone logs
    (one_info, one_records), (two_info, two_records) = offline_run(tmp_path / "one"), offline_run(tmp_path / "two")
    losses = [[r["history"]["item"]["train/loss"] for r in records if r["type"] == "history"
               and "train/loss" in r["history"]["item"]] for records in (one_records, two_records)]
    assert len(losses[0]) == 6 and losses[0] == pytest.approx(losses[1], abs=TOL)
    for name in ("eval/loss", "eval/token_acc", *(["eval/exact_match"] if kind != "encoder" else [])):
        assert one_info["summary"][name] == pytest.approx(two_info["summary"][name], abs=TOL)

    (one, _), (two, _) = zoo.load(one_dir / "checkpoint.pt"), zoo.load(two_dir / "checkpoint.pt")
    one_state, two_state = canonical_state(one), canonical_state(two)
    for name, tensor in one_state.items():
        if not name.endswith(".k.bias"):
            assert torch.allclose(tensor, two_state[name], rtol=0, atol=TOL), name
    inputs, _ = model_class(one.spec).frame(one.spec, *build_task(experiment["task"], seed=0).eval_batches(32, 32)[0])
    assert torch.allclose(one(*inputs), two(*inputs), rtol=0, atol=TOL)


def test_experts_that_no_token_chose_do_not_stop_data_parallel_training(tmp_path):
    """64 experts, top-1, a few dozen tokens per rank: most experts are idle on each rank at each
    step, yet DDP (which needs a gradient for every parameter) trains, and logs the balance loss.
    The ranks' capacities and balance losses are their own halves', so no equality with one process."""
    moe = {"ffn": {"name": "moe", "experts": 64, "top_k": 1}, "norm": "pre"}
    two_dir, _ = run(tmp_path, "two", 2, **moe)
    info, records = offline_run(tmp_path / "two")
    aux = [r["history"]["item"]["train/aux_loss"] for r in records
           if r["type"] == "history" and "train/aux_loss" in r["history"]["item"]]
    assert len(aux) == 6 and all(0.01 <= value <= 0.01 * 64 for value in aux)
    model, _ = zoo.load(two_dir / "checkpoint.pt")
    assert info["summary"]["eval/token_acc"] > 0.3 and model.spec.ffn.experts == 64


@pytest.mark.parametrize("choice", ["auto", "cuda"])
def test_more_processes_than_gpus_are_refused_before_any_joins(tmp_path, monkeypatch, choice):
    """Two processes on a machine that shows one GPU (faked): one line that names both counts and
    the way out, before the process group is joined (which would wait for a peer that died)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda _: pytest.fail("a GPU was taken"))
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda **_: pytest.fail("the group was joined"))
    for name, value in {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(zoo.ConfigError) as refused:
        zoo.train(tiny_experiment(tmp_path, train={"device": choice}))
    assert str(refused.value) == (
        f"train.device '{choice}': torchrun started 2 processes on this machine but CUDA shows 1 GPU, and each "
        "process needs one of its own; start at most 1 (--nproc_per_node 1), or set train.device: cpu to train "
        "every process on the CPU with gloo")
    assert not list(tmp_path.iterdir()), "a refused start leaves no folder"


def test_a_refusal_under_torchrun_is_said_once_and_exits_2(tmp_path):
    """Every rank meets the same refusal: rank 0 alone says it. `zoo train --procs N` ends as one
    process would (exit 2, one line); under a bare torchrun the line is there once, before torchrun's report."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    sets = ["--set", "model.norm=bogus", f"train.out_dir={tmp_path}"]
    ours = subprocess.run([sys.executable, "-m", "zoo.cli", "train", "--procs", "2", *sets], capture_output=True,
                          text=True, env=env, timeout=300)
    assert ours.returncode == 2 and ours.stderr.count("\n") == 1, ours.stderr
    assert ours.stderr.startswith("zoo: experiment: model: norm: unknown norm 'bogus'")
    bare = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "zoo.cli", "train", *sets], capture_output=True, text=True, env=env, timeout=300)
    assert bare.returncode != 0 and bare.stderr.count("zoo: experiment: model: norm") == 1, bare.stderr


@pytest.mark.parametrize(("exit_codes", "expected"), [
    ({0: 2, 1: -15}, (0, 2)),  # rank 0 said the refusal; the other was stopped by torchrun
    ({0: -15, 1: 2}, (1, 2)),  # rank 1 ended first and torchrun stopped rank 0: the refusal counts, not 143
    ({0: -9, 1: -15}, (0, 137)),  # no rank ended by itself: rank 0's signal
    ({1: 1, 2: 3}, (1, 1)),  # rank 0 ran on; the first rank that failed
])
def test_the_exit_code_of_a_torchrun_is_the_rank_that_ended_by_itself(exit_codes, expected):
    failed = SimpleNamespace(failures={rank: SimpleNamespace(exitcode=code) for rank, code in exit_codes.items()})
    assert rank_exit_code(failed) == expected


def processes_naming(text: str) -> list[int]:
    """The pids of this machine's processes whose command line holds `text`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if text.encode() in handle.read():
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_sigterm_to_zoo_train_procs_stops_every_rank_once_with_the_signals_status(tmp_path, parallel):
    """The new user's FSDP run: the stop was said by each rank, then torchrun's traceback, exit 1;
    and a SIGTERM to `zoo train --procs` alone left its ranks training as orphans."""
    experiment = tiny_experiment(tmp_path, train={"steps": 100_000, "checkpoint_every": 50, "eval_every": 100_000,
                                                  "log_every": 10, "parallel": parallel})
    file = tmp_path / "stopped-run.yaml"
    file.write_text(yaml.safe_dump(experiment))
    process = subprocess.Popen([sys.executable, "-m", "zoo.cli", "train", str(file), "--procs", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    while not (line := process.stdout.readline()).startswith("step 60/"):
        assert line, "the run ended before its first checkpoint"
    process.terminate()
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert err.count("stopped by SIGTERM after step") == 1 and "Traceback" not in err, err
    assert processes_naming(str(file)) == [], "no rank trains on"
    saved = run_dir_of(experiment) / ("checkpoint.dcp" if parallel == "fsdp" else "checkpoint.pt")
    assert saved.exists() and "continue with --resume" in err
