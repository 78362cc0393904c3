"""Tuned sweeps: each variant's value chosen on the validation metric alone, the variants compared
on the held-out split at their chosen values, checked against a hand computation from the ledger;
a value at the edge flagged; the test set never choosing; LR sensitivity as Wortsman et al. define it."""

import json
import math

import numpy as np
import pytest
import yaml
from test_bad_input import cli_error

import zoo
from zoo.compare import compare
from zoo.sweep import Ledger, SweepSpec, expand, run_sweep, shard
from zoo.sweep.spec import read_saved_sweep

RATES = [0.001, 0.003, 0.01]
VALID = {"post": [0.60, 0.70, 0.65], "pre": [0.62, 0.72, 0.80]}
"""Validation token accuracy by rate: post peaks inside the range, pre at its largest rate (the edge)."""
TEST = {"post": [0.90, 0.50, 0.95], "pre": [0.40, 0.60, 0.70]}
"""Test accuracy by rate: post's best test rate is not its best validation rate; the test never chooses."""


def valid_of(norm, lr, seed):
    return VALID[norm][RATES.index(lr)] + 0.01 * seed


def held_out_of(norm, lr, seed):
    return TEST[norm][RATES.index(lr)] + 0.013 * seed * (norm == "pre") + 0.002 * seed ** 2


def write_tuned(tmp_path, test=held_out_of, diverged=(), seeds=(0, 1, 2), valid=valid_of) -> SweepSpec:
    sweep = SweepSpec(name="tuned", grid={"model.norm": ["post", "pre"]}, tune={"train.optimizer.lr": RATES},
                      seeds=list(seeds), metric="test/token_acc", out_dir=str(tmp_path))
    folder = sweep.directory()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sweep.yaml").write_text(yaml.safe_dump({**sweep.model_dump(mode="json"),
                                                       "base": {"wandb": {"mode": "disabled"}}}, sort_keys=False))
    ledger = Ledger(folder / "ledger.jsonl")
    for cell in expand(sweep):
        a = dict(cell.assignment)
        norm, lr = a["model.norm"], a["train.optimizer.lr"]
        record = {"cell": cell.name, "variant": cell.variant, "seed": cell.seed, "assignment": a,
                  "first_loss": 3.4 + 0.01 * cell.seed}
        if cell.name in diverged:
            ledger.append({**record, "status": "diverged", "error": "step 40: the loss is nan"})
            continue
        accuracy = valid(norm, lr, cell.seed)
        ledger.append({**record, "status": "finished", "history": [{"train/step": 100, "eval/token_acc": accuracy}],
                       "metrics": {"eval/token_acc": accuracy, "eval/loss": 4 * (1 - accuracy),
                                   "test/token_acc": test(norm, lr, cell.seed)}})
    return sweep


def hand_choice(folder, variant_prefix):
    """From the ledger alone: the rate with the best mean validation accuracy over seeds, among
    rates whose every seed finished."""
    records = [json.loads(line) for line in (folder / "ledger.jsonl").read_text().splitlines()]
    done = [r for r in records if r["status"] != "running" and r["variant"].startswith(variant_prefix)]
    by_rate = {}
    for r in done:
        by_rate.setdefault(r["assignment"]["train.optimizer.lr"], []).append(r)
    clean = {lr: np.mean([r["metrics"]["eval/token_acc"] for r in runs]) for lr, runs in by_rate.items()
             if all(r["status"] == "finished" for r in runs)}
    return max(clean, key=clean.get)


