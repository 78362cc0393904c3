"""LR sensitivity declared as a sweep's primary endpoint (`metric: lr_sensitivity`): the variants
are compared on Wortsman et al.'s sensitivity, one value per variant and seed computed from its
runs at every tuned rate, in the primary family (the Findings' exact sign-flip tests), and the
declaration is refused where the sensitivity cannot be computed."""

import numpy as np
import pytest
import sweepkit
import yaml
from test_bad_input import cli_error

from zoo.compare import compare
from zoo.sweep import SweepSpec

RATES = [0.001, 0.003, 0.01, 0.03, 0.1]
FIRST_LOSS = 5.0
"""Each run's first loss (sweepkit.finished_tuned's)."""


def loss_of(norm: str, lr: float, seed: int) -> float:
    """Validation loss: post-norm's curve over the rates is steeper than pre-norm's, and at 0.1
    post-norm's seeds diverge past the initial loss (counted at it)."""
    depth = {"post": 0.8, "pre": 0.3}[norm] + 0.01 * seed
    return min(3.0 + depth * (np.log10(lr) + 2.0) ** 2 + 0.002 * seed, FIRST_LOSS + 1.0)


def write_sweep(tmp_path, metric="lr_sensitivity", declared: dict | None = None) -> SweepSpec:
    sweep = SweepSpec.model_validate({"name": "sensitive", "grid": {"model.norm": ["post", "pre"]},
                                      "tune": {"train.optimizer.lr": RATES}, "seeds": list(range(8)),
                                      "metric": metric, "margins": {"lr_sensitivity": 0.5},
                                      "out_dir": str(tmp_path)})
    sweepkit.finished_tuned(sweep, lambda a, seed: loss_of(a["model.norm"], a["train.optimizer.lr"], seed), declared)
    return sweep


def by_hand(norm: str, seed: int) -> float:
    capped = [min(loss_of(norm, lr, seed), FIRST_LOSS) for lr in RATES]
    return float(np.mean(capped) - min(capped))


def test_the_primary_family_compares_each_variants_sensitivity_paired_by_seed(tmp_path):
    sweep = write_sweep(tmp_path)
    assert sweep.choose_on == "eval/loss", "the loss the sensitivity is of chooses by default"
    report = compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)
    ((effect,),) = [[e for e in report.analysis["effects"].effects if e.key == "model.norm"]]
    ((value, difference),) = effect.differences
    wanted = [by_hand("pre", seed) - by_hand("post", seed) for seed in range(8)]
    assert value == "pre" and sorted(difference.values) == pytest.approx(sorted(wanted)) and max(wanted) < 0
    findings = report.analysis["findings"]
    assert findings.metric == "lr_sensitivity" and not findings.endpoint
    (finding,) = findings.findings
    assert finding.label.startswith("norm: pre − post") and finding.verdict == "separated"
    assert finding.p == pytest.approx(2 / 2**8), "the exact sign-flip test over 8 pairs, every one negative"
    text = report.markdown.read_text()
    assert "Primary endpoint: `lr_sensitivity`." in text and "its margin is never applied" not in text
    assert "the sensitivity is the sweep's primary endpoint, tested in the primary family by the Findings" in text


@pytest.mark.parametrize(("changes", "said"), [
    ({"tune": {"train.optimizer.lr": RATES, "train.warmup_steps": [0, 10]}},
     "metric lr_sensitivity: computed from each variant's runs at every tuned learning rate, so tune: names one "
     "learning rate and nothing else"),
    ({"confirm_seeds": [9]}, "confirm_seeds: metric lr_sensitivity is computed over every tuned rate")])
def test_a_sensitivity_that_cannot_be_computed_is_refused_by_name(tmp_path, capsys, changes, said):
    sweep = {"name": "sensitive", "grid": {"model.norm": ["post", "pre"]}, "tune": {"train.optimizer.lr": RATES},
             "metric": "lr_sensitivity", "base": {"task": {"name": "reverse", "test_size": 64}}, **changes}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sweep))
    assert said in cli_error(["sweep", str(tmp_path / "s.yaml"), "--dry-run"], capsys)


