"""`zoo reproduce`: recorded cells trained again give every final metric to the last bit in the
recorded environment, and the start of the learning curve within rounding in another; a record
that was changed is caught, and results carry what reproduction needs."""

import importlib
import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from test_bad_input import cli_error
from test_sweep import tiny_sweep

import zoo
from zoo.cli import main
from zoo.provenance import ROUNDING
from zoo.sweep import Ledger, cell_experiment, run_sweep
from zoo.sweep.reproduce import EARLY_TOLERANCE, describe, reproduce
from zoo.sweep.retrain import cpu_capabilities

pytestmark = [pytest.mark.slow,  # trains whole runs, starts processes or runs benchmarks: not in the fast tier
              pytest.mark.usefixtures("warm_retraining")]

MAIN_JOB = Path(__file__).resolve().parents[1] / "experiments" / "results" / "seed-axes" / "ledger.jsonl"
MAIN_CELL = "norm=pre,position=sinusoidal,attention=fused,ffn=gelu,seed=0"


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
    main(["reproduce", str(finished_sweep), "--early", "norm=pre,seed=0"])  # a cell after the flag is a cell too
    assert capsys.readouterr().out.splitlines() == ["norm=pre,seed=0: the losses logged to step 20 match bit for bit",
                                                    "1 of 1 cells reproduce bit for bit"]


@pytest.fixture(scope="module")
def retrained() -> dict[str, object]:
    return {}


@pytest.fixture
def once(monkeypatch, retrained):
    """Each distinct retraining (experiment, threads, window, rounding) runs once in the module:
    training here is deterministic (test_every_recorded_cell_reproduces_bit_for_bit), so the tests
    of verdicts on edited records read the one real run of each."""
    from zoo.sweep import reproduce as module

    real = module.retrain

    def remembered(experiment, threads, scratch, until=None, environment=None, entry=None, replay=None):
        key = json.dumps([experiment, threads, until, environment, entry, str(replay)], sort_keys=True)
        if key not in retrained:
            retrained[key] = real(experiment, threads, scratch, until=until, environment=environment, entry=entry,
                                  replay=replay)
        return retrained[key].model_copy(deep=True)

    monkeypatch.setattr(module, "retrain", remembered)


def copied_ledger(finished_sweep, tmp_path) -> Ledger:
    shutil.copytree(finished_sweep.parent, tmp_path / "tiny", ignore=shutil.ignore_patterns("runs"))
    return Ledger(tmp_path / "tiny" / "ledger.jsonl")


def reproduce_exit(argv, capsys) -> tuple[int, str]:
    try:
        main(["reproduce", *argv])
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    return code, capsys.readouterr().out


def test_a_changed_record_is_caught_and_exits_1(finished_sweep, once, tmp_path, capsys):
    ledger = copied_ledger(finished_sweep, tmp_path)
    record = ledger.latest()["norm=pre,seed=0"]
    true_loss = record["metrics"]["eval/loss"]
    record["metrics"]["eval/loss"] = true_loss + 1e-12
    ledger.append(record)
    code, out = reproduce_exit([str(ledger.path)], capsys)
    assert code == 1
    assert (f"norm=pre,seed=0: DIFFERS in the recorded environment: eval/loss: {true_loss + 1e-12!r} recorded, "
            f"{true_loss!r} now") in out
    assert "norm=post,seed=0: every final metric matches" in out and "1 of 2 cells reproduce bit for bit" in out

    # the same values under other names: a metric the run no longer reports, one the record lacks
    record["metrics"] = {"eval/loss": true_loss, "eval/renamed": record["metrics"].pop("eval/token_acc"),
                         **{k: v for k, v in record["metrics"].items() if k != "eval/loss"}}
    ledger.append(record)
    code, out = reproduce_exit([str(ledger.path), "norm=pre,seed=0"], capsys)
    assert code == 1, out
    assert "eval/renamed: " in out and " recorded, not reported now; eval/token_acc: not in the record, " in out, out


