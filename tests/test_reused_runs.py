"""Runs that are the same computation as another sweep's earlier runs are marked as reused; a
confirmatory study leaves them out of its comparison unless it declares their sweep in `reuses`,
and a study without a declared question counts them and says so."""

import json
from pathlib import Path

import pytest
import sweepkit
from test_declaration import rewrite_declarations

from zoo.compare.load import read_sweep
from zoo.errors import ConfigError
from zoo.sweep.spec import SweepSpec, cell_experiment, expand, read_saved_sweep


def value(a, seed):
    return 0.5 + 0.1 * (a["model.norm"] == "pre") + 0.01 * seed


def curve(a, seed, final):
    """The training losses of one computation: the same model and seed log the same losses."""
    base = 3.0 + 0.1 * (a["model.norm"] == "pre") + 0.001 * seed
    return [{"train/step": 50, "train/loss": base}, {"train/step": 100, "train/loss": base / 2, "eval/exact_match": final}]


def fresh(a, seed, final):
    return [{**row, "train/loss": row["train/loss"] + 1.0} if "train/loss" in row else row for row in curve(a, seed, final)]


def earlier(folder):
    """Every record of the sweep in `folder` a year older: recorded before the other sweep's."""
    path = folder / "ledger.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**line, "time": "2025" + line["time"][4:]}) + "\n" for line in lines))


def two_sweeps(tmp_path, seeds_reused=(0, 1), **settings):
    """`first` trains seeds 0-3; `second` trains seeds 0-3 too, of which `seeds_reused` are the
    same computations as first's."""
    grid = {"model.norm": ["post", "pre"]}
    first = sweepkit.write_sweep(tmp_path, "first", grid, [0, 1, 2, 3], value, history=curve)
    earlier(first.directory())
    second = sweepkit.write_sweep(tmp_path, "second", grid, [0, 1, 2, 3], value,
                                  history=lambda a, s, v: (curve if s in seeds_reused else fresh)(a, s, v), **settings)
    return second


def test_a_confirmatory_study_leaves_out_runs_another_sweep_computed_first(tmp_path):
    second = two_sweeps(tmp_path)
    read = read_sweep(second.directory())
    assert sorted(r.seed for r in read.records) == [2, 2, 3, 3]
    (note,) = [n for n in read.notes if n.startswith("reused")]
    assert note.startswith("reused: 4 of the 8 runs are the same computations as runs recorded earlier by "
                           "first (4)") and 'left out of this confirmatory comparison (declare `reuses: ["first"]`' in note


def test_a_declared_reuse_is_counted_and_said(tmp_path):
    second = two_sweeps(tmp_path, reuses=["first"])
    read = read_sweep(second.directory())
    assert len(read.records) == 8
    assert any(n.startswith("reused: 4 of the 8") and n.endswith("counted, as the sweep declares (reuses)")
               for n in read.notes)


def test_a_study_without_a_declared_question_counts_them_and_says_its_verdicts_rest_on_them(tmp_path):
    second = two_sweeps(tmp_path)
    rewrite_declarations(second.directory(), lambda declared, seed: None)
    read = read_sweep(second.directory())
    assert len(read.records) == 8
    assert any("counted, as this study is not confirmatory" in n for n in read.notes)


def test_runs_computed_first_by_the_compared_sweep_are_not_reused_and_the_earlier_sweep_owes_nothing(tmp_path):
    two_sweeps(tmp_path)
    read = read_sweep(tmp_path / "first")  # first's runs are the earlier ones
    assert len(read.records) == 8 and not any(n.startswith("reused") for n in read.notes)


def test_every_compared_run_reused_is_refused_with_what_to_declare(tmp_path):
    second = two_sweeps(tmp_path, seeds_reused=(0, 1, 2, 3))
    with pytest.raises(ConfigError, match=r'every compared run is reused: .*declare `reuses: \["first"\]`'):
        read_sweep(second.directory())


def test_a_record_copied_from_another_sweeps_ledger_is_reused_from_the_sweep_its_group_names(tmp_path):
    """A record seeded from another sweep's ledger names that sweep in its W&B group: reused from it
    even where that ledger is not beside it."""
    second = two_sweeps(tmp_path, seeds_reused=())
    path = second.directory() / "ledger.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    sweep, base = read_saved_sweep(second.directory())
    cells = {cell.name: cell for cell in expand(sweep)}
    for line in lines:
        if line["seed"] == 0:
            line["experiment"] = cell_experiment(sweep, base, cells[line["cell"]]).model_dump(mode="json")
            line["experiment"]["wandb"]["group"] = "elsewhere"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    read = read_sweep(second.directory())
    assert sorted(r.seed for r in read.records) == [1, 1, 2, 2, 3, 3]
    assert any(n.startswith("reused: 2 of the 8 runs") and "elsewhere (2)" in n for n in read.notes)


@pytest.mark.parametrize("reuses", [["second"], ["first", "first"]])
def test_reuses_names_other_sweeps_once(reuses):
    with pytest.raises(ConfigError, match=r"reuses: .* name other sweeps than 'second', each once"):
        SweepSpec(name="second", grid={"model.norm": ["post", "pre"]}, seeds=[0], reuses=reuses)


RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "results"


@pytest.mark.parametrize("ledger, said", [
    ("kinds-matched", "reused: 24 of the 48 runs are the same computations as runs recorded earlier by seed-axes (16) and "
                      "seed-axes-powered (8)"),
    ("seed-axes-tuned-confirmed", "reused: 24 of the 64 confirmation runs are the same computations as runs recorded "
                                  "earlier by seed-axes-powered (24)"),
    ("seed-axes-tuned-confirmed", "reused: 128 tuning runs are the same computations as runs recorded earlier by "
                                  "seed-axes-tuned (128); they choose the values and are not compared"),
])
def test_the_published_ledgers_reuse_is_marked(ledger, said):
    assert any(note.startswith(said) for note in read_sweep(RESULTS / ledger).notes)
