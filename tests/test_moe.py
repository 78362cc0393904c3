"""Mixture of experts: routing by a known answer, capacity in training only, padding never routed,
every expert in the graph, and the load-balancing loss reaching the training loss and W&B."""

import pytest
import torch
from conftest import TINY, padded_batch

import zoo
from trainkit import offline_run, tiny_experiment
from zoo.kernels.routing import balance_loss, capacity_of, route

MOE = "pre.sinusoidal.fused.moe"


def test_top_1_gates_by_the_probability_and_top_2_renormalizes():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.0, 0.0, 3.0, 0.0]])
    probs = logits.softmax(-1)
    one = route(logits, 1)
    assert one.choice.tolist() == [[0], [2]] and torch.allclose(one.gate[:, 0], probs.max(-1).values)
    two = route(logits, 2)
    assert two.choice[0].tolist() == [0, 1]
    torch.testing.assert_close(two.gate[0], probs[0, :2] / probs[0, :2].sum())
    assert two.kept.all()


def test_capacity_keeps_first_choices_first_then_earlier_tokens():
    logits = torch.tensor([[3.0, 2, 0], [3, 0, 2], [3, 2, 0], [2, 3, 0]])  # choices [0, 1], [0, 2], [0, 1], [1, 0]
    routes = route(logits, 2, capacity=torch.tensor(2))
    assert routes.choice.tolist() == [[0, 1], [0, 2], [0, 1], [1, 0]]
    kept = routes.kept
    # expert 0: tokens 0, 1 (first choices) fit, 2 (first) and 3 (second) do not; expert 1: token 3's
    # first choice, then token 0's second fit, token 2's second does not; expert 2: token 1's second
    assert kept.tolist() == [[True, True], [True, True], [False, False], [True, False]]
    assert capacity_of(tokens=10, experts=4, top_k=2, factor=1.25) == 7  # ceil(1.25 * 20 / 4)
    assert capacity_of(torch.tensor(10), 4, 2, 1.25).item() == 7
    padded = route(logits, 2, real=torch.tensor([True, False, True, True]), capacity=2)
    # without token 1, expert 0 takes tokens 0 and 2; expert 1 token 3's first choice, token 0's second
    assert padded.kept.tolist() == [[True, True], [False, False], [True, False], [True, False]]
    assert padded.place[2, 1] == 2 and padded.place[1].tolist() == [-1, -1], "padding takes no place"


def test_the_balance_loss_is_one_when_balanced_and_grows_with_imbalance():
    even = route(torch.eye(4) * 5, 1)
    assert balance_loss(even).item() == pytest.approx(1.0)
    skewed = route(torch.tensor([[5.0, 0, 0, 0]] * 4), 1)  # all to expert 0: 4 * (1 * p0) = 4 p0
    assert balance_loss(skewed).item() == pytest.approx(4 * skewed.probs[:, 0].mean().item())
    assert balance_loss(route(torch.zeros(0, 4), 2)).item() == 0.0


def test_the_output_is_the_gated_sum_of_the_chosen_experts():
    model = zoo.build(MOE, seed=0, **TINY)
    moe = model.encoder.layers[0].ffn
    x = torch.randn(2, 3, 16)
    routes = route(moe.router(x.reshape(-1, 16)), 2)
    expected = torch.stack([sum(g * moe.experts[int(e)](t) for g, e in zip(gates, choices, strict=True))
                            for t, gates, choices in zip(x.reshape(-1, 16), routes.gate, routes.choice, strict=True)])
    torch.testing.assert_close(moe.eval()(x), expected.reshape(2, 3, 16))


def test_padding_is_not_routed_and_evaluation_drops_nothing():
    moe = zoo.build(MOE + "+capacity_factor=0.1", seed=0, **TINY).encoder.layers[0].ffn
    x, real = torch.randn(3, 5, 16), torch.ones(3, 5, dtype=torch.bool)
    real[1, 2:] = False
    moe.eval()
    out = moe(x, real=real)
    assert not out[1, 2:].any(), "padding gets no expert output"
    for row in range(3):  # no capacity in evaluation: a row's output is its own
        torch.testing.assert_close(out[row, real[row]], moe(x[row : row + 1, real[row]])[0])
    moe.train()
    trained = moe(x, real=real)
    assert moe.aux_loss is not None and not trained[1, 2:].any()
    dropped = (trained - out).abs().amax(-1)[real] > 1e-6
    assert dropped.any(), "a capacity of 0.1 of an even share drops assignments in training"