def test_each_variant_is_chosen_on_validation_and_compared_on_test_paired_by_seed(tmp_path):
    sweep = write_tuned(tmp_path)
    report = compare(sweep.directory(), wandb_mode="disabled")
    chosen = {c.variant: c.chosen["train.optimizer.lr"] for c in report.tuning.choices}
    assert chosen == {"norm=post": hand_choice(sweep.directory(), "norm=post"),
                      "norm=pre": hand_choice(sweep.directory(), "norm=pre")} == {"norm=post": 0.003, "norm=pre": 0.01}
    edges = {c.variant: c.edges for c in report.tuning.choices}
    assert edges == {"norm=post": [], "norm=pre": ["lr=0.01 is the largest value tried"]}
    rows = {row.variant: row.metric for row in report.rows}
    assert rows["norm=post"].mean == pytest.approx(np.mean([held_out_of("post", 0.003, s) for s in range(3)]))
    assert rows["norm=pre"].mean == pytest.approx(np.mean([held_out_of("pre", 0.01, s) for s in range(3)]))
    differences = [held_out_of("pre", 0.01, s) - held_out_of("post", 0.003, s) for s in range(3)]
    (value, estimate), = report.effects[0].differences
    assert value == "pre" and estimate.mean == pytest.approx(np.mean(differences)) and estimate.n == 3
    assert report.effects[0].tests[0][0] == 2 / 2**3, "three pairs of one sign: the exact test's smallest p"
    assert all(d > 0 for d in differences)
    text = report.markdown.read_text()
    assert "| norm=pre | 0.01 |" in text and "lr=0.01 is the largest value tried: tune further" in text
    assert "Chosen on eval/token_acc:" in report.table_text
    saved = json.loads((sweep.directory() / "tuning.json").read_text())
    pre = next(v for v in saved["variants"] if v["variant"] == "norm=pre")
    assert pre["chosen_cells"] == [f"norm=pre,lr=0.01,seed={s}" for s in range(3)]
    assert [t["mean"] for t in pre["tried"]] == pytest.approx([v + 0.01 for v in VALID["pre"]])


def test_changing_only_a_test_metric_does_not_move_the_choice(tmp_path):
    """The test split's values are inverted (the worst validation rate now tests best): the chosen
    rates stay, and only the compared numbers follow the test values of the chosen runs."""
    first = compare(write_tuned(tmp_path / "a").directory(), wandb_mode="disabled")
    inverted = compare(write_tuned(tmp_path / "b", test=lambda n, lr, s: 1.0 - held_out_of(n, lr, s)).directory(),
                       wandb_mode="disabled")
    assert [c.chosen for c in first.tuning.choices] == [c.chosen for c in inverted.tuning.choices]
    means = {row.variant: row.metric.mean for row in inverted.rows}
    assert means["norm=post"] == pytest.approx(1.0 - np.mean([held_out_of("post", 0.003, s) for s in range(3)]))


def test_a_rate_where_a_seed_diverged_ranks_after_every_clean_rate(tmp_path):
    sweep = write_tuned(tmp_path, diverged={"norm=pre,lr=0.01,seed=2"})
    report = compare(sweep.directory(), wandb_mode="disabled")
    pre = next(c for c in report.tuning.choices if c.variant == "norm=pre")
    assert pre.chosen == {"train.optimizer.lr": hand_choice(sweep.directory(), "norm=pre")} == {"train.optimizer.lr": 0.003}
    assert pre.edges == [] and next(t for t in pre.tried if t.values == {"train.optimizer.lr": 0.01}).bad == 1


def test_lr_sensitivity_is_the_mean_gap_to_the_best_with_a_diverged_run_at_the_initial_loss(tmp_path):
    sweep = write_tuned(tmp_path, diverged={"norm=pre,lr=0.01,seed=2"})
    report = compare(sweep.directory(), wandb_mode="disabled")
    found = next(f for f in report.analysis["lr_sensitivity"] if f.key == "train.optimizer.lr")
    rows, effects = found.rows, found.effects

    def by_hand(norm, seed):
        initial = 3.4 + 0.01 * seed
        losses = [initial if (norm, lr, seed) == ("pre", 0.01, 2) else min(4 * (1 - valid_of(norm, lr, seed)), initial)
                  for lr in RATES]
        return np.mean(losses) - min(losses)

    means = {row.variant: row.metric.mean for row in rows}
    assert means["norm=post"] == pytest.approx(np.mean([by_hand("post", s) for s in range(3)]))
    assert means["norm=pre"] == pytest.approx(np.mean([by_hand("pre", s) for s in range(3)]))
    (_, difference), = effects[0].differences
    assert difference.mean == pytest.approx(np.mean([by_hand("pre", s) - by_hand("post", s) for s in range(3)]))
    assert (sweep.directory() / "loss_vs_lr.png").read_bytes()[:4] == b"\x89PNG"