def test_the_sweep_and_its_margin_load_though_no_run_reports_the_metric(tmp_path, capsys):
    from zoo.cli import main

    sweep = {"name": "sensitive", "grid": {"model.norm": ["post", "pre"]}, "tune": {"train.optimizer.lr": RATES},
             "metric": "lr_sensitivity", "margins": {"lr_sensitivity": 0.05},
             "base": {"task": {"name": "reverse", "test_size": 64}}, "out_dir": str(tmp_path)}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sweep))
    main(["sweep", str(tmp_path / "s.yaml"), "--dry-run"])
    assert capsys.readouterr().out.splitlines()[-1] == f"10 cells of 10 in shard 0/1; folder {tmp_path / 'sensitive'}"


def test_another_sweeps_sensitivity_is_asked_as_a_secondary_endpoint_and_an_untuned_sweep_is_refused(tmp_path):
    from zoo.errors import ConfigError

    report = compare(write_sweep(tmp_path / "tuned", metric="test/loss").directory(), metric="lr_sensitivity",
                     wandb_mode="disabled", echo=lambda _: None)
    assert report.analysis["findings"].endpoint.startswith("secondary (exploratory): lr_sensitivity")
    ((_, difference),) = next(e for e in report.analysis["effects"].effects if e.key == "model.norm").differences
    assert sorted(difference.values) == pytest.approx(sorted(by_hand("pre", s) - by_hand("post", s) for s in range(8)))
    untuned = sweepkit.write_sweep(tmp_path / "untuned", "plain", {"model.norm": ["post", "pre"]}, [0, 1],
                                   lambda a, seed: 0.5, metric="test/loss")
    with pytest.raises(ConfigError, match=r"metric lr_sensitivity: computed from each variant's runs at every tuned "
                                          r"learning rate, so tune: names one learning rate and nothing else; it names none"):
        compare(untuned.directory(), metric="lr_sensitivity", wandb_mode="disabled", echo=lambda _: None)


@pytest.mark.parametrize("margin, exploratory", [(0.5, False), (0.2, True)])
def test_each_sensitivity_carries_the_question_its_runs_were_trained_under(tmp_path, margin, exploratory):
    """A seed's sensitivity is computed from several runs: it is as declared as they are, and a
    question changed after they ran makes the comparison exploratory, as for any metric."""
    from zoo.sweep.question import declaration

    planned = SweepSpec.model_validate({"name": "sensitive", "grid": {"model.norm": ["post", "pre"]},
                                        "tune": {"train.optimizer.lr": RATES}, "seeds": list(range(8)),
                                        "metric": "lr_sensitivity", "margins": {"lr_sensitivity": margin}})
    sweep = write_sweep(tmp_path, declared=declaration(planned))
    report = compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)
    declared = report.analysis["declaration"]
    assert declared.undeclared == 0 and declared.exploratory == exploratory
    text = report.markdown.read_text()
    assert "record no declared question" not in text
    assert ("exploratory: the sweep's question changed after 16 of the runs were trained" in text) == exploratory


def test_a_sensitivity_across_widths_is_not_fitted_as_a_law_of_compute(tmp_path):
    """A seed's sensitivity comes from runs at five rates, not from one run at one compute: no
    law is fitted to it, and its runs are not called uncounted."""
    sweep = SweepSpec.model_validate({"name": "widths", "grid": {"model.d_model": [32, 64, 128]},
                                      "tune": {"train.optimizer.lr": RATES}, "seeds": list(range(4)),
                                      "metric": "lr_sensitivity", "out_dir": str(tmp_path)})
    sweepkit.finished_tuned(sweep, lambda a, seed: loss_of("pre", a["train.optimizer.lr"], seed) + a["model.d_model"] / 1e3)
    report = compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)
    scaling = report.analysis["scaling"]
    assert scaling.notes == ["no fit: lr_sensitivity is computed over several runs (one at each tuned rate), not "
                             "reached by one run at its compute; the power law fits a metric that one run's training "
                             "lowers"]
    assert not scaling.variants and not scaling.ladder and "### The ladder" not in report.markdown.read_text()
