"""`zoo sweep --launcher submitit`: a job array of one task per cell (or per shard) through
submitit; without Slurm its local executor runs the same code path, which is what runs here."""

import shutil

import pytest
import submitit
import yaml
from test_bad_input import cli_error
from test_sweep import tiny_sweep

from zoo.cli import main
from zoo.compare import compare
from zoo.sweep import Ledger, expand, run_sweep
from zoo.sweep.launch import ShardTask

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier


def sweep_file(tmp_path, grid, **train) -> tuple:
    sweep, base = tiny_sweep(tmp_path, grid)
    base["wandb"]["mode"] = "disabled"
    base["train"].update(train)
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump({**sweep.model_dump(mode="json"), "base": base}, sort_keys=False))
    return sweep, base, file


def test_a_local_job_array_trains_every_cell_into_one_ledger(tmp_path, capsys):
    sweep, _, file = sweep_file(tmp_path, {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]})
    main(["sweep", str(file), "--launcher", "submitit", "--cluster", "local", "--tasks", "2", "--time-limit", "30"])
    out = capsys.readouterr().out
    assert "sweep tiny: 2 local task(s) for 4 cells" in out and "sweep tiny: 4 finished" in out
    latest = Ledger(tmp_path / "tiny" / "ledger.jsonl").latest()
    assert sorted(latest) == sorted(c.name for c in expand(sweep))
    assert {r["status"] for r in latest.values()} == {"finished"}
    logs = sorted((tmp_path / "tiny" / "submitit").glob("*/*_log.out"))
    assert len(logs) == 2, "one log folder per array task"
    assert len(compare(tmp_path / "tiny", wandb_mode="disabled", echo=lambda _: None).rows) == 4


def test_a_requeued_task_runs_its_shard_again_and_skips_what_is_done(tmp_path):
    sweep, base, _ = sweep_file(tmp_path, {"model.norm": ["post", "pre"]})
    task = ShardTask(sweep.model_dump(mode="json"), base, shards=2)
    requeued = task.checkpoint(1)
    assert isinstance(requeued, submitit.helpers.DelayedSubmission)
    assert requeued.function is task and requeued.args == (1,), "the same shard, as it was"
    assert task(1) == {"norm=pre,seed=0": "finished"}
    before = (tmp_path / "tiny" / "ledger.jsonl").read_text()
    assert requeued.function(*requeued.args) == {"norm=pre,seed=0": "finished"}
    assert (tmp_path / "tiny" / "ledger.jsonl").read_text() == before, "nothing trained twice"
    assert run_sweep(sweep, base, echo=lambda _: None) == {"norm=post,seed=0": "finished", "norm=pre,seed=0": "finished"}


@pytest.mark.parametrize("extra, text", [
    (["--partition", "gpu"], "--partition and --array-parallelism are Slurm's; submitit found no Slurm here"),
    (["--shard", "1/2"], "--shard goes with the local launcher"),
    (["--tasks", "9"], "--tasks 9: give 1 to 2"),
    (["--gpus-per-cell", "-1"], "--gpus-per-cell -1: give 0 or more"),
    (["--gpus-per-cell", "1", "--procs-per-cell", "2"], "--procs-per-cell 2: more processes than the 1 GPUs of each task"),
])
def test_launcher_options_that_cannot_apply_are_one_line(tmp_path, capsys, extra, text):
    _, _, file = sweep_file(tmp_path, {"model.norm": ["post", "pre"]})
    assert text in cli_error(["sweep", str(file), "--launcher", "submitit", "--cluster", "local", *extra], capsys)


@pytest.mark.skipif(shutil.which("srun") is not None, reason="this machine has Slurm")
def test_asking_for_slurm_where_there_is_none_is_one_line(tmp_path, capsys):
    _, _, file = sweep_file(tmp_path, {"model.norm": ["post", "pre"]})
    assert "--cluster slurm: Could not detect \"srun\"" in cli_error(
        ["sweep", str(file), "--launcher", "submitit", "--cluster", "slurm"], capsys)