def elsewhere(ledger: Ledger, cell: str, final_shift: float, curve_shift: float = 0.0, edit: bool = False,
              metric: str = "eval/token_acc") -> None:
    """Append the cell's record as first made, as if made elsewhere: another torch, a final metric
    and its first logged training loss moved by the given relative amounts. Another machine moves
    the final metric in the learning curve too (the evaluation at the last step, and the curve's
    mean with it); an `edit` moves the final metric alone. (The tiny run ends at step 20, inside
    the early window: its final token accuracy, unlike its final loss, is no early loss.)"""
    from zoo.metrics import curve_means

    record = next(row for row in map(json.loads, ledger.path.read_text().splitlines())
                  if row["cell"] == cell and row["status"] == "finished")
    record["environment"] = {**record["environment"], "torch_version": "0.0.0+elsewhere"}
    record["metrics"][metric] *= 1 + final_shift
    if not edit:
        for row in record["history"]:
            if row["train/step"] == record["steps"] and metric in row:
                row[metric] = record["metrics"][metric]
        curve = metric.replace("eval/", "eval_auc/")
        record["metrics"][curve] = curve_means(record["history"])[curve]
    first = next(row for row in record["history"] if "train/loss" in row)
    first["train/loss"] *= 1 + curve_shift
    ledger.append(record)


def test_another_environment_is_named_and_judged_by_the_start_of_the_learning_curve(finished_sweep, once, tmp_path, capsys):
    ledger = copied_ledger(finished_sweep, tmp_path)
    elsewhere(ledger, "norm=pre,seed=0", final_shift=2e-4)  # within what another environment owes the final loss
    code, out = reproduce_exit([str(ledger.path), "norm=pre,seed=0"], capsys)
    assert code == 0, out
    assert (f"norm=pre,seed=0: agrees in another environment (torch_version: 0.0.0+elsewhere recorded, {torch.__version__} "
            f"now): the losses logged to step 20 are within 0 of the record (tolerance 0.0001); final metrics' relative "
            "differences: eval/loss 0 (owed ") in out and "eval/token_acc 0.0002 (owed " in out
    assert "0 of 1 cells reproduce bit for bit; 1 more agree within another environment's tolerance" in out
    assert reproduce_exit([str(ledger.path), "norm=pre,seed=0", "--strict"], capsys)[0] == 1

    elsewhere(ledger, "norm=pre,seed=0", final_shift=-0.2)  # further than rounding here moves it, its curve agreeing
    code, out = reproduce_exit([str(ledger.path), "norm=pre,seed=0"], capsys)
    assert code == 3 and "norm=pre,seed=0: INCONCLUSIVE in another environment (torch_version: " in out, out
    assert ("the losses logged to step 20 are within 0 of the record (tolerance 0.0001), and the record agrees with its "
            "own learning curve, but eval/token_acc, eval_auc/token_acc moved further than 10 times what the other "
            "roundings here (") in out, out
    assert "another CPU vendor or generation can" in out

    elsewhere(ledger, "norm=pre,seed=0", final_shift=0.2, edit=True, metric="eval/loss")  # no environment writes it
    code, out = reproduce_exit([str(ledger.path), "norm=pre,seed=0"], capsys)
    assert code == 1 and "norm=pre,seed=0: DIFFERS: the record contradicts its own learning curve (eval/loss: " in out, out

    elsewhere(ledger, "norm=pre,seed=0", final_shift=0.0, curve_shift=1e-3)  # a change of the code shows early
    code, out = reproduce_exit([str(ledger.path), "norm=pre,seed=0"], capsys)
    assert code == 1 and "norm=pre,seed=0: DIFFERS beyond another environment (torch_version: " in out
    assert "rounding: the losses logged to step 20 are up to 0.001 of the record (tolerance 0.0001); " in out
    assert " here moves them by " in out, "the verdict says how far another rounding here moves the same losses"


