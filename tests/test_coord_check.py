"""The coordinate check (zoo.compare.coord_check) for every registered part: under muP no layer's activations
grow with width, under the standard parametrization the output logits do, as theory says; and
the best learning rate falls with width under the standard parametrization and holds under muP."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import PARTS, parts_met, row_id

import zoo
from zoo.compare.coord_check import constant_rate_steps, coord_check
from zoo.compare.sections.rate_transfer import best_log_rate as best_rate
from zoo.errors import ConfigError
from zoo.specs.experiment import load_experiment
from zoo.specs.ladder import mup_at, widened
from zoo.tasks import build_task

WIDTHS = [32, 64, 128, 256]
SMALL = ["model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_encoder_layers=1", "model.n_decoder_layers=1",
         "train.optimizer.lr=0.02", "train.batch_size=8"]
"""A base width of 32, two heads of 16, at a rate where the standard parametrization's growth shows in 4 steps."""
SCALES = parts_met({(axis, name) for axis, name in PARTS if getattr(zoo.registry(axis).get(name), "mup_refused", None)})


def part_sets(parts: dict[str, str]) -> list[str]:
    return [*(f"model.{axis}={name}" for axis, name in parts.items()),
            *(["model.ffn.experts=2"] if parts["ffn"] == "moe" else [])]


@pytest.mark.parametrize("parts", SCALES, ids=map(row_id, SCALES))
def test_under_mup_no_layer_grows_with_width_and_under_standard_the_logits_do(parts):
    """Each module's update over 3 seeds: under muP none grows, and none but the logits vanishes
    (a random readout's W Δh falls as width^-1/2: measured -0.35 to -0.42 where it passes the
    threshold); under the standard parametrization the logits grow, and the threshold is half their slope."""
    check = coord_check(load_experiment(None, [*SMALL, *part_sets(parts)]), WIDTHS, steps=4)
    assert check.seeds == 3 and [row.module for row in check.grows("mup")] == [] and not check.failed("mup")
    assert [row.module for row in check.vanishes("mup")] in ([], ["generator"]), check.table()
    grows = {row.module: row for row in check.grows("standard")}
    assert "generator" in grows, {row.module: row.slope() for row in check.rows}
    assert grows["generator"].part == "output logits"
    assert check.threshold == pytest.approx(grows["generator"].slope() / 2)
    assert check.calibration.startswith("half the standard parametrization's logit slope measured here")
    assert all(len(sizes) == 4 and sizes[-1] > 0 for row in check.rows for sizes in row.sizes.values()), \
        "every module has moved from its initialization by the last step (ReZero's branches wait a step)"


def test_the_check_names_the_part_of_each_module_and_refuses_too_few_widths():
    experiment = load_experiment(None, [*SMALL, "model.norm=pre", "model.ffn=swiglu"])
    check = coord_check(experiment, [32, 64, 128], steps=2, parametrizations=["mup"])
    parts = {row.module: row.part for row in check.rows}
    assert parts["decoder.layers.0.ffn"] == "ffn swiglu"
    assert parts["decoder.layers.0.cross_attn"] == "attention fused"
    assert parts["decoder.norm"] == "norm_type layernorm"  # the final norm
    assert {row.parametrization for row in check.rows} == {"mup"}
    with pytest.raises(ConfigError, match="at least 3 widths"):
        coord_check(experiment, [32, 64])


