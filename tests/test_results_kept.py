"""No result is lost or faked by a corpus line, a cell label or a ledger line, and `zoo compare`
ranks only what is finite and says how much of the grid it rests on."""

import gzip
import json
import math
import subprocess
import sys

import pytest
import yaml
from sweepkit import write_sweep
from test_sweep import tiny_sweep

import zoo
from zoo.cli import main
from zoo.compare import compare
from zoo.sweep import Ledger, SweepSpec, expand, run_sweep
from zoo.tasks.corpus import read_lines, read_split

INSIDE = ["\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85"]
"""Characters that str.splitlines() ends a line at, but a corpus file does not."""


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_corpus_line_ends_at_newline_alone_and_keeps_every_other_character(tmp_path, suffix):
    sources = [f"satz {i}{mark}weiter" for i, mark in enumerate(INSIDE)] + ["letzter satz"]
    targets = [f"sentence {i}" for i in range(len(INSIDE))] + ["last sentence"]
    for lang, lines, ending in (("de", sources, "\r\n"), ("en", targets, "\n")):
        data = ending.join(lines).encode() + b"\n"
        path = tmp_path / f"train.{lang}{suffix}"
        path.write_bytes(gzip.compress(data) if suffix else data)
    pairs = read_split(tmp_path, "train", "de", "en")
    assert pairs == list(zip(sources, targets)), "one pair a newline, aligned, separators kept inside"
    assert read_lines(tmp_path / f"train.de{suffix}")[0] == "satz 0\u2028weiter"


def test_a_last_line_without_newline_counts_and_an_empty_line_stays_a_line(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"one\n\nthree")
    assert read_lines(tmp_path / "a.txt") == ["one", "", "three"]


@pytest.mark.slow
def test_an_edited_grid_cannot_pass_an_old_result_off_as_the_new_cell(tmp_path, capsys):
    sweep, base = tiny_sweep(tmp_path, {"train.optimizer.eps": [1e-8]})
    base["wandb"]["mode"] = "disabled"
    run_sweep(sweep, base, echo=lambda _: None)
    edited = sweep.model_copy(update={"grid": {"model.norm_type.eps": [1e-8]}})
    assert expand(edited)[0].name == expand(sweep)[0].name, "the same cell name, another experiment"
    with pytest.raises(zoo.ConfigError, match=r"grid label 'eps' named train\.optimizer\.eps there and names "
                                              r"model\.norm_type\.eps now"):
        run_sweep(edited, base, echo=lambda _: None)
    file = tmp_path / "edited.yaml"
    file.write_text(yaml.safe_dump({**edited.model_dump(mode="json"), "base": base}))
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", str(file), "--dry-run"])
    assert exit_info.value.code == 2 and "grid label 'eps'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_record_stands_for_a_cell_only_with_the_cells_grid_values(tmp_path):
    """A ledger whose sweep.yaml was replaced by hand: the old record of the same cell name is
    neither counted as done by the sweep nor ranked by compare, and its folder is not reused."""
    sweep, base = tiny_sweep(tmp_path, {"train.optimizer.eps": [1e-8]})
    base["wandb"]["mode"] = "disabled"
    run_sweep(sweep, base, echo=lambda _: None)
    (tmp_path / "tiny" / "sweep.yaml").unlink()
    edited = sweep.model_copy(update={"grid": {"model.norm_type.eps": [1e-8]}})
    statuses = run_sweep(edited, base, echo=lambda _: None)
    assert statuses == {"eps=1.0e-08,seed=0": "failed"}, "not reported as already done"
    last = Ledger(tmp_path / "tiny" / "ledger.jsonl").latest()["eps=1.0e-08,seed=0"]
    assert "holds a run of another experiment (model.norm_type.eps" in last["error"]
    (row,) = compare(tmp_path / "tiny", wandb_mode="disabled", echo=lambda _: None).rows
    assert (row.failed, row.metric.n) == (1, 0), "the old run's metric is not ranked as this cell's"


def test_compare_leaves_out_a_record_whose_values_are_not_its_cells(tmp_path):
    sweep = write_sweep(tmp_path, "s", {"model.norm_type.eps": [1e-8, 1e-6]}, [0], lambda a, s: 0.5)
    ledger = Ledger(sweep.directory() / "ledger.jsonl")
    name = expand(sweep)[0].name
    ledger.append({"cell": name, "variant": name.split(",")[0], "seed": 0, "status": "finished",
                   "assignment": {"train.optimizer.eps": 1e-8}, "metrics": {"eval/exact_match": 0.9}})
    notes = []
    report = compare(sweep.directory(), wandb_mode="disabled", echo=notes.append)
    assert [row.metric.mean for row in report.rows] == [0.5, 0.5], "the cell keeps its own record, not the later one"
    assert notes[0] == "zoo compare: 2 of 2 cells finished"
    assert any(f"1 cell(s) have ledger records whose grid values differ from the cell's, left out (e.g. {name})" in n
               for n in notes), notes