def test_a_variant_that_diverged_at_every_rate_is_never_the_flattest(tmp_path):
    """Every rate diverged: each loss counts at the initial loss, so the gap to the best is 0, which
    would rank it flattest; with no rate trained there is no sensitivity, and it counts as diverged."""
    every_rate = {f"norm=pre,lr={lr},seed={seed}" for lr in RATES for seed in range(3)}
    sweep = write_tuned(tmp_path, diverged=every_rate)
    rows = compare(sweep.directory(), wandb_mode="disabled").analysis["lr_sensitivity"][0].rows
    assert rows[0].variant == "norm=post" and rows[0].diverged == 0
    pre = next(row for row in rows if row.variant == "norm=pre")
    assert pre.diverged == 3 and pre.metric.n == 0


def tuned_file(tmp_path, **changes) -> str:
    data = {"name": "t", "base": {"task": {"name": "reverse", "test_size": 8}},
            "grid": {"model.norm": ["post", "pre"]}, "tune": {"train.optimizer.lr": [0.001, 0.003]},
            "metric": "test/token_acc", **changes}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("changes, said", [
    ({"tune": {"model.norm": ["post", "pre"]}}, "tune key 'model.norm' is also a grid key"),
    ({"tune": {"train.optimizer": [{"name": "adam"}, {"name": "sgd"}], "train.optimizer.lr": [0.1, 0.2]}},
     "tune keys 'train.optimizer' and 'train.optimizer.lr' set one setting"),
    ({"tune": {"model.window": [2, 4], "model.attn.window": [3, 5]}},
     "tune keys 'model.attn.window' and 'model.window' set one setting"),  # the file's keys are sorted
    ({"tune": {"train.optimizer.lrr": [0.1, 0.2]}}, "train.optimizer: unknown field 'lrr' (did you mean 'lr'?)"),
    ({"tune": {"training.lr": [0.1, 0.2]}}, "tune key 'training.lr' is not a dotted experiment field"),
    ({"tune": {"train.optimizer.lr": [0.001]}}, "tune key 'train.optimizer.lr' needs two or more distinct values"),
    ({"tune": {"train.optimizer.lr": [1, 1.0]}}, "tune key 'train.optimizer.lr' needs two or more distinct values"),
    ({"metric": "eval/token_acc"}, "metric 'eval/token_acc': a tuned sweep compares its variants on a held-out split"),
    ({"choose_on": "test/loss"}, "choose_on 'test/loss': a tuned value is chosen on the validation split"),
    ({"base": {"task": {"name": "reverse"}}}, "metric 'test/token_acc' is not reported by task 'reverse'"),
])
def test_a_bad_tuned_sweep_is_one_line_before_anything_runs(tmp_path, capsys, changes, said):
    err = cli_error(["sweep", tuned_file(tmp_path, **changes), "--dry-run"], capsys)
    assert said in err
    assert not (tmp_path / "sweeps").exists()


def test_a_tuned_sweep_compared_on_a_validation_metric_is_refused(tmp_path, capsys):
    sweep = write_tuned(tmp_path)
    err = cli_error(["compare", str(sweep.directory()), "--metric", "eval/token_acc", "--wandb-mode", "disabled"], capsys)
    assert "a tuned sweep compares its variants on a held-out split that the choice never saw" in err
    assert not math.isnan(compare(sweep.directory(), wandb_mode="disabled", metric="test/token_acc").rows[0].metric.mean)