@pytest.mark.slow  # a fresh process: the command's files and exit status
def test_the_command_writes_its_table_and_picture_and_fails_where_mup_grows(tmp_path):
    done = subprocess.run([sys.executable, "-m", "zoo.cli", "coord-check", "--set", *SMALL, "--widths", "32", "64", "128",
                           "--steps", "2", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (said,) = [line for line in done.stdout.splitlines() if line.startswith("zoo coord-check: mup: ")]
    assert "grows" not in said and "diverged" not in said, said
    assert "zoo coord-check: next: train at the base width with model.parametrization=mup, tune the learning rate " \
           "there" in done.stdout
    report = (tmp_path / "coord_check.md").read_text()
    assert "| mup | generator | output logits |" in report and "--widths 32 64 128 --steps 2" in report
    assert (tmp_path / "coord_check.png").stat().st_size > 10_000


def best_log_rate(experiment, recipe, task, rates: list[float], steps: int = 150) -> float:
    """log10 of the rate with the lowest mean training loss over the last 10 steps, refined by the
    parabola through it and its neighbours on the log grid (a rate that diverged counts as +inf)."""
    losses = []
    for rate in rates:
        trained = experiment.model_copy(update={"train": experiment.train.replace(
            optimizer=experiment.train.optimizer.replace(lr=rate))})
        spec = recipe.sized(len(task.src_vocab), len(task.tgt_vocab))
        tail = [loss for _, _, loss in constant_rate_steps(trained, spec, task, steps, 32)][-10:]
        losses.append(float(np.mean(tail)) if all(map(math.isfinite, tail)) else math.inf)
    return best_rate(losses, rates, "min")[0]  # the reading zoo compare's rate analysis makes


@pytest.mark.slow  # 15 short trainings
def test_the_best_rate_falls_with_width_under_standard_and_holds_under_mup():
    """Four times the width: the standard parametrization's best rate falls by about its factor
    (theory: 1/width, -0.6 of a decade; measured -0.68 on copy), muP's stays within a quarter of a
    decade (measured -0.13). On reverse the same check measured -0.48 and +0.08."""
    experiment = load_experiment(None, ["model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.dropout=0",
                                        "train.batch_size=32", "task.name=copy"])
    task_ = build_task(experiment.task, 0)
    rates = [10**x for x in (-3.5, -3.0, -2.5, -2.0, -1.5)]
    base = experiment.model
    at_base = best_log_rate(experiment, base, task_, rates)
    standard = best_log_rate(experiment, widened(base, 128), task_, rates) - at_base
    mup = best_log_rate(experiment, mup_at(base, 128, base), task_, rates) - at_base
    assert standard < -0.35, (standard, mup)
    assert abs(mup) < 0.25, (standard, mup)


@pytest.mark.parametrize("optimizer", [name for name in zoo.registry("optimizer").names()
                                       if not getattr(zoo.registry("optimizer").get(name), "mup_rates", False)])
def test_the_check_refuses_under_mup_the_optimizers_training_refuses(optimizer, capsys, tmp_path):
    """sgd was judged under muP, which training refuses; muon raised "too many values to unpack"."""
    from test_bad_input import cli_error

    sets = [*SMALL, f"train.optimizer.name={optimizer}"]
    with pytest.raises(ConfigError, match=rf"train.optimizer {optimizer}: parametrization mup sets Adam's"):
        coord_check(load_experiment(None, sets), [32, 64, 128], steps=1)
    err = cli_error(["coord-check", "--set", *sets, "--out", str(tmp_path / "out")], capsys)
    assert "--parametrization standard" in err
    assert [row.parametrization for row in coord_check(load_experiment(None, sets), [32, 64, 128], steps=1,
                                                       parametrizations=["standard"]).rows][:1] == ["standard"]


def test_a_module_that_diverges_is_said_to_diverge_not_to_grow_with_width():
    from zoo.compare.coord_check import CoordCheck, Coordinates, verdict_lines

    nan_at_wide = Coordinates("mup", "decoder.layers.0.ffn", "ffn relu", {32: [0.5], 64: [0.6], 128: [math.nan]})
    steady = Coordinates("mup", "generator", "output logits", {32: [0.5], 64: [0.5], 128: [0.5]})
    check = CoordCheck([32, 64, 128], 1, 0.2, [nan_at_wide, steady])
    assert check.grows("mup") == [] and check.diverged("mup") == [nan_at_wide]
    assert check.table()[1][0][-1] == "diverged at d=128"
    (line,) = verdict_lines(check)
    assert "grows" not in line and "diverged (no verdict on width" in line and "decoder.layers.0.ffn" in line


def test_an_out_folder_that_cannot_be_written_is_refused_before_training(tmp_path, capsys, monkeypatch):
    from test_bad_input import cli_error

    import zoo.compare.coord_check
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setattr(zoo.compare.coord_check, "coord_check", lambda *a, **k: pytest.fail("trained before checking --out"))
    assert "--out" in cli_error(["coord-check", "--set", *SMALL, "--out", str(blocked)], capsys)


def test_a_module_whose_update_shrinks_with_width_vanishes_and_only_growth_fails():
    """Logits whose update falls 4x over 8x the width (slope -0.66) vanish: flagged, the next step
    still named; one that grows fails, and the next step is not named. Without a standard
    parametrization measured, the threshold is THRESHOLD."""
    from zoo.compare.coord_check import NEXT_STEP, THRESHOLD, CoordCheck, Coordinates, calibrated_threshold, verdict_lines

    shrinking = Coordinates("mup", "generator", "output logits", {32: [0.4], 64: [0.25], 128: [0.16], 256: [0.1]})
    steady = Coordinates("mup", "decoder.layers.0.ffn", "ffn relu", {32: [0.2], 64: [0.2], 128: [0.21], 256: [0.2]})
    check = CoordCheck([32, 64, 128, 256], 1, 0.4, [shrinking, steady])
    assert check.vanishes("mup") == [shrinking] and check.flagged("mup") and not check.failed("mup")
    assert check.verdict(shrinking) == "vanishes" and check.verdict(steady) == "steady"
    lines = verdict_lines(check)
    assert lines[0] == "mup: vanishes with width: generator (output logits, slope -0.66)" and lines[-1] == NEXT_STEP
    growing = Coordinates("mup", "generator", "output logits", {32: [0.1], 64: [0.2], 128: [0.4], 256: [0.8]})
    failing = CoordCheck([32, 64, 128, 256], 1, 0.4, [growing, steady])
    assert failing.failed("mup") and NEXT_STEP not in verdict_lines(failing)
    assert calibrated_threshold(check)[0] == THRESHOLD
    standard = Coordinates("standard", "generator", "output logits", {32: [0.1], 64: [0.2], 128: [0.4], 256: [0.8]})
    assert calibrated_threshold(CoordCheck([32, 64, 128, 256], 1, 0.4, [standard]))[0] == pytest.approx(0.5)
