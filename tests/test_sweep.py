"""Sweeps: grid expansion and names, shards, spec errors, the ledger's resume, the W&B export, and
two tiny cells end to end read back with W&B's own reader."""

import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

import zoo
from trainkit import read_run, tiny_experiment
from zoo.cli import build_parser
from zoo.compare import compare
from zoo.sweep import Ledger, SweepSpec, cell_experiment, expand, export_wandb, load_sweep, run_sweep, shard
from zoo.sweep.export import find_cell
from zoo.sweep.pool import threads_per_worker
from zoo.sweep.question import declaration
from zoo.sweep.runner import SweepClock

GRID = {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"], "train.optimizer.lr": [0.001, 0.003]}


def sweep_spec(tmp_path, **fields) -> SweepSpec:
    return SweepSpec.model_validate({"name": "s", "grid": GRID, "seeds": [0, 1], "out_dir": str(tmp_path), **fields})


def test_grid_times_seeds_expands_into_named_cells(tmp_path):
    cells = expand(sweep_spec(tmp_path))
    assert len(cells) == 2 * 2 * 2 * 2 and len({c.name for c in cells}) == 16
    assert cells[0].name == "norm=post,ffn=relu,lr=0.001,seed=0"
    assert [c.seed for c in cells] == [0] * 8 + [1] * 8, "whole seeds first"
    assert {tuple(v for _, v in c.assignment) for c in cells} == set(itertools.product(*GRID.values()))
    shared = SweepSpec(name="s", grid={"model.max_len": [64], "task.max_len": [8, 9]})
    assert expand(shared)[1].variant == "model.max_len=64,task.max_len=9", "keys that share a last part stay whole"


def test_a_cell_is_the_base_with_its_values_in_the_sweeps_group(tmp_path):
    sweep = sweep_spec(tmp_path)
    cell = expand(sweep)[13]
    experiment = cell_experiment(sweep, {"wandb": {"tags": ["mine"]}}, cell)
    assert (experiment.model.norm, experiment.model.ffn, experiment.train.optimizer.lr) == ("pre", "relu", 0.003)
    assert experiment.model.d_model == 128, "fields the grid leaves alone keep the base's (default) values"
    assert experiment.train.seed == 1 and experiment.wandb.name == cell.name
    assert (experiment.wandb.group, experiment.wandb.job_type) == ("s", cell.variant), "a variant's seeds share a job"
    assert cell.variant == "norm=pre,ffn=relu,lr=0.003"
    assert experiment.wandb.tags == ("mine", "sweep", "norm=pre", "ffn=relu", "lr=0.003")
    assert experiment.wandb.config == {"norm": "pre", "ffn": "relu", "lr": 0.003, "variant": cell.variant}
    assert experiment.train.out_dir == str(tmp_path / "s" / "runs") and experiment.wandb.dir == str(tmp_path / "s")


@pytest.mark.parametrize("count", [1, 2, 3, 5, 16, 17])
def test_shards_partition_the_cells(tmp_path, count):
    cells = expand(sweep_spec(tmp_path))
    parts = [shard(cells, i, count) for i in range(count)]
    names = [c.name for part in parts for c in part]
    assert sorted(names) == sorted(c.name for c in cells) and len(names) == len(set(names))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.parametrize("fields, message", [
    ({"grid": {"norm": ["pre"]}}, "grid key 'norm' is not a dotted experiment field"),
    ({"grid": {"train.seed": [1, 2]}}, "list seeds under `seeds`"),
    ({"grid": {"model.norm": ["pre", "pre"]}}, "needs a list of distinct values"),
    ({"grid": {}}, "at least one grid axis"),
    ({"name": "a b"}, "name"),
    ({"goal": "maximize"}, "'max' or 'min'"),
    ({"goal": "min"}, r"goal min: metric 'eval/exact_match' is max \(better higher, as exact_match declares\)"),
    ({"metric": "test/bleuu"}, r"unknown metric 'bleuu'; did you mean 'bleu'\?.* \(in 'test/bleuu'\)"),
    ({"seeds": []}, "seeds"),
])
def test_bad_sweep_specs_are_named(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        sweep_spec(tmp_path, **fields)


def test_a_bad_grid_value_fails_before_anything_runs(tmp_path):
    sweep = sweep_spec(tmp_path, grid={"model.norm": ["post", "prenorm"]})
    with pytest.raises(ValueError, match=r"cell norm=prenorm,seed=0: model: norm: unknown norm 'prenorm'.*choices: .*post, pre"):
        run_sweep(sweep, {}, echo=lambda _: None)
    assert not (tmp_path / "s").exists()
    with pytest.raises(ValueError, match="--shard 3/3"):
        shard(expand(sweep), 3, 3)


def test_load_sweep_finds_the_base_beside_the_file_and_routes_sets(tmp_path):
    (tmp_path / "base.yaml").write_text(yaml.safe_dump({"task": {"name": "copy"}, "train": {"steps": 9}}))
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({"name": "s", "base": "base.yaml", "grid": GRID}))
    sweep, base = load_sweep(tmp_path / "sweep.yaml", ["train.steps=7", "seeds=[3, 4]", "metric=eval/loss"])
    assert base["task"] == {"name": "copy"} and base["train"]["steps"] == 7
    assert sweep.seeds == [3, 4] and sweep.metric == "eval/loss" and sweep.goal == "min"  # the goal is the metric's
    expected = "--set sedes: unknown key 'sedes'; valid keys start with one of: name, base, grid, seeds"
    with pytest.raises(ValueError, match=expected):
        load_sweep(tmp_path / "sweep.yaml", ["sedes=1"])


def test_exported_wandb_sweep_names_the_cells_and_trains_each_as_its_variant(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweep = sweep_spec("sweeps")
    path = export_wandb(sweep, {"task": {"name": "copy"}})
    config = yaml.safe_load(path.read_text())
    assert config["method"] == "grid" and config["metric"] == {"name": "eval/exact_match", "goal": "maximize"}
    assert config["parameters"] == {**{k: {"values": v} for k, v in GRID.items()}, "seed": {"values": [0, 1]}}
    # What W&B's agent runs for one cell: ${args_no_hyphens} becomes key=value words.
    words = ["model.norm=pre", "model.ffn=gelu", "train.optimizer.lr=0.003", "seed=1"]
    command = [w for part in config["command"] for w in (words if part == "${args_no_hyphens}" else [part])]
    assert command[:2] == ["zoo", "sweep"]
    args = build_parser().parse_args(command[1:])
    exported, base = load_sweep(args.file, args.set)
    cell = find_cell(exported, args.cell)
    assert cell.name == "norm=pre,ffn=gelu,lr=0.003,seed=1"
    experiment = cell_experiment(exported, base, cell)
    assert (experiment.model.norm, experiment.train.seed, experiment.task["name"]) == ("pre", 1, "copy")
    assert (experiment.wandb.group, experiment.wandb.job_type, experiment.wandb.mode) == ("s", cell.variant, "online")
    with pytest.raises(zoo.ConfigError, match=r"--cell: missing seed; a cell of sweep 's' is named by model.norm, "
                                              r"model.ffn, train.optimizer.lr, seed"):
        find_cell(exported, words[:3])
    with pytest.raises(zoo.ConfigError, match=r"no cell of sweep 's' has .*'train.optimizer.lr': 0.002"):
        find_cell(exported, [*words[:2], "train.optimizer.lr=0.002", "seed=1"])


def test_a_variant_too_long_for_a_job_type_keeps_its_start_and_a_hash():
    from zoo.sweep.names import JOB_TYPE_LIMIT, job_type

    long = SweepSpec(name="s", grid={"model.position": [{"name": "rope", "base": 500000.0 + i} for i in range(2)],
                                     "model.norm": ["sandwich"], "model.norm_type": ["scalenorm"],
                                     "train.optimizer.lr": [0.000123456]})
    first, second = (job_type(cell) for cell in expand(long))
    assert len(expand(long)[0].variant) > JOB_TYPE_LIMIT and len(first) == len(second) == JOB_TYPE_LIMIT
    assert first != second and first[:20] == expand(long)[0].variant[:20]


def tiny_sweep(tmp_path, grid, **fields) -> tuple[SweepSpec, dict]:
    base = tiny_experiment(tmp_path, train={"steps": 20, "eval_every": 10, "checkpoint_every": 10, "log_every": 10},
                           wandb={"mode": "offline"})
    return SweepSpec.model_validate({"name": "tiny", "grid": grid, "out_dir": str(tmp_path), **fields}), base


@pytest.mark.parametrize(("limit", "workers", "threads"),
                         [(None, 1, 8), (None, 2, 4), ("6", 2, 3), ("16", 2, 4), ("", 3, 2), ("many", 2, 4), (None, 9, 1)])
def test_workers_split_the_cores_this_process_may_use(monkeypatch, limit, workers, threads):
    """The cores of the process's affinity (8 here, of a machine with more), at most OMP_NUM_THREADS."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    if limit is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", limit)
    assert threads_per_worker(workers) == threads


@pytest.mark.slow
def test_two_cells_end_to_end_with_wandb_offline(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post", "pre"]})
    said = []
    statuses = run_sweep(sweep, base, workers=2, echo=said.append)
    assert statuses == {"norm=post,seed=0": "finished", "norm=pre,seed=0": "finished"}
    folder = tmp_path / "tiny"
    assert said[0].endswith(f"each cell logs to {folder / 'runs'}/CELL/log.txt")
    assert re.search(r"^\[1/2\] .*: finished eval/exact_match=\S+; \d+ s so far, about \d+ s left$", said[1]), said
    assert re.search(r"^\[2/2\] .*; \d+ s in all$", said[2]), said
    assert all((folder / "runs" / name / "log.txt").is_file() for name in statuses)
    assert not list(folder.rglob("*.lock")), "no lock file outlives the sweep"
    latest = Ledger(folder / "ledger.jsonl").latest()
    assert {r["status"] for r in latest.values()} == {"finished"}
    assert all(r["metrics"]["eval/loss"] > 0 and r["steps"] == 20 for r in latest.values())
    assert all(r["threads"] == threads_per_worker(2) for r in latest.values()), "2 workers share the cores"
    lines = [json.loads(line) for line in (folder / "ledger.jsonl").read_text().splitlines()]
    assert all(line["declared"] == declaration(sweep) for line in lines), "every line carries the declared question"
    runs = sorted((folder / "wandb").glob("offline-run-*"))
    assert len(runs) == 2
    for run in runs:
        info, records = read_run(run)
        meta = next(r["run"] for r in records if r["type"] == "run")
        assert info["name"] in statuses and info["state"] == "finished"
        variant = info["name"].removesuffix(",seed=0")
        assert meta["run_group"] == "tiny" and meta["job_type"] == variant
        config = info["config"]
        assert f"norm={config['model']['norm']}" in info["tags"]
        top = {k: config[k] for k in ("norm", "position", "attention", "ffn", "norm_type", "seed", "variant")}
        assert top == {"norm": config["model"]["norm"], "position": "sinusoidal", "attention": "fused", "ffn": "relu",
                       "norm_type": "layernorm", "seed": 0, "variant": variant}, "axes as top-level config keys"
        step_of = {m["metric"].get("glob_name"): m["metric"].get("step_metric") for m in records
                   if m["type"] == "metric" and m["metric"].get("glob_name")}
        assert step_of == {"*": "train/step"}, "every metric is plotted against train/step"
    before = (folder / "ledger.jsonl").read_text()
    assert run_sweep(sweep, base, echo=lambda _: None) == statuses
    assert (folder / "ledger.jsonl").read_text() == before, "a finished sweep runs nothing again"


@pytest.mark.slow
def test_a_rerun_retries_failed_cells_and_keeps_finished_ones(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.ffn": ["relu", "gelu"]})
    ledger = Ledger(tmp_path / "tiny" / "ledger.jsonl")
    ledger.append({"cell": "ffn=relu,seed=0", "variant": "ffn=relu", "seed": 0, "status": "finished", "metrics": {},
                   "assignment": {"model.ffn": "relu"}})
    ledger.append({"cell": "ffn=gelu,seed=0", "variant": "ffn=gelu", "seed": 0, "status": "failed", "error": "x",
                   "assignment": {"model.ffn": "gelu"}})
    assert run_sweep(sweep, base, echo=lambda _: None) == {"ffn=relu,seed=0": "finished", "ffn=gelu,seed=0": "finished"}
    cells = [r["cell"] for r in ledger.records()]
    assert cells.count("ffn=relu,seed=0") == 1 and cells.count("ffn=gelu,seed=0") == 3


@pytest.mark.slow
def test_a_diverging_cell_is_recorded_and_the_sweep_goes_on(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"train.optimizer.lr": [0.003, 1.0e30]})
    base["train"].update(grad_clip=None, warmup_steps=0)
    statuses = run_sweep(sweep, base, echo=lambda _: None)
    assert statuses == {"lr=0.003,seed=0": "finished", "lr=1.0e+30,seed=0": "diverged"}
    record = Ledger(tmp_path / "tiny" / "ledger.jsonl").latest()["lr=1.0e+30,seed=0"]
    assert record["diverged_at"] >= 1 and record["metrics"] == {}


@pytest.mark.slow
def test_killing_the_sweep_and_running_it_again_finishes_only_the_missing_cells(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post", "pre", "res_post"]})
    base["wandb"]["mode"] = "disabled"
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump({**sweep.model_dump(mode="json"), "base": base}, sort_keys=False))
    ledger_path = tmp_path / "tiny" / "ledger.jsonl"
    command = [sys.executable, "-m", "zoo.cli", "sweep", str(file)]
    first = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while '"finished"' not in (ledger_path.read_text() if ledger_path.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)  # the sweep and the cell it is training
    first.wait(timeout=30)
    done_first = {r["cell"] for r in Ledger(ledger_path).records() if r["status"] == "finished"}
    assert 1 <= len(done_first) < 3
    subprocess.run(command, check=True, timeout=300, stdout=subprocess.DEVNULL)
    records = Ledger(ledger_path).records()
    assert {r["cell"] for r in records if r["status"] == "finished"} == {c.name for c in expand(sweep)}
    for cell in done_first:
        assert [r["status"] for r in records if r["cell"] == cell] == ["running", "finished"], "not run again"
    assert json.loads(ledger_path.read_text().splitlines()[-1])["status"] == "finished"


def test_cli_dry_run_lists_the_shards_cells_and_export_writes_the_file(tmp_path, capsys, monkeypatch):
    from zoo.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"name": "s", "grid": GRID, "seeds": [0, 1]}, sort_keys=False))
    main(["sweep", "s.yaml", "--dry-run", "--shard", "1/4"])
    lines = capsys.readouterr().out.splitlines()
    sweep = load_sweep("s.yaml")[0]
    assert lines[:-1] == [f"{c.name}  ->  {sweep.directory() / 'runs' / c.name}" for c in shard(expand(sweep), 1, 4)]
    assert lines[-1] == "4 cells of 16 in shard 1/4; folder sweeps/s" and not (tmp_path / "sweeps").exists()
    main(["sweep", "s.yaml", "--export", "wandb"])
    folder = tmp_path / "sweeps" / "s"
    assert (folder / "wandb_sweep.yaml").exists() and (folder / "exported_sweep.yaml").exists()
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "s.yaml", "--shard", "4/4", "--dry-run"])
    assert exit_info.value.code == 2 and "--shard 4/4" in capsys.readouterr().err


SHIPPED = sorted(p.name for p in (Path(__file__).parents[1] / "experiments").glob("*.yaml")
                 if any(f"\n{key}:" in p.read_text() for key in ("grid", "rows", "sizes")))
"""The sweep files (a grid, rows or sizes); the rest are experiments."""


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_sweeps_expand_into_valid_cells(name):
    sweep, base = load_sweep(Path(__file__).parents[1] / "experiments" / name)
    cells = expand(sweep)
    assert len(cells) == len({c.name for c in cells}) == math.prod(map(len, sweep.axes().values())) * len(sweep.seeds)
    for cell in cells:
        assert cell_experiment(sweep, base, cell).wandb.group == sweep.name


ROWS = {"baseline": {}, "gelu": {"model.ffn": "gelu"}, "deep": {"model.n_encoder_layers": 2, "model.d_ff": 16}}


def test_rows_are_one_at_a_time_changes_to_the_base_swept_as_the_grid_key_row():
    sweep = SweepSpec.model_validate({"name": "s", "rows": ROWS, "grid": {"model.norm": ["post", "pre"]}, "seeds": [0]})
    assert sweep.grid == {"row": ["baseline", "gelu", "deep"], "model.norm": ["post", "pre"]}
    assert SweepSpec.model_validate(sweep.model_dump()) == sweep, "the stored sweep validates to itself"
    cells = expand(sweep)
    assert [c.variant for c in cells[:3]] == ["row=baseline,norm=post", "row=baseline,norm=pre", "row=gelu,norm=post"]
    base = {"task": {"name": "copy"}, "model": {"d_model": 32, "n_heads": 2}}
    deep = cell_experiment(sweep, base, cells[4]).model
    assert (deep.n_encoder_layers, deep.d_ff, deep.norm) == (2, 16, "post")
    assert cell_experiment(sweep, base, cells[3]).model.ffn == "gelu"
    assert cell_experiment(sweep, base, cells[0]).model.n_encoder_layers == 6, "the baseline keeps the base's (default)"


@pytest.mark.parametrize("rows, grid, message", [
    ({"a": {"ffn": "gelu"}}, {}, "row 'a': key 'ffn' is not a dotted experiment field"),
    ({"a": {"model.ffn": "gelu"}}, {"model.ffn": ["relu", "gelu"]}, "row 'a': key 'model.ffn' is also a grid key"),
    ({"a b": {}}, {}, "row 'a b': its name is part of folder names"),
    ({"a": {"train.seed": 3}}, {}, "list seeds under `seeds`"),
    ({"a": {"model.window": 2, "model.attn.window": 4}}, {},
     "row 'a': keys 'model.window' and 'model.attn.window' set one setting"),
    ({"a": {"model.attn": {"window": 2}, "model.attn.window": 4}}, {},
     "row 'a': keys 'model.attn' and 'model.attn.window' set one setting"),
    ({}, {}, "a sweep needs at least one grid axis or row"),
])
def test_bad_rows_are_refused_with_the_row_and_key(rows, grid, message):
    with pytest.raises(ValidationError, match=re.escape(message)):
        SweepSpec.model_validate({"name": "s", "rows": rows, "grid": grid})


def test_a_size_that_gives_one_setting_twice_is_refused():
    sizes = {"small": {"model.d_model": 32, "model.window": 2, "model.attn.window": 4}, "base": {"model.d_model": 64}}
    with pytest.raises(ValidationError, match=re.escape("size 'small': keys 'model.window' and 'model.attn.window' set "
                                                        "one setting")):
        SweepSpec.model_validate({"name": "s", "sizes": sizes, "grid": {"model.norm": ["post", "pre"]}})


@pytest.mark.parametrize("fields, message", [
    ({"sizes": {"a": {"model.d_ff": 64}, "b": {"model.d_ff": 64, "model.n_heads": 2}}},
     "variants size=a and size=b train the same run (every field alike once defaults are filled in): sizes 'a' and "
     "'b' define one experiment"),
    ({"rows": {"baseline": {}, "same": {"model.norm": "post"}}},
     "variants row=baseline and row=same train the same run"),
    ({"rows": {"a": {"model.d_ff": 32}, "b": {"model.d_ff": 32}}, "grid": {"model.norm": ["post", "pre"]}},
     "variants row=a,norm=post and row=b,norm=post train the same run (every field alike once defaults are filled "
     "in): rows 'a' and 'b' define one experiment"),
])
def test_variants_that_train_the_same_run_are_refused(tmp_path, fields, message):
    """Two sizes or rows that define one model (a value and the base's own) would count one
    computation twice; the sweep file is refused on load, and run_sweep refuses it too."""
    sweep, base = tiny_sweep(tmp_path, fields.pop("grid", {}), **fields)
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump({**sweep.model_dump(mode="json"), "base": base}))
    with pytest.raises(zoo.ConfigError, match=re.escape(message)):
        load_sweep(file)
    with pytest.raises(zoo.ConfigError, match=re.escape(message)):
        run_sweep(sweep, base, echo=lambda _: None)
    assert not sweep.directory().exists(), "refused before anything is written"


@pytest.mark.slow
def test_compare_refuses_a_sweep_yaml_edited_after_its_cells_ran(tmp_path):
    """A size redefined by hand in the folder's sweep.yaml would put the old model's numbers under
    the new definition; `zoo sweep` refuses the same edit, and so does `zoo compare`."""
    sweep, base = tiny_sweep(tmp_path, {"size": ["a", "b"]}, sizes={"a": {"model.d_ff": 16}, "b": {"model.d_ff": 24}})
    base["wandb"]["mode"] = "disabled"
    run_sweep(sweep, base, echo=lambda _: None)
    saved = sweep.directory() / "sweep.yaml"
    data = yaml.safe_load(saved.read_text())
    assert compare(sweep.directory(), wandb_mode="disabled").rows
    data["sizes"]["b"]["model.d_ff"] = 48
    saved.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(zoo.ConfigError, match=r"cell size=b,seed=0 ran another experiment than sweep.yaml gives it now "
                                              r"\(model.d_ff: 24 recorded, 48 now\)"):
        compare(sweep.directory(), wandb_mode="disabled")


def test_a_quoted_number_in_a_tuned_list_is_said_to_be_one(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post", "pre"]}, tune={"train.optimizer.lr": [0.01, 0.1]},
                             metric="test/exact_match")
    file = tmp_path / "sweep.yaml"
    written = yaml.safe_dump({**sweep.model_dump(mode="json"), "base": base})
    file.write_text(written.replace("- 0.01\n", "- \"1e-3\"\n", 1))
    assert '"1e-3"' in file.read_text()
    with pytest.raises(zoo.ConfigError, match=re.escape("train.optimizer.lr: Input should be a valid number, got the "
                                                        "string '1e-3': a quoted number; write it without quotes")):
        load_sweep(file)
    with pytest.raises(zoo.ConfigError, match=r"model: d_model: Input should be a valid integer, got the string '64'"):
        zoo.specs.experiment.validate_experiment({"model": {"d_model": "64"}})
    with pytest.raises(zoo.ConfigError) as refused:
        zoo.specs.experiment.validate_experiment({"model": {"d_model": "wide"}})
    assert "quoted number" not in str(refused.value), "a word is no number"


def test_the_sweep_clock_gives_the_time_left_at_the_pace_so_far():
    now = [100.0]
    clock = SweepClock(4, clock=lambda: now[0])
    now[0] = 130.0
    assert clock.tick() == "30 s so far, about 1 min 30 s left", "three cells left at 30 s each"
    now[0] = 220.0
    assert clock.tick() == "2 min 00 s so far, about 2 min 00 s left"
    clock.tick()
    assert clock.tick() == "2 min 00 s in all"