@pytest.mark.parametrize("factor", [100.0, 1e20, 3e38])
def test_training_without_drops_computes_what_evaluation_does(factor):
    """The buffered training path and the exact evaluation path are one function when the
    capacity drops nothing (dropout 0 in TINY), however large the factor: a count past every
    assignment once overflowed to a negative capacity that dropped every token."""
    assert capacity_of(torch.tensor(10), 4, 2, factor).item() == capacity_of(10, 4, 2, factor) == 20
    moe = zoo.build(MOE + f"+capacity_factor={factor!r}", seed=0, **TINY).encoder.layers[0].ffn
    x, real = torch.randn(3, 5, 16), torch.ones(3, 5, dtype=torch.bool)
    real[0, 3:] = False
    trained = moe.train()(x, real=real)
    torch.testing.assert_close(trained, moe.eval()(x, real=real), rtol=1e-6, atol=1e-6)


def test_every_expert_gets_a_gradient_even_when_no_token_chose_it():
    moe = zoo.build(MOE + "+top_k=1", seed=0, **TINY).encoder.layers[0].ffn.train()
    with torch.no_grad():  # every token prefers expert 0 by far
        moe.router.weight.zero_()
    moe.router.bias = torch.nn.Parameter(torch.tensor([9.0] + [0.0] * 7))
    out = moe(torch.randn(2, 4, 16))
    (out.sum() + moe.aux_loss).backward()
    idle = moe.experts[5]
    assert all(p.grad is not None and not p.grad.any() for p in idle.parameters())
    assert moe.experts[0].linear1.weight.grad.abs().sum() > 0


def test_experts_start_as_dense_feed_forwards_of_their_width():
    model = zoo.build(MOE, seed=3, **TINY)
    dense = zoo.build("pre.sinusoidal.fused.relu", seed=3, **TINY)
    expert, ffn = model.encoder.layers[0].ffn.experts[0], dense.encoder.layers[0].ffn
    assert expert.linear1.weight.shape == ffn.linear1.weight.shape
    bound = (6 / (16 + 32)) ** 0.5  # Xavier-uniform, as the dense layer's
    assert expert.linear1.weight.abs().max() <= bound and expert.linear1.weight.std() > 0.5 * bound / 3**0.5
    assert not torch.equal(expert.linear1.weight, model.encoder.layers[0].ffn.experts[1].linear1.weight)


@pytest.mark.slow
def test_the_auxiliary_loss_joins_training_and_reaches_wandb(tmp_path):
    moe = {"ffn": {"name": "moe", "experts": 4, "aux_loss_weight": 0.5}, "norm": "pre"}
    experiment = tiny_experiment(tmp_path, model=moe, train={"steps": 40, "eval_every": 40, "log_every": 20},
                                 wandb={"mode": "offline", "dir": str(tmp_path)})
    result = zoo.train(experiment)
    aux = [row["train/aux_loss"] for row in result.history if "train/aux_loss" in row]
    assert len(aux) == 2 and all(0.5 <= value <= 0.5 * 4 for value in aux), "0.5 times a loss in [1, experts]"
    _, records = offline_run(tmp_path)
    logged = [r["history"]["item"]["train/aux_loss"] for r in records
              if r["type"] == "history" and "train/aux_loss" in r["history"]["item"]]
    assert logged == pytest.approx(aux)
    plain = zoo.train(tiny_experiment(tmp_path / "plain", train={"steps": 20, "eval_every": 20}))
    assert not any("train/aux_loss" in row for row in plain.history), "only models whose parts add one"


def test_the_auxiliary_loss_sums_every_moe_layer_and_reaches_every_router():
    model = zoo.build(MOE, seed=0, **TINY).train()
    src, tgt = padded_batch([5, 4], 19, seed=1), padded_batch([4, 3], 19, seed=2)
    model(src, tgt)
    total = zoo.trainer.objective.auxiliary_loss(zoo.trainer.objective.auxiliary_losses(model))
    layers = [m for m in model.modules() if isinstance(m, zoo.registry("ffn").get("moe"))]
    assert len(layers) == 3 and torch.allclose(total, sum(m.aux_loss for m in layers))
    total.backward()
    assert all(m.router.weight.grad.abs().sum() > 0 for m in layers)