def test_a_record_made_under_another_rounding_is_never_called_different_and_an_edit_still_is(tmp_path, once, capsys):
    """The cross-vendor case with the roundings this machine runs: the sensitive (post-norm) cell
    recorded under torch's DEFAULT kernels, reproduced under this CPU's own. Its final metrics may
    move by more than one other rounding here moved them; the verdict is then agrees or INCONCLUSIVE,
    never DIFFERS, while an edited final metric in the same record still DIFFERS."""
    import os
    import subprocess
    import sys

    import yaml

    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post"]})
    base["wandb"]["mode"] = "disabled"
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({**sweep.model_dump(mode="json"), "base": base}))
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "zoo.cli", "sweep", str(tmp_path / "sweep.yaml")], env=env, check=True,
                   capture_output=True, timeout=600)
    ledger = Ledger(tmp_path / "tiny" / "ledger.jsonl")
    recorded = ledger.latest()["norm=post,seed=0"]
    (result,) = reproduce(ledger.path, echo=lambda _: None)
    assert result.agrees or result.inconclusive, describe(result)
    assert not result.contradicted and (result.matches or result.environment), describe(result)
    recorded["metrics"]["eval/token_acc"] *= 0.5
    ledger.append(recorded)
    (edited,) = reproduce(ledger.path, echo=lambda _: None)
    assert not edited.agrees and not edited.inconclusive and "DIFFERS" in describe(edited), describe(edited)


def test_an_edited_first_loss_or_history_is_caught_in_the_recorded_environment(finished_sweep, once, tmp_path, capsys):
    """LR sensitivity reads the first loss, plots and eval_auc read the history: each is a result,
    compared like the final metrics."""
    ledger = copied_ledger(finished_sweep, tmp_path)
    record = ledger.latest()["norm=pre,seed=0"]
    true_first = record["first_loss"]
    ledger.append({**record, "first_loss": true_first / 2})
    for flags in ([], ["--early"]):
        code, out = reproduce_exit([str(ledger.path), *flags, "norm=pre,seed=0"], capsys)
        assert code == 1 and f"first_loss: {true_first / 2!r} recorded, {true_first!r} now" in out, out
    last = record["history"][-1]
    late = {**last, "eval/token_acc": last["eval/token_acc"] / 2}
    ledger.append({**record, "history": [*record["history"][:-1], late]})
    code, out = reproduce_exit([str(ledger.path), "norm=pre,seed=0"], capsys)
    assert code == 1 and f"eval/token_acc at step {int(last['train/step'])}: {late['eval/token_acc']!r} recorded" in out


def test_an_edited_first_loss_is_caught_in_another_environment(finished_sweep, once, tmp_path, capsys):
    ledger = copied_ledger(finished_sweep, tmp_path)
    record = ledger.latest()["norm=pre,seed=0"]
    record["environment"] = {**record["environment"], "torch_version": "0.0.0+elsewhere"}
    ledger.append({**record, "first_loss": record["first_loss"] * (1 + 1e-3)})
    code, out = reproduce_exit([str(ledger.path), "--early", "norm=pre,seed=0"], capsys)
    assert code == 1 and "are up to 0.001 of the record (tolerance 0.0001)" in out, out


def test_a_sweep_file_changed_since_the_record_is_refused_field_by_field(finished_sweep, once, tmp_path, capsys):
    """The experiment a cell ran is in its record: a sweep.yaml edited since is named field by
    field before anything trains (the issue's schedule edited to change only after warmup, on a
    record made elsewhere, had passed as "agrees")."""
    ledger = copied_ledger(finished_sweep, tmp_path)
    elsewhere(ledger, "norm=pre,seed=0", final_shift=0.0)
    sweep_file = ledger.path.parent / "sweep.yaml"
    sweep_file.write_text(sweep_file.read_text().replace("schedule: constant", "schedule: inverse_sqrt"))
    code, out = reproduce_exit([str(ledger.path), "norm=pre,seed=0"], capsys)
    assert code == 1, out
    assert ("norm=pre,seed=0: NOT REPRODUCED: the experiment its sweep file gives is not the one it ran "
            "(train.schedule: constant recorded, inverse_sqrt now)") in out, out


