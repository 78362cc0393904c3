"""Sweeps lose and fake nothing: injective cell names, one process a shard, signals reach the
training children, a changed base is refused, and `zoo compare` reports what it leaves out."""

import json
import os
import resource
import signal
import subprocess
import sys

import pytest
import yaml
from test_bad_input import cli_error
from test_run_safety import hold_lock
from test_sweep import tiny_sweep

import zoo
from zoo.cli import main
from zoo.compare import compare
from zoo.sweep import Ledger, SweepSpec, expand, load_sweep, run_sweep
from zoo.sweep.names import value_text


def test_values_that_differ_only_in_unsafe_characters_get_distinct_readable_names(tmp_path):
    sweep = SweepSpec(name="s", grid={"task.alphabet": ["abcd!", "abcd?", "abcd_"]}, out_dir=str(tmp_path))
    names = [cell.name for cell in expand(sweep)]
    assert len(set(names)) == 3 and names[2] == "alphabet=abcd_,seed=0"
    assert all(name.startswith("alphabet=abcd_~") for name in names[:2]), names
    assert value_text(0.001) == "0.001" and value_text("pre") == "pre", "safe values read as they are"


@pytest.mark.parametrize("values", [["abAB", "abab"], [1, "1"], [True, "true"]])
def test_values_that_would_share_a_folder_are_an_error_at_expansion(tmp_path, values, capsys):
    """Letter case counts as the same folder too: macOS and Windows file systems ignore it."""
    spec = {"name": "clash", "grid": {"task.alphabet": values}, "out_dir": str(tmp_path)}
    with pytest.raises(zoo.ConfigError, match="would share the folder"):
        expand(SweepSpec.model_validate(spec))
    (tmp_path / "clash.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", str(tmp_path / "clash.yaml"), "--dry-run"])
    assert exit_info.value.code == 2 and "would share the folder" in capsys.readouterr().err


@pytest.mark.slow
def test_the_alphabet_sweep_of_the_issue_trains_two_cells_with_their_own_results(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"task.alphabet": ["abcd!", "abcd?"]})
    base["wandb"]["mode"] = "disabled"
    statuses = run_sweep(sweep, base, echo=lambda _: None)
    assert sorted(statuses.values()) == ["finished", "finished"]
    records = [r for r in Ledger(tmp_path / "tiny" / "ledger.jsonl").records() if r["status"] == "finished"]
    assert [r["steps"] for r in records] == [20, 20], "each cell trained; none resumed the other's checkpoint"
    assert len({json.dumps(r["history"]) for r in records}) == 2