def test_a_tuned_sweeps_cells_shard_and_resume_like_any_others(tmp_path):
    sweep = write_tuned(tmp_path)
    cells = expand(sweep)
    assert len(cells) == 2 * len(RATES) * 3 and cells[0].name == "norm=post,lr=0.001,seed=0"
    shards = [shard(cells, index, 4) for index in range(4)]
    assert sorted(c.name for part in shards for c in part) == sorted(c.name for c in cells)
    saved, base = read_saved_sweep(sweep.directory())
    said = []
    statuses = run_sweep(saved, base, echo=said.append)
    assert set(statuses.values()) == {"finished"} and len(statuses) == 18
    assert "18 cells in this shard, 18 already done, 0 to run" in said[0], "a rerun trains nothing that is done"


def test_what_each_seed_alone_would_choose_is_shown_and_a_flip_is_flagged(tmp_path):
    """Seed 1 alone would give pre 3e-3 (its validation there is raised by 0.2); over the seeds the
    choice stays 1e-2. Post chooses 3e-3 on every seed."""
    def flipping(norm, lr, seed):
        return valid_of(norm, lr, seed) + (0.2 if (norm, lr, seed) == ("pre", 0.003, 1) else 0.0)

    said = []
    report = compare(write_tuned(tmp_path, valid=flipping).directory(), wandb_mode="disabled", echo=said.append)
    assert {c.variant: c.chosen["train.optimizer.lr"] for c in report.tuning.choices} == {"norm=post": 0.003,
                                                                                          "norm=pre": 0.01}
    text = report.markdown.read_text()
    assert "| norm=post | lr=0.003 | lr=0.003 | lr=0.003 | stable |" in text
    assert "| norm=pre | lr=0.01 | lr=0.003 | lr=0.01 | flips |" in text
    assert "1 of 2 variants choose otherwise on different seeds" in text
    assert "zoo compare: warning: the tuned choice flips by seed for 1 of 2 variants (norm=pre): it is not stable" in said


def test_an_edge_is_flagged_among_the_values_trained_and_never_for_categorical_values():
    from zoo.compare.tuned import edge_of

    assert edge_of([1e-3, 1e-2, 1e-1], [1e-3, 1e-2], 1e-2, "lr") == "lr=0.01 is the largest value tried (0.1 listed, " \
                                                                   "not trained yet)"
    assert edge_of([1e-3, 1e-2, 1e-1], [1e-3, 1e-2, 1e-1], 1e-2, "lr") is None
    assert edge_of(["constant", "cosine"], ["constant", "cosine"], "constant", "schedule") is None


def test_another_metric_on_a_tuned_sweep_says_why_it_is_refused(tmp_path):
    sweep = write_tuned(tmp_path)
    with pytest.raises(zoo.ConfigError, match=r"--metric eval/token_acc: metric 'eval/token_acc': a tuned sweep "
                                              r"compares its variants on a held-out split"):
        compare(sweep.directory(), wandb_mode="disabled", metric="eval/token_acc")


def test_the_log_axes_of_the_loss_against_the_rate_read_in_plain_numbers(tmp_path):
    """A new user read "2.4 × 10^0" on the loss axis: every tick label is a plain number."""
    from zoo.compare.sections import analyse
    from zoo.compare.sections.lr_sensitivity import rate_figure

    analysis = analyse(write_tuned(tmp_path).directory())
    found = next(f for f in analysis["lr_sensitivity"] if f.key == "train.optimizer.lr")
    figure = rate_figure(analysis["tuning"].tuned, found.label, found.curves, found.assignments)
    figure.canvas.draw()
    axes = figure.axes[0]
    labels = [t.get_text() for axis in (axes.xaxis, axes.yaxis) for minor in (False, True)
              for t in axis.get_ticklabels(minor=minor) if t.get_text()]
    assert labels and all(float(label) > 0 for label in labels), labels
    assert set(labels) >= {f"{rate:g}" for rate in RATES}, "the rates as written in the sweep file"