def test_records_carry_what_reproduction_needs(finished_sweep):
    record = json.loads(finished_sweep.read_text().splitlines()[-1])
    assert record["threads"] >= 1
    assert set(record["environment"]) == {"zoo_version", "zoo_commit", *ROUNDING}
    assert record["experiment"]["model"]["norm"] == "pre" and record["experiment"]["train"]["steps"] == 20
    assert record["environment"]["torch_version"] == torch.__version__
    assert record["environment"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert " family " in record["environment"]["cpu"] and " model " in record["environment"]["cpu"]


def test_reproduce_says_what_it_cannot_do(finished_sweep, once, tmp_path, capsys):
    assert "no finished cell 'norm=sandwich,seed=0'" in cli_error(["reproduce", str(finished_sweep), "norm=sandwich,seed=0"],
                                                                  capsys)
    assert "only task.* (where the data is) may change" in cli_error(
        ["reproduce", str(finished_sweep), "--set", "model.d_model=64"], capsys)
    ledger = copied_ledger(finished_sweep, tmp_path / "copy")
    record = ledger.latest()["norm=pre,seed=0"]
    ledger.append({**record, "metrics": {}})
    code, out = reproduce_exit([str(ledger.path)], capsys)
    assert code == 1 and "norm=pre,seed=0: NOT REPRODUCED: its record holds no final metric" in out
    for name in ("norm=pre,seed=0", "norm=post,seed=0"):
        ledger.append({**ledger.latest()[name], "status": "running", "metrics": {}})
    assert "holds no finished cell of its sweep's grid: nothing to reproduce" in cli_error(["reproduce", str(ledger.path)],
                                                                                           capsys)
    damaged = copied_ledger(finished_sweep, tmp_path / "damaged")
    lines = damaged.path.read_text().split("\n")
    finished = next(i for i, line in enumerate(lines) if '"norm=pre,seed=0"' in line and '"finished"' in line)
    lines[finished] = lines[finished][:-40]  # its last characters lost
    damaged.path.write_text("\n".join(lines))
    err = cli_error(["reproduce", str(damaged.path), "norm=pre,seed=0"], capsys)
    assert "no finished cell 'norm=pre,seed=0'" in err
    assert f"(1 damaged line(s) of the ledger were left out, which may be that cell's: line {finished + 1}: " in err
    (tmp_path / "lonely").mkdir()
    (tmp_path / "lonely" / "ledger.jsonl").write_text("")
    with pytest.raises(zoo.ConfigError, match=r"no sweep\.yaml beside the ledger"):
        reproduce(tmp_path / "lonely" / "ledger.jsonl")


def test_a_cell_of_the_committed_main_job_reproduces_on_any_machine(monkeypatch):
    """The README's main-job tables come from this ledger; one of its cells, trained again here:
    bit for bit where this is the recorded environment; elsewhere the start of its curve within
    rounding and every final metric equal to what its own learning curve holds, so never DIFFERS.
    Every final metric of this cell is one its curve vouches for, so the other roundings' retrainings
    could only decide between agrees and INCONCLUSIVE (both held here): they are left out, and
    exercised on the tiny cells above (each is a whole training of this cell: 100 s and more)."""
    from zoo.sweep import reproduce as module

    monkeypatch.setattr(module, "other_roundings", lambda threads: [])
    (result,) = reproduce(MAIN_JOB, [MAIN_CELL], echo=lambda _: None)
    assert result.matches or (result.environment and result.early_agrees and not result.contradicted
                              and not result.edited), describe(result)
    if not result.matches:
        assert set(result.vouched) == set(result.relative), "no final metric left to the probes alone"


def test_the_main_job_cell_agrees_under_every_cpu_capability_and_a_change_of_the_code_does_not(monkeypatch, capsys):
    """experiments/benchmarks/rounding.py on the committed main-job cell's early window (to step
    20): under every CPU capability this CPU runs (torch's detection and the levels below it) its
    losses stay within the tolerance of the record, while a changed loss (z-loss 1e-4, label
    smoothing 0.1) or initialization (Xavier gain 1.1) moves the same losses by more than three
    times it. A capability this CPU lacks is not tried, and the test says which."""
    monkeypatch.syspath_prepend(str(MAIN_JOB.parents[2] / "benchmarks"))
    result = importlib.import_module("rounding").main(["--ledger", "seed-axes"])
    measured, tried, not_tried = result["results"]["seed-axes"], *cpu_capabilities()
    capsys.readouterr()
    for level, why in not_tried.items():
        warnings.warn(f"CPU capability {level} not tried: {why}", stacklevel=1)
    assert result["capabilities_not_tried"] == not_tried
    assert measured["window"] == 20 and measured["cell"] == "norm=post,position=sinusoidal,attention=per_head,ffn=relu,seed=0"
    gaps = {label: max(run["by_step"].values()) for label, run in measured["gaps"].items()}
    capabilities = {label: gap for label, gap in gaps.items() if label.startswith("capability")}
    assert list(capabilities) == [f"capability {level}" for level in tried], gaps
    assert all(gap <= EARLY_TOLERANCE / 3 for gap in capabilities.values()), gaps
    assert [run["ran_as"].lower() for label, run in measured["gaps"].items() if label in capabilities] == list(tried)
    for change in ("z_loss 1e-4", "label_smoothing 0.1", "Xavier gain 1.1"):
        assert gaps[change] > 3 * EARLY_TOLERANCE, (change, gaps)


def shifted(record, factors: dict[int, float]):
    """The record's history with the losses logged at each given step scaled by its factor."""
    history = [{key: value * factors.get(int(row["train/step"]), 1.0) if key in ("train/loss", "eval/loss") else value
                for key, value in row.items()} for row in record.history]
    return record.model_copy(update={"history": history})


@pytest.mark.parametrize(("probe_factor", "verdict"), [(1 + 3e-4, "INCONCLUSIVE"), (1 + 1e-7, "DIFFERS")])
def test_past_the_tolerance_another_rounding_here_decides_between_differs_and_inconclusive(
        finished_sweep, monkeypatch, probe_factor, verdict):
    """Elsewhere and past the tolerance, the cell is trained once more here with another rounding:
    if that alone passes the tolerance, no tolerance can tell a change of the code from another
    machine for this cell, and the verdict says so (naming the step) instead of DIFFERS."""
    from zoo.sweep import reproduce as module

    sweep, base, finished = module.recorded_cells(finished_sweep, [])
    cell, record = finished["norm=pre,seed=0"]
    elsewhere_record = record.model_copy(update={"environment": {**record.environment, "cpu_capability": "ELSEWHERE"}})
    recorded_with_a_change = shifted(elsewhere_record, {10: 1 + 1e-3})
    runs = iter([record, shifted(record, {20: probe_factor})])  # the run again, then the probe's other rounding
    monkeypatch.setattr(module, "retrain", lambda *args, **kwargs: next(runs))
    outcome = module.rerun(cell_experiment(sweep, base, cell).model_dump(mode="json"), recorded_with_a_change,
                           finished_sweep.parent, early=True)
    said = describe(outcome)
    assert not outcome.agrees and said.startswith(f"norm=pre,seed=0: {verdict} "), said
    assert "the losses logged to step 20 are up to 0.001 of the record (tolerance 0.0001)" in said, said
    if verdict == "INCONCLUSIVE":
        assert outcome.inconclusive and outcome.amplified_at == 20
        assert "this cell amplifies rounding past the tolerance by step 20" in said and "moves them by 0.0003" in said
    else:
        assert not outcome.inconclusive and outcome.amplified_at is None and "moves them by 1e-07" in said




def test_an_environment_field_the_record_lacks_is_said_once_as_not_recorded():
    """`cpu: not recorded recorded` read as a stutter: a field the record lacks says so once."""
    from zoo.sweep.record_differences import environment_changes

    assert environment_changes({"torch_version": "2.13.0", "device": "cpu"}, {"torch_version": "2.13.0", "device": "cpu",
                                                                             "cpu": "AuthenticAMD family 25"}) == [
        "cpu: not recorded, AuthenticAMD family 25 now"]
    assert environment_changes({"cpu": "A", "blas": "x"}, {"cpu": "B", "blas": "x"})[0] == "cpu: A recorded, B now"