@pytest.mark.parametrize("key", ["task.seed", "model.variant"])
def test_a_grid_key_never_shortens_to_a_name_every_cell_carries(key):
    assert SweepSpec(name="s", grid={key: [1]}).labels() == {key: key}


def test_an_append_after_a_line_without_its_newline_starts_a_line_of_its_own(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append({"status": "running", "cell": "a"})
    ledger.path.write_bytes(ledger.path.read_bytes().rstrip(b"\n"))
    ledger.append({"status": "finished", "cell": "a"})
    read = ledger.read()
    assert [r.status for r in read.records] == ["running", "finished"] and not read.damaged


@pytest.mark.slow
def test_a_short_write_to_the_ledger_fails_loudly_and_leaves_no_half_record(tmp_path):
    """A real file-size limit (RLIMIT_FSIZE) in a child process: the kernel writes part of the line."""
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b'{"status": "running", "cell": "a"}\n')
    before = path.read_bytes()
    code = ("import resource, sys; from zoo.sweep import Ledger; "
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 20}, resource.RLIM_INFINITY)); "
            f"Ledger({str(path)!r}).append({{'status': 'finished', 'cell': 'a', 'error': 'x' * 500}})")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert child.returncode == 1 and f"WriteError: {path}: a record could not be appended" in child.stderr
    assert "bytes written, then cut off again" in child.stderr
    assert path.read_bytes() == before, "the half record was cut off again"


@pytest.mark.slow
def test_a_rerun_recovers_a_cell_whose_record_was_cut_short(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post", "pre"]})
    base["wandb"]["mode"] = "disabled"
    run_sweep(sweep, base, echo=lambda _: None)
    ledger = Ledger(tmp_path / "tiny" / "ledger.jsonl")
    data = ledger.path.read_bytes()
    ledger.path.write_bytes(data[: len(data) - len(data.splitlines()[-1]) // 2 - 1])  # half the last record
    assert run_sweep(sweep, base, echo=lambda _: None) == {"norm=post,seed=0": "finished", "norm=pre,seed=0": "finished"}
    latest = ledger.latest()
    assert {name: r["status"] for name, r in latest.items()} == {"norm=post,seed=0": "finished",
                                                                  "norm=pre,seed=0": "finished"}
    assert len(compare(tmp_path / "tiny", wandb_mode="disabled", echo=lambda _: None).rows) == 2


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("goal_metric", ["eval/exact_match", "eval/loss"])
def test_a_non_finite_metric_never_ranks_above_a_finite_one(tmp_path, bad, goal_metric):
    values = {"post": bad, "pre": 0.3, "res_post": 0.6}
    sweep = write_sweep(tmp_path, "s", {"model.norm": list(values)}, [0, 1],
                        lambda a, seed: values[a["model.norm"]] if seed == 0 else 0.5, metric=goal_metric)
    report = compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)
    assert report.rows[-1].variant == "norm=post" and report.rows[-1].nonfinite == 1
    assert "non-finite (1 of 2)" in report.table_text.splitlines()[-1]
    assert [row.variant for row in report.rows[:2]] == (["norm=res_post", "norm=pre"] if goal_metric.endswith("match")
                                                         else ["norm=pre", "norm=res_post"])


def test_compare_says_how_much_of_the_grid_it_rests_on(tmp_path):
    statuses = {"norm=pre,seed=0": "failed", "norm=post,seed=1": "running", "norm=pre,seed=1": "diverged"}
    sweep = write_sweep(tmp_path, "s", {"model.norm": ["post", "pre", "sandwich"]}, [0, 1, 2], lambda a, s: 0.5,
                        statuses=statuses)
    ledger = sweep.directory() / "ledger.jsonl"
    lines = ledger.read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["cell"] not in ("norm=sandwich,seed=2",)]
    ledger.write_text("\n".join(kept) + "\n")
    printed = []
    report = compare(sweep.directory(), wandb_mode="disabled", echo=printed.append)
    expected = "5 of 9 cells finished; 1 diverged, 1 failed, 1 running or killed, 1 missing"
    assert printed[0] == f"zoo compare: {expected}"
    assert f"{expected}." in report.markdown.read_text().splitlines()


def test_a_raw_line_separator_inside_a_record_is_text_not_a_line_break(tmp_path):
    """json.dumps escapes U+2028, but a ledger written elsewhere may hold it raw; splitlines would
    cut the record in two and lose it."""
    path = tmp_path / "ledger.jsonl"
    record = {"status": "failed", "cell": "norm=pre,seed=0", "variant": "norm=pre", "seed": 0,
              "assignment": {"model.norm": "pre"}, "error": "before\u2028after"}
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    read = Ledger(path).read()
    assert not read.damaged and [r.error for r in read.records] == ["before\u2028after"]
