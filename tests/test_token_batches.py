"""Batching by a token budget: within the budget, similar lengths, whole epochs, equal shares per
rank, a pure function of (seed, step), and training on it."""

import pytest
import torch

import zoo
from trainkit import task_fields, tiny_experiment
from zoo.specs.experiment import validate_experiment
from zoo.tasks import build_task
from zoo.tasks.token_batches import TokenPlan, cut
from zoo.trainer.feed import BatchFeed
from zoo.trainer.parallelism import Parallelism

TOKEN_TASKS = ["parallel", "reverse", "copy", "sort"]


def padded_positions(src: torch.Tensor, tgt: torch.Tensor) -> int:
    return src.size(0) * max(src.size(1), tgt.size(1))


def real_share(src: torch.Tensor, tgt: torch.Tensor) -> float:
    return float(((src != 0).sum() + (tgt != 0).sum()) / (src.numel() + tgt.numel()))


@pytest.mark.parametrize("multiple", [1, 2, 3])
def test_an_epoch_cuts_sorted_pairs_within_the_budget(multiple):
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(3, 40, (500,), generator=gen).tolist()
    plan = TokenPlan(lengths, seed=1, budget=200, multiple=multiple)
    epoch = [plan.rows(step) for step in range(plan.per_epoch)]
    seen = [i for rows in epoch for i in rows]
    assert len(seen) == len(set(seen)) and len(lengths) - len(seen) < multiple * plan.per_epoch
    for rows in epoch:
        assert len(rows) % multiple == 0 and len(rows) * max(lengths[i] for i in rows) <= 200
    again = TokenPlan(lengths, seed=1, budget=200, multiple=multiple)
    assert [again.rows(step) for step in range(3 * plan.per_epoch)] == [plan.rows(s) for s in range(3 * plan.per_epoch)]
    assert [plan.rows(s) for s in range(plan.per_epoch, 2 * plan.per_epoch)] != epoch  # a new order each epoch


def test_a_budget_below_the_longest_pair_names_the_field():
    with pytest.raises(ValueError, match=r"train.batch_tokens: the longest training pair has 30 tokens, so 2 row\(s\) need 60"):
        TokenPlan([5, 30], seed=0, budget=50, multiple=2)
    assert cut([0, 1, 2], [4, 4, 4], budget=8, multiple=1) == [[0, 1], [2]]


@pytest.mark.parametrize("name", TOKEN_TASKS)
def test_token_batches_hold_similar_lengths_and_less_padding(name):
    task = build_task(task_fields(name), seed=0)
    budget = 600
    for step in range(1, 30):
        src, tgt = task.token_batch(step, budget)
        assert padded_positions(src, tgt) <= budget and torch.equal(src, task.token_batch(step, budget)[0])
    sentence_share = sum(real_share(*task.train_batch(s, 32)) for s in range(1, 30)) / 29
    token_share = sum(real_share(*task.token_batch(s, budget)) for s in range(1, 30)) / 29
    assert token_share > sentence_share and 1 - token_share < 0.5 * (1 - sentence_share)


@pytest.mark.parametrize("name", ["parallel", "reverse"])
def test_ranks_get_equal_rows_within_their_budget(name):
    task = build_task(task_fields(name), seed=0)
    spec = zoo.spec("pre-ln", src_vocab_size=len(task.src_vocab), tgt_vocab_size=len(task.tgt_vocab), max_len=256)
    feeds = [BatchFeed(task, 0, spec, Parallelism(rank=r, world=2), torch.device("cpu"), batch_tokens=400)
             for r in range(2)]
    for step in range(1, 20):
        shares = [feed.take(step)[0] for feed in feeds]
        assert shares[0].inputs[0].size(0) == shares[1].inputs[0].size(0)
        for share in shares:
            assert share.inputs[0].size(0) * max(share.inputs[0].size(1), share.inputs[1].size(1) + 1) <= 400
        assert shares[0].tokens == shares[1].tokens  # the global batch's count, the mean's denominator


def test_tasks_without_token_batches_and_small_budgets_are_refused(tmp_path):
    with pytest.raises(zoo.ConfigError, match=r"train.batch_tokens: task 'random' has no token batches; tasks that do: "
                                              r"copy, parallel, reverse, sort"):
        validate_experiment({"task": {"name": "random"}, "train": {"batch_tokens": 1000}})
    experiment = tiny_experiment(tmp_path, train={"batch_tokens": 7})
    with pytest.raises(zoo.ConfigError, match=r"batch_tokens: 1 row of 8 tokens needs 8 positions, more than the budget of 7"):
        zoo.train(experiment)


@pytest.mark.slow
@pytest.mark.parametrize("task", [{"name": "reverse", "min_len": 3, "max_len": 6}, task_fields("parallel")],
                         ids=["reverse", "parallel"])
def test_training_on_token_batches_lowers_the_loss(tmp_path, task):
    experiment = tiny_experiment(tmp_path, task=task, train={"batch_tokens": 500, "steps": 60, "eval_every": 60,
                                                             "checkpoint_every": 60})
    result = zoo.train(experiment)
    losses = [row["train/loss"] for row in result.history if "train/loss" in row]
    assert losses[-1] < 0.85 * losses[0]
