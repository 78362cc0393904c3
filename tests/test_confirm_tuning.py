"""A tuned sweep confirms its choice on fresh seeds (confirm_seeds): `zoo sweep` trains each variant
again at its chosen value once the tuning is done, `zoo compare` compares on those runs alone, and
seeds that chose never confirm."""

import json

import pytest
import yaml
from test_bad_input import cli_error
from test_tuned_sweep import held_out_of, tuned_file, valid_of, write_tuned

from trainkit import tiny_experiment
from zoo.cli import main
from zoo.compare import compare
from zoo.sweep import Ledger
from zoo.sweep.spec import confirmation_cells

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier


def with_confirmation(sweep, confirm=(7, 8)):
    """write_tuned's sweep with confirmation runs recorded: each variant at its chosen rate (post
    3e-3, pre 1e-2) on the fresh seeds, tested as held_out_of gives it there."""
    folder = sweep.directory()
    saved = yaml.safe_load((folder / "sweep.yaml").read_text())
    (folder / "sweep.yaml").write_text(yaml.safe_dump({**saved, "confirm_seeds": list(confirm)}, sort_keys=False))
    sweep = sweep.model_copy(update={"confirm_seeds": list(confirm)})
    ledger, chosen = Ledger(folder / "ledger.jsonl"), {"post": 0.003, "pre": 0.01}
    for cell in confirmation_cells(sweep):
        a = dict(cell.assignment)
        if a["train.optimizer.lr"] != chosen[a["model.norm"]]:
            continue
        valid = valid_of(a["model.norm"], a["train.optimizer.lr"], cell.seed)
        ledger.append({"cell": cell.name, "variant": cell.variant, "seed": cell.seed, "assignment": a,
                       "status": "finished", "history": [{"train/step": 100, "eval/token_acc": valid}],
                       "metrics": {"eval/token_acc": valid, "eval/loss": 4 * (1 - valid),
                                   "test/token_acc": held_out_of(a["model.norm"], a["train.optimizer.lr"], cell.seed)}})
    return sweep


def test_the_variants_are_compared_on_the_confirmation_seeds_alone(tmp_path):
    sweep = with_confirmation(write_tuned(tmp_path))
    said = []
    report = compare(sweep.directory(), wandb_mode="disabled", echo=said.append)
    assert {c.variant: c.chosen["train.optimizer.lr"] for c in report.tuning.choices} == {"norm=post": 0.003,
                                                                                          "norm=pre": 0.01}
    rows = {row.variant: row.metric for row in report.rows}
    assert rows["norm=pre"].n == 2 and rows["norm=pre"].mean == pytest.approx(
        (held_out_of("pre", 0.01, 7) + held_out_of("pre", 0.01, 8)) / 2), "seeds 7 and 8 alone"
    (_, difference), = report.effects[0].differences
    assert difference.n == 2 and difference.values == pytest.approx(
        tuple(held_out_of("pre", 0.01, s) - held_out_of("post", 0.003, s) for s in (7, 8)))
    assert any("compared on the confirmation seeds [7, 8] alone" in line for line in said)
    text = report.markdown.read_text()
    assert "| norm=pre | 0.01 |" in text, "the choice is shown as the tuning seeds made it"
    assert text.splitlines()[2] == "Primary endpoint: `test/token_acc`.", "a note makes no metric secondary"


def test_before_the_confirmation_ran_the_comparison_says_it_is_unconfirmed(tmp_path):
    sweep = write_tuned(tmp_path)
    folder = sweep.directory()
    saved = yaml.safe_load((folder / "sweep.yaml").read_text())
    (folder / "sweep.yaml").write_text(yaml.safe_dump({**saved, "confirm_seeds": [7, 8]}, sort_keys=False))
    said = []
    report = compare(folder, wandb_mode="disabled", echo=said.append)
    assert any("the choice is not confirmed yet" in line for line in said)
    assert {row.metric.n for row in report.rows} == {3}, "the tuning seeds' runs, said to be optimistic"


