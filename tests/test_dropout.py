"""zoo's dropout: torch's semantics (keep with probability 1 - p, scale by 1 / (1 - p), identity in
eval mode, gradient through the kept elements only), drawn from uniform floats on CPU."""

import pytest
import torch
from conftest import TINY, padded_batch

import zoo
from zoo.dropout.masks import Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_keeps_with_probability_one_minus_p_and_scales(p, dtype):
    torch.manual_seed(0)
    x = torch.ones(400, 500, dtype=dtype)
    y = dropout(x, p)
    assert y.dtype == dtype
    dropped = (y == 0).double().mean().item()
    sd = (p * (1 - p) / x.numel()) ** 0.5
    assert abs(dropped - p) < 5 * sd  # a binomial count within five standard deviations
    assert torch.equal(y[y != 0].unique(), torch.tensor([1 / (1 - p)], dtype=dtype))


def test_gradient_flows_through_the_kept_elements_only():
    torch.manual_seed(1)
    x = torch.randn(64, 32, requires_grad=True)
    y = dropout(x, 0.25)
    y.sum().backward()
    kept = y != 0
    assert torch.allclose(x.grad[kept], torch.full_like(x.grad[kept], 1 / 0.75))
    assert (x.grad[~kept] == 0).all()


def test_eval_mode_zero_and_one_are_torchs():
    x = torch.randn(8, 8)
    module = Dropout(0.3).eval()
    assert module(x) is x and dropout(x, 0.0) is x
    assert (dropout(x, 1.0) == 0).all()
    assert repr(Dropout(0.3)) == "Dropout(p=0.3, inplace=False)"


def test_the_draw_follows_the_global_seed():
    x = torch.ones(50, 50)
    torch.manual_seed(3)
    first = dropout(x, 0.5)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.5), first)


SITES = {"attention": "attention_dropout", "activation": "activation_dropout", "residual": "residual_dropout",
         "embedding": "embedding_dropout"}


@pytest.mark.parametrize("site", SITES)
def test_each_site_drops_at_its_own_rate_and_the_others_at_theirs(site):
    """dropout 0.3 everywhere but one site: in train mode only that site changes the output, and
    `dropout` stands for every site left null."""
    zeros = {field: 0.0 for field in SITES.values()}
    spec = zoo.spec("decoder.pre.learned.fused.relu", **{**TINY, "dropout": 0.3}, **{**zeros, SITES[site]: 0.3})
    assert [spec.dropout_at(s) for s in SITES] == [0.3 if s == site else 0.0 for s in SITES]
    assert zoo.spec("decoder.pre.learned.fused.relu", **{**TINY, "dropout": 0.3}).dropout_at(site) == 0.3
    ids = padded_batch([7, 5], 19, seed=2)
    for rates, changes in (({**zeros}, False), ({**zeros, SITES[site]: 0.3}, True)):
        model = zoo.build(spec.replace(**rates), seed=0)
        with torch.no_grad():
            expected = model.eval()(ids)
            torch.manual_seed(0)
            trained = model.train()(ids)
        assert torch.equal(trained, expected) != changes, (site, rates)
    assert spec.name == zoo.spec("decoder.pre.learned.fused.relu", **TINY).name, "rates are no part of a name"
