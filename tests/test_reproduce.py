"""`zoo reproduce`: recorded cells trained again give every final metric to the last bit, a record
that was changed is caught, and results carry what reproduction needs."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from test_bad_input import cli_error
from test_sweep import tiny_sweep

import zoo
from zoo.cli import main
from zoo.sweep import Ledger, run_sweep
from zoo.sweep.reproduce import describe, reproduce


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory):
    """A tiny sweep trained once for the module; a test that changes it works on a copy."""
    folder = tmp_path_factory.mktemp("reproduce")
    sweep, base = tiny_sweep(folder, {"model.norm": ["post", "pre"]})
    base["wandb"]["mode"] = "disabled"
    run_sweep(sweep, base, echo=lambda _: None)
    return folder / "tiny" / "ledger.jsonl"


def test_every_recorded_cell_reproduces_bit_for_bit(finished_sweep, capsys):
    said = []
    results = reproduce(finished_sweep, echo=said.append)
    assert [r.cell for r in results] == ["norm=post,seed=0", "norm=pre,seed=0"] and all(r.matches for r in results)
    assert said[-1] == "2 of 2 cells reproduce bit for bit"
    main(["reproduce", str(finished_sweep), "norm=pre,seed=0"])
    assert "norm=pre,seed=0: every final metric matches bit for bit" in capsys.readouterr().out


def test_a_changed_record_is_caught_and_exits_1(finished_sweep, tmp_path, capsys):
    shutil.copytree(finished_sweep.parent, tmp_path / "tiny", ignore=shutil.ignore_patterns("runs"))
    ledger = Ledger(tmp_path / "tiny" / "ledger.jsonl")
    record = ledger.latest()["norm=pre,seed=0"]
    true_loss = record["metrics"]["eval/loss"]
    record["metrics"]["eval/loss"] = true_loss + 1e-12
    ledger.append(record)
    with pytest.raises(SystemExit) as exit_info:
        main(["reproduce", str(ledger.path)])
    out = capsys.readouterr().out
    assert exit_info.value.code == 1
    assert f"norm=pre,seed=0: DIFFERS: eval/loss: {true_loss + 1e-12!r} recorded, {true_loss!r} now" in out
    assert "norm=post,seed=0: every final metric matches" in out and "1 of 2 cells reproduce bit for bit" in out


def test_records_carry_what_reproduction_needs(finished_sweep):
    record = json.loads(finished_sweep.read_text().splitlines()[-1])
    assert record["threads"] >= 1
    assert set(record["environment"]) == {"zoo_version", "zoo_commit", "torch_version", "python_version", "device"}
    assert record["environment"]["torch_version"] == torch.__version__


def test_reproduce_says_what_it_cannot_do(finished_sweep, tmp_path, capsys):
    assert "no finished cell 'norm=sandwich,seed=0'" in cli_error(["reproduce", str(finished_sweep), "norm=sandwich,seed=0"],
                                                                  capsys)
    assert "only task.* (where the data is) may change" in cli_error(
        ["reproduce", str(finished_sweep), "--set", "model.d_model=64"], capsys)
    (tmp_path / "lonely").mkdir()
    (tmp_path / "lonely" / "ledger.jsonl").write_text("")
    with pytest.raises(zoo.ConfigError, match=r"no sweep\.yaml beside the ledger"):
        reproduce(tmp_path / "lonely" / "ledger.jsonl")


def test_a_cell_of_the_committed_main_job_reproduces_bit_for_bit():
    """The README's main-job tables come from this ledger; one of its cells, trained again here."""
    ledger = Path(__file__).resolve().parents[1] / "experiments" / "results" / "seed-axes" / "ledger.jsonl"
    (result,) = reproduce(ledger, ["norm=pre,position=sinusoidal,attention=fused,ffn=gelu,seed=0"], echo=lambda _: None)
    assert result.matches, describe(result)