def test_a_variant_whose_choice_changed_after_its_confirmation_is_named_unconfirmed_not_dropped(tmp_path):
    """Tuning cells of pre rerun after its confirmation at 1e-2 (their last records now choose 3e-3):
    pre has no confirmation run at its choice, and is said to be unconfirmed, with what ran and how
    to confirm it, instead of vanishing while the console says the comparison is confirmed."""
    sweep = with_confirmation(write_tuned(tmp_path))
    from zoo.sweep import expand
    ledger = Ledger(sweep.directory() / "ledger.jsonl")
    for cell in expand(sweep):
        a = dict(cell.assignment)
        if a["model.norm"] == "pre" and a["train.optimizer.lr"] == 0.003:
            ledger.append({"cell": cell.name, "variant": cell.variant, "seed": cell.seed, "assignment": a,
                           "status": "finished", "history": [{"train/step": 100, "eval/token_acc": 0.99}],
                           "metrics": {"eval/token_acc": 0.99, "eval/loss": 0.04, "test/token_acc": 0.9}})
    said = []
    report = compare(sweep.directory(), wandb_mode="disabled", echo=said.append)
    assert {c.variant: c.chosen["train.optimizer.lr"] for c in report.tuning.choices}["norm=pre"] == 0.003
    assert [row.variant for row in report.rows] == ["norm=post"]
    stale = [line for line in said if "norm=pre: not confirmed" in line]
    assert stale and "its choice is now lr=0.003, and its confirmation seeds [7, 8] ran lr=0.01" in stale[0] \
        and "`zoo sweep` is run again" in stale[0], said
    assert any("1 variant(s) whose choice changed after their confirmation ran are not confirmed and left out "
               "(norm=pre)" in line for line in said), said
    assert "norm=pre: not confirmed" in report.markdown.read_text()


@pytest.mark.parametrize("changes, said", [
    ({"confirm_seeds": [1, 5]}, "confirm_seeds [1] are tuning seeds too (seeds [0, 1])"),
    ({"confirm_seeds": [5, 5]}, "confirm_seeds must be distinct, got [5, 5]"),
    ({"confirm_seeds": [5], "tune": {}}, "confirm_seeds [5]: a sweep confirms the values it tuned; give tune: too"),
])
def test_confirm_seeds_that_are_not_fresh_are_refused_before_anything_runs(tmp_path, capsys, changes, said):
    err = cli_error(["sweep", tuned_file(tmp_path, seeds=[0, 1], **changes), "--dry-run"], capsys)
    assert said in err, err
    assert not (tmp_path / "sweeps").exists()


def test_zoo_sweep_trains_the_chosen_values_on_the_fresh_seeds_once_tuning_is_done(tmp_path, capsys):
    """A real tuned sweep: 2 variants x 2 rates on seed 0, then each variant's choice on seeds 3 and 4."""
    base = tiny_experiment(tmp_path, task={"name": "reverse", "min_len": 3, "max_len": 6, "test_size": 16},
                           train={"steps": 6, "eval_every": 6, "checkpoint_every": 6, "log_every": 3})
    file = tmp_path / "t.yaml"
    file.write_text(yaml.safe_dump({"name": "c", "base": base, "grid": {"model.norm": ["post", "pre"]},
                                    "tune": {"train.optimizer.lr": [0.001, 0.003]}, "seeds": [0],
                                    "confirm_seeds": [3, 4], "metric": "test/token_acc", "out_dir": str(tmp_path)}))
    main(["sweep", str(file), "--workers", "1"])
    out = capsys.readouterr().out
    assert "confirming each variant's chosen value on seeds [3, 4] (4 cells)" in out
    records = [json.loads(line) for line in (tmp_path / "c" / "ledger.jsonl").read_text().splitlines()]
    done = {r["cell"]: r for r in records if r["status"] == "finished"}
    confirmed = {name: r for name, r in done.items() if r["seed"] in (3, 4)}
    assert len(done) == 4 + 4 and len(confirmed) == 4
    report = compare(tmp_path / "c", wandb_mode="disabled", echo=lambda _: None)
    chosen = {c.variant: c.chosen["train.optimizer.lr"] for c in report.tuning.choices}
    assert {(dict(r["assignment"])["model.norm"], dict(r["assignment"])["train.optimizer.lr"]) for r in confirmed.values()
            } == {(variant.split("=")[1], lr) for variant, lr in chosen.items()}
    assert {row.metric.n for row in report.rows} == {2}
    main(["sweep", str(file), "--workers", "1"])
    again = capsys.readouterr().out
    assert again.count("0 to run") == 2, "a second run trains nothing: tuning and confirmation are done"
