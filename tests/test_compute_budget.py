"""A run counts what it spends (training model FLOPs by zoo.model.flops, and the labels its loss
counted), logs it, keeps it across a resume, and stops at a FLOP or token budget."""

import json

import pytest
import torch
import yaml
from test_bad_input import cli_error

import zoo
from trainkit import tiny_experiment
from zoo.model.flops import stack_shapes, training_flops
from zoo.specs.experiment import validate_experiment
from zoo.trainer.loop import Trainer

FIXED = {"name": "reverse", "min_len": 5, "max_len": 5}
"""Strings of one length: every batch has the same shapes, so a step's FLOPs and labels are one number."""
STEPS = {"steps": 12, "log_every": 4, "eval_every": 12, "checkpoint_every": 4}


def per_step(tmp_path) -> tuple[int, int]:
    """One step's training FLOPs by the formula and its labels, from the trainer's own first batch."""
    trainer = Trainer(validate_experiment(tiny_experiment(tmp_path / "probe", task=FIXED, train=STEPS)))
    try:
        (batch,) = trainer.feed.take(1)
        return training_flops(trainer.spec, stack_shapes(list(trainer.feed.kind.reads), batch.inputs)), batch.tokens
    finally:
        trainer.tracker.finish(failed=False)
        trainer.folder.release()


def result_of(run) -> dict:
    return json.loads((run.run_dir / "result.json").read_text())


def test_a_run_counts_its_flops_and_tokens_step_by_step(tmp_path):
    flops, tokens = per_step(tmp_path)
    assert tokens == 32 * 6, "32 rows of 5 letters and the end token"
    run = zoo.train(tiny_experiment(tmp_path / "run", task=FIXED, train=STEPS))
    logged = [(row["train/step"], row["train/flops"], row["train/tokens"]) for row in run.history if "train/flops" in row]
    assert logged == [(step, step * flops, step * tokens) for step in (4, 8, 12)]
    record = result_of(run)
    assert (record["flops"], record["tokens"], record.get("budget_spent_at")) == (12 * flops, 12 * tokens, None)


@pytest.mark.parametrize("budget, steps", [({"tokens": 5 * 32 * 6}, 5), ({"tokens": 5 * 32 * 6 + 1}, 6), ("flops", 7)])
def test_a_budget_ends_the_run_at_the_first_step_that_spends_it(tmp_path, capsys, budget, steps):
    flops, _ = per_step(tmp_path)
    budget = {"flops": 6.5 * flops} if budget == "flops" else budget
    run = zoo.train(tiny_experiment(tmp_path / "run", task=FIXED, train={**STEPS, "steps": 100, "budget": budget}))
    record = result_of(run)
    assert record["status"] == "finished" and record["steps"] == steps == record["budget_spent_at"]
    assert run.history[-1]["train/step"] == steps and "eval/loss" in run.history[-1], "evaluated where it stopped"
    assert any(f"after step {steps} of 100" in line for line in capsys.readouterr().out.splitlines())
    assert run.run_dir.name == zoo.train(tiny_experiment(tmp_path / "same", task=FIXED, train={**STEPS, "steps": 100})
                                         ).run_dir.name, "a budget, like steps, is no part of the run's identity"


def test_the_counts_resume_where_the_checkpoint_left_them(tmp_path):
    whole = zoo.train(tiny_experiment(tmp_path / "whole", task=FIXED, train=STEPS))
    part = tiny_experiment(tmp_path / "parts", task=FIXED, train={**STEPS, "steps": 8})
    zoo.train(part)
    resumed = zoo.train({**part, "train": {**part["train"], "steps": 12}}, resume=True)
    assert (result_of(resumed)["flops"], result_of(resumed)["tokens"]) == (result_of(whole)["flops"],
                                                                            result_of(whole)["tokens"])


def test_a_checkpoint_that_did_not_count_leaves_the_resumed_run_uncounted(tmp_path):
    """A checkpoint written before runs counted their compute: the resumed run cannot know what was
    spent before it, and says none rather than a part."""
    part = tiny_experiment(tmp_path, task=FIXED, train={**STEPS, "steps": 8})
    first = zoo.train(part)
    state = torch.load(first.checkpoint, weights_only=False)
    del state["progress"]["flops"], state["progress"]["tokens"]
    torch.save(state, first.checkpoint)
    resumed = zoo.train({**part, "train": {**part["train"], "steps": 12}}, resume=True)
    record = result_of(resumed)
    assert record.get("flops") is None and record.get("tokens") is None
    assert not any("train/flops" in row for row in resumed.history if row["train/step"] > 8)


@pytest.mark.parametrize("budget, field", [({"flops": -1}, "train.budget.flops"), ({"tokens": 0}, "train.budget.tokens"),
                                            ({"flops": ".inf"}, "train.budget.flops"), ({"time": 3}, "train.budget")])
def test_a_budget_that_is_not_a_positive_number_is_refused_in_one_line(tmp_path, capsys, budget, field):
    experiment = tiny_experiment(tmp_path, train={"budget": budget})
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(experiment).replace("'.inf'", ".inf"))
    said = cli_error(["train", str(tmp_path / "e.yaml")], capsys)
    assert field in said, said
    assert not list(tmp_path.glob("*/checkpoint.pt"))


def test_a_budget_that_never_applies_says_so(tmp_path, capsys, monkeypatch):
    """Never reached (train.steps came first), resumed after it was spent, or asked of a model whose
    FLOPs are not counted: each is said, where the run had said nothing."""
    flops, _ = per_step(tmp_path)
    with pytest.warns(RuntimeWarning, match=r"train.budget: the budget of .* training FLOPs was never reached: "
                                            r"train.steps 12 ended the run at .* \(50%\); raise train.steps"):
        zoo.train(tiny_experiment(tmp_path / "short", task=FIXED, train={**STEPS, "budget": {"flops": 24 * flops}}))
    spent = tiny_experiment(tmp_path / "spent", task=FIXED, train={**STEPS, "steps": 100, "budget": {"tokens": 4 * 32 * 6}})
    zoo.train(spent)
    capsys.readouterr()
    zoo.train({**spent, "train": {**spent["train"], "steps": 200}}, resume=True)
    assert "train.budget: the budget of 768 tokens is spent (768) at step 4: nothing left to train" in \
        capsys.readouterr().out
    from zoo.specs import hooks
    monkeypatch.setattr(hooks, "implements", lambda part, protocol: protocol is not hooks.CountsFlops)
    monkeypatch.setattr("zoo.model.flops.implements", hooks.implements)  # a plugin part that declares none
    with pytest.raises(zoo.ConfigError, match=r"train.budget.flops: ffn relu declares no FLOPs .* budget the run in "
                                              r"tokens instead"):
        zoo.train(tiny_experiment(tmp_path / "plugin", task=FIXED, train={**STEPS, "budget": {"flops": 1e9}}))
    assert not list((tmp_path / "plugin").glob("*/checkpoint.pt"))