def test_a_second_sweep_process_on_the_same_shard_is_refused_with_its_pid(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post"]})
    holder = hold_lock(tmp_path / "tiny", ".sweep-0of1.lock")
    try:
        with pytest.raises(zoo.RunConflict, match=rf"another zoo process \(pid {holder.pid}\) holds shard 0/1"):
            run_sweep(sweep, base, echo=lambda _: None)
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_a_changed_base_experiment_is_refused_in_an_existing_sweep_folder(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post"]})
    base["wandb"]["mode"] = "disabled"
    run_sweep(sweep, base, echo=lambda _: None)
    changed = {**base, "train": {**base["train"], "optimizer": {"lr": 0.01}}}
    with pytest.raises(zoo.ConfigError, match=r"train\.optimizer\.lr: 0\.003 before, 0\.01 now"):
        run_sweep(sweep, changed, echo=lambda _: None)
    grown = sweep.model_copy(update={"grid": {"model.norm": ["post", "pre"]}})
    assert run_sweep(grown, base, echo=lambda _: None) == {"norm=post,seed=0": "finished", "norm=pre,seed=0": "finished"}


@pytest.mark.slow
def test_sigterm_to_the_sweep_reaches_its_training_child_and_leaves_no_orphan(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post", "pre"]})
    base["wandb"]["mode"] = "disabled"
    base["train"].update(steps=5000, checkpoint_every=1000)
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump({**sweep.model_dump(mode="json"), "base": base}, sort_keys=False))
    process = subprocess.Popen([sys.executable, "-m", "zoo.cli", "sweep", str(file)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    log = tmp_path / "tiny" / "runs" / "norm=post,seed=0" / "log.txt"
    while "step 10/5000" not in (log.read_text() if log.exists() else ""):
        assert process.poll() is None, process.communicate()
    child = int((log.parent / ".lock").read_text())
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert "stopped by SIGTERM" in err and "run the same command to finish them" in err
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # the child is gone, not an orphan still training
    latest = Ledger(tmp_path / "tiny" / "ledger.jsonl").latest()
    assert latest["norm=post,seed=0"]["status"] == "interrupted" and "norm=pre,seed=0" not in latest
    assert (log.parent / "checkpoint.pt").exists(), "the child checkpointed its last step before it stopped"


def test_the_sweep_metric_must_be_one_the_task_reports(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump({"task": {"name": "reverse"}}))
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump({"name": "s", "base": "base.yaml", "grid": {"model.norm": ["post"]},
                                    "metric": "long/exact_match"}))
    with pytest.raises(zoo.ConfigError, match=r"metric 'long/exact_match' is not reported by task 'reverse'.*"
                                              r"choices: eval/loss, eval/token_acc, eval/exact_match"):
        load_sweep(file)
    sweep, _ = load_sweep(file, ["task.long_eval_min_len=20", "task.long_eval_max_len=24"])
    assert sweep.metric == "long/exact_match" and sweep.goal == "max"
    assert load_sweep(file, ["metric=eval/loss"])[0].goal == "min", "a loss is minimized unless the file says otherwise"


def write_ledger(tmp_path, grid, seeds=(0,)):
    sweep = SweepSpec(name="k", grid=grid, seeds=list(seeds), out_dir=str(tmp_path))
    folder = sweep.directory()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sweep.yaml").write_text(yaml.safe_dump({**sweep.model_dump(mode="json"), "base": {}}, sort_keys=False))
    ledger = Ledger(folder / "ledger.jsonl")
    for i, cell in enumerate(expand(sweep)):
        ledger.append({"cell": cell.name, "variant": cell.variant, "seed": cell.seed,
                       "assignment": dict(cell.assignment), "status": "finished",
                       "metrics": {"eval/exact_match": 0.5 + 0.1 * i, "eval/loss": 1.0 - 0.1 * i}})
    return sweep


def test_compare_reports_a_damaged_line_by_its_number(tmp_path):
    sweep = write_ledger(tmp_path, {"model.norm": ["post", "pre"]})
    ledger = sweep.directory() / "ledger.jsonl"
    lines = ledger.read_text().splitlines()
    ledger.write_text("\n".join([lines[0], lines[1][: len(lines[1]) // 2]]) + "\n")  # cut mid-JSON
    notes = []
    report = compare(sweep.directory(), wandb_mode="disabled", echo=notes.append)
    assert any(f"{ledger}:2: a damaged line was left out" in n for n in notes), notes
    assert [row.variant for row in report.rows] == ["norm=post"]
    assert "ledger.jsonl:2: a damaged line" in report.markdown.read_text()


def test_compare_handles_a_grid_that_grew_a_key(tmp_path):
    write_ledger(tmp_path, {"model.norm": ["post", "pre"]})
    grown = write_ledger(tmp_path, {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]})
    notes = []
    report = compare(grown.directory(), wandb_mode="disabled", echo=notes.append)
    assert len(report.rows) == 4 and [e.label for e in report.effects] == ["norm", "ffn"]
    assert any("2 ledger record(s) of cells outside the current grid" in n for n in notes), notes


def test_compare_rejects_an_unknown_metric_naming_the_logged_ones(tmp_path, capsys):
    sweep = write_ledger(tmp_path, {"model.norm": ["post", "pre"]})
    with pytest.raises(zoo.ConfigError, match=r"unknown metric 'eval/exact_macth'; did you mean 'eval/exact_match'\? "
                                              r"choices: eval/exact_match, eval/loss"):
        compare(sweep.directory(), wandb_mode="disabled", metric="eval/exact_macth")
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(sweep.directory()), "--metric", "eval/bleu", "--wandb-mode", "disabled"])
    assert exit_info.value.code == 2 and "unknown metric 'eval/bleu'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_row_redefined_after_it_ran_is_refused_not_matched_by_its_name(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {}, rows={"a": {"model.ffn": "gelu"}, "b": {}})
    base["wandb"]["mode"] = "disabled"
    assert set(run_sweep(sweep, base, echo=lambda _: None).values()) == {"finished"}
    ledger = (tmp_path / "tiny" / "ledger.jsonl").read_text()
    def with_rows(rows):
        return SweepSpec.model_validate({**sweep.model_dump(mode="json"), "grid": {}, "rows": rows})

    changed = with_rows({"a": {"model.ffn": "swiglu"}, "b": {}})
    with pytest.raises(zoo.ConfigError, match=r"row 'a' was \{'model.ffn': 'gelu'\} when its cells ran and is "
                                              r"\{'model.ffn': 'swiglu'\} now"):
        run_sweep(changed, base, echo=lambda _: None)
    assert (tmp_path / "tiny" / "ledger.jsonl").read_text() == ledger, "nothing ran, nothing recorded"
    renamed = with_rows({"a": {"model.ffn": "gelu"}, "b": {}, "c": {"model.ffn": "swiglu"}})
    assert run_sweep(renamed, base, echo=lambda _: None)["row=c,seed=0"] == "finished", "a new name is a new row"


@pytest.mark.slow
def test_a_done_cell_whose_folder_holds_another_experiment_is_refused(tmp_path):
    """The ledger's word that a cell is done holds only for the experiment its folder trained."""
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post", "pre"]})
    base["wandb"]["mode"] = "disabled"
    run_sweep(sweep, base, echo=lambda _: None)
    saved = tmp_path / "tiny" / "runs" / "norm=pre,seed=0" / "experiment.yaml"
    experiment = yaml.safe_load(saved.read_text())
    experiment["model"]["ffn"] = "gelu"  # as if a row or a value of the same name had meant this
    saved.write_text(yaml.safe_dump(experiment))
    with pytest.raises(zoo.ConfigError, match=r"cell norm=pre,seed=0 is done, but .* holds a run of another "
                                              r"experiment \(model.ffn"):
        run_sweep(sweep, base, echo=lambda _: None)


def test_compare_names_a_finished_cell_that_lacks_the_metric(tmp_path):
    """The probe's case: a finished cell without eval/exact_match counted as finished, then dropped."""
    sweep = write_ledger(tmp_path, {"model.norm": ["post", "pre"]})
    ledger = Ledger(sweep.directory() / "ledger.jsonl")
    cell = expand(sweep)[1]
    ledger.append({"cell": cell.name, "variant": cell.variant, "seed": cell.seed, "assignment": dict(cell.assignment),
                   "status": "finished", "metrics": {"eval/loss": 0.7}})
    notes = []
    report = compare(sweep.directory(), wandb_mode="disabled", echo=notes.append)
    said = "1 finished cell(s) logged no final 'eval/exact_match' and are left out of the comparison: norm=pre,seed=0"
    assert f"zoo compare: {said}" in notes and said in report.markdown.read_text()
    assert [row.variant for row in report.rows if row.metric.n] == ["norm=post"]
    notes.clear()
    compare(sweep.directory(), wandb_mode="disabled", metric="eval/loss", echo=notes.append)
    assert not any("left out" in n for n in notes), "eval/loss is in every cell"


@pytest.mark.slow
def test_a_plot_that_cannot_be_written_keeps_the_previous_one_and_names_the_file(tmp_path):
    """A real file-size limit (EFBIG, as a full disk) in a child `zoo compare`: the probe found a
    truncated curves.png where a valid one was and a message naming no file."""
    sweep = write_ledger(tmp_path, {"model.norm": ["post", "pre"]}, seeds=(0, 1))
    compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)
    curves = sweep.directory() / "curves.png"
    before = curves.read_bytes()
    assert before.startswith(b"\x89PNG") and len(before) > 10_000

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000))

    done = subprocess.run([sys.executable, "-m", "zoo.cli", "compare", str(sweep.directory()), "--wandb-mode",
                           "disabled"], capture_output=True, text=True, preexec_fn=limit_file_size, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"zoo: {curves}: could not be written (File too large)" in done.stderr, done.stderr
    assert curves.read_bytes() == before
    assert not list(sweep.directory().glob(".*.tmp")), "no partial temporary file is left"


@pytest.mark.parametrize("grid, rows", [
    ({"model.window": [2, 4], "model.attn.window": [2, 8]}, {}),
    ({"model.attn": [{"window": 2}, {"window": 4}], "model.window": [2, 4]}, {}),
    ({"model.window": [2, 4]}, {"wide": {"model.attn.window": 8}}),
])
def test_a_grid_that_sets_one_setting_twice_is_refused_before_anything_runs(tmp_path, capsys, grid, rows):
    """A switch's flat key beside its group's (or a group beside its field) would train cells that
    their names misdescribe: refused at load, so --dry-run says it too."""
    sweep = {"name": "twice", "base": {"task": {"name": "copy"}}, "grid": grid, "out_dir": str(tmp_path)}
    if rows:
        sweep["rows"] = {"base": {}, **rows}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    said = cli_error(["sweep", str(tmp_path / "sweep.yaml"), "--dry-run"], capsys)
    assert "set one setting" in said or "is the grid key 'model.window''s setting" in said, said
    assert not (tmp_path / "twice").exists()


@pytest.mark.parametrize("planted", ["ledger.jsonl", "sweep.yaml", "report.md"])
def test_a_sweep_file_planted_as_a_link_is_refused_by_name_and_its_target_untouched(tmp_path, planted):
    """A link in the sweep folder would have the sweep append to (or read) whatever it points at:
    here a shell script outside the folder, which a grid string holding `$(...)` would then fill."""
    sweep = write_ledger(tmp_path, {"model.norm": ["post", "pre"]})
    folder = sweep.directory()
    script = tmp_path / "outside.sh"
    script.write_text("#!/bin/sh\necho hello\n")
    target = folder / planted
    if target.exists():
        script.write_bytes(target.read_bytes())  # the link must be refused, not its content
    before = script.read_bytes()
    target.unlink(missing_ok=True)
    target.symlink_to(script)
    with pytest.raises(zoo.ConfigError, match=rf"{planted}: a symbolic link \(to {script}\).*replace the link"):
        compare(folder, wandb_mode="disabled", echo=lambda _: None)
    if planted == "ledger.jsonl":
        with pytest.raises(zoo.ConfigError, match=r"ledger\.jsonl: a symbolic link"):
            Ledger(target).append({"cell": "x", "status": "running"})
    assert script.read_bytes() == before and target.is_symlink()


def test_a_sweep_run_refuses_a_planted_ledger_before_any_cell_trains(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post"]})
    folder = sweep.directory()
    folder.mkdir(parents=True)
    script = tmp_path / "outside.sh"
    script.write_text("#!/bin/sh\n")
    (folder / "ledger.jsonl").symlink_to(script)
    with pytest.raises(zoo.ConfigError, match=r"ledger\.jsonl: a symbolic link"):
        run_sweep(sweep, base, workers=1, echo=lambda _: None)
    assert script.read_text() == "#!/bin/sh\n" and not (folder / "runs").exists()


def test_values_a_metric_cannot_take_are_named_and_left_out_not_ranked(tmp_path):
    """A loss of -3 would rank first, 1e39 and 1e200 overflow float32, 1e308 made the margin search
    loop forever: each is named and left out, as a non-finite value is."""
    sweep = SweepSpec(name="k", grid={"model.norm": ["post", "pre", "sandwich", "peri"]}, seeds=[0, 1, 2],
                      metric="eval/loss", out_dir=str(tmp_path))
    folder = sweep.directory()
    folder.mkdir(parents=True)
    (folder / "sweep.yaml").write_text(yaml.safe_dump({**sweep.model_dump(mode="json"), "base": {}}, sort_keys=False))
    ledger = Ledger(folder / "ledger.jsonl")
    odd = {("post", 0): -3.0, ("pre", 1): 1e39, ("sandwich", 2): 1e200, ("peri", 0): 1e308}
    for cell in expand(sweep):
        norm = dict(cell.assignment)["model.norm"]
        loss = odd.get((norm, cell.seed), 2.0 + 0.1 * cell.seed + 0.01 * len(norm))
        ledger.append({"cell": cell.name, "variant": cell.variant, "seed": cell.seed, "assignment": dict(cell.assignment),
                       "status": "finished", "metrics": {"eval/loss": loss, "eval/exact_match": 0.5}})
    notes = []
    report = compare(folder, wandb_mode="disabled", echo=notes.append)
    text = "\n".join(notes)
    assert "cell norm=post,seed=0: eval/loss -3: outside loss's range [0, inf); left out" in text, text
    assert "cell norm=pre,seed=1: eval/loss 1e+39: cannot be held in float32" in text
    assert "cell norm=sandwich,seed=2: eval/loss 1e+200: cannot be held in float32" in text
    assert "cell norm=peri,seed=0: eval/loss 1e+308: cannot be held in float32" in text
    rows = {row.variant: row for row in report.rows}
    assert all(row.nonfinite == 1 for row in rows.values()), "each left out as a non-finite value is"
    assert all(row.metric.mean is None or not row.metric.mean < 0 for row in rows.values())


def test_the_margin_search_ends_on_values_near_floats_end():
    from zoo.compare.exact import smallest_margin
    assert smallest_margin([1e308, 1e308, -1e308, 1e308, 1e308, 1e308]) is None
    assert smallest_margin([0.01, 0.02, -0.01, 0.015, 0.0, 0.01]) > 0


def test_a_result_a_metric_cannot_hold_is_not_adopted_into_the_ledger(tmp_path):
    from zoo.records import RunRecord, write_result
    from zoo.sweep.runner import train_cell
    from zoo.sweep.spec import cell_experiment

    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post"]})
    cell, = expand(sweep)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_result(run_dir / "result.json", RunRecord(status="finished", metrics={"eval/loss": 1e308}))
    ledger = Ledger(tmp_path / "ledger.jsonl")
    record = train_cell(cell_experiment(sweep, base, cell), run_dir, cell, ledger, workers=None)
    assert record.status == "failed" and "eval/loss 1e+308: cannot be held in float32; not adopted" in record.error
    assert ledger.read().records[-1].metrics == {} and (run_dir / "result.json").exists(), "nothing lost"


def test_a_margin_of_a_metric_the_sweep_never_reports_is_refused_with_a_did_you_mean(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump({"train": {"steps": 1}}))
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump({"name": "s", "base": "base.yaml", "grid": {"model.norm": ["post", "pre"]},
                                    "margins": {"eval/exact_macth": 0.01}}))
    with pytest.raises(zoo.ConfigError, match=r"margins: metric 'eval/exact_macth'; did you mean 'eval/exact_match'\? "
                                              r"choices: .*eval/loss"):
        load_sweep(file)
    sweep = write_ledger(tmp_path / "saved", {"model.norm": ["post", "pre"]})  # a saved sweep edited by hand
    saved = yaml.safe_load((sweep.directory() / "sweep.yaml").read_text())
    (sweep.directory() / "sweep.yaml").write_text(yaml.safe_dump({**saved, "margins": {"eval/bleu": 1.0}}))
    notes = []
    compare(sweep.directory(), wandb_mode="disabled", echo=notes.append)
    assert any("margins: metric 'eval/bleu'" in note and "never applied" in note for note in notes), notes


def test_a_second_result_line_for_a_cell_is_said_not_silently_taken(tmp_path):
    sweep = write_ledger(tmp_path, {"model.norm": ["post", "pre"]})
    ledger = Ledger(sweep.directory() / "ledger.jsonl")
    record = ledger.latest()["norm=pre,seed=0"]
    ledger.append({**record, "metrics": {**record["metrics"], "eval/exact_match": 0.99}})
    notes = []
    report = compare(sweep.directory(), wandb_mode="disabled", echo=notes.append)
    assert any("cell norm=pre,seed=0 has 2 result lines (2, 3); the last, line 3, stands for it (the earlier stay in "
               "the ledger, not compared)" in note for note in notes), notes
    assert {row.variant: row.metric.mean for row in report.rows}["norm=pre"] == 0.99
    assert not any("norm=post,seed=0 has" in note for note in notes)
