"""The numbers that define the feed-forward parts and the `auto` width."""

import pytest
import torch
import torch.nn.functional as F
from conftest import TINY

import zoo
from zoo.cli import main


def tanh_gelu(x):
    return F.gelu(x, approximate="tanh")


GATED = {"swiglu": F.silu, "geglu": F.gelu, "reglu": F.relu, "geglu_tanh": tanh_gelu, "glu": torch.sigmoid,
         "liglu": lambda x: x}
DENSE = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": tanh_gelu, "swish": F.silu, "relu2": lambda x: F.relu(x) ** 2,
         "elu": lambda x: torch.where(x > 0, x, x.exp() - 1),
         "selu": lambda x: 1.0507009873554805 * torch.where(x > 0, x, 1.6732632423543772 * (x.exp() - 1))}


def test_every_feed_forward_part_has_its_formula_here():
    """The mixture of experts, built of these, has its formula in test_moe.py."""
    assert set(zoo.registry("ffn").names()) == GATED.keys() | DENSE.keys() | {"moe"}


def ffn_of(name: str, **overrides):
    return zoo.build(f"post.sinusoidal.fused.{name}", seed=0, **{**TINY, **overrides}).encoder.layers[0].ffn


@pytest.mark.parametrize("name", GATED)
def test_gated_units_multiply_an_activated_and_a_linear_branch(name):
    ffn, x = ffn_of(name), torch.randn(2, 3, 16)
    expected = ffn.linear2(GATED[name](x @ ffn.gate.weight.T + ffn.gate.bias) * (x @ ffn.linear1.weight.T + ffn.linear1.bias))
    torch.testing.assert_close(ffn(x), expected)


@pytest.mark.parametrize("name", DENSE)
def test_dense_units_activate_between_two_linear_maps(name):
    ffn, x = ffn_of(name), torch.randn(2, 3, 16)
    torch.testing.assert_close(ffn(x), ffn.linear2(DENSE[name](ffn.linear1(x))))


def test_the_tanh_gelu_is_the_approximation_not_the_exact_gelu():
    x = torch.linspace(-4, 4, 101)
    assert not torch.allclose(ffn_of("gelu_tanh").act(x), F.gelu(x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("d_model, dense, gated", [(512, 2048, 1368), (16, 64, 48), (768, 3072, 2048)])
def test_auto_width(d_model, dense, gated):
    for ffn in zoo.registry("ffn").names():
        spec = zoo.spec(f"post.sinusoidal.fused.{ffn}", vocab_size=9, d_model=d_model, n_heads=8, d_ff="auto")
        assert spec.ffn_width == (gated if ffn in GATED else dense)  # an MoE's experts: 4 d_model each
        assert spec.d_ff == "auto" and spec.name == f"post.sinusoidal.fused.{ffn}"


@pytest.mark.slow
def test_auto_width_keeps_parameter_counts_comparable():
    """Among the dense and gated parts; an MoE holds `experts` of them by design."""
    counts = {ffn: zoo.build("vaswani2017", vocab_size=100, ffn=ffn, d_ff="auto").num_parameters()
              for ffn in zoo.registry("ffn").names() if ffn != "moe"}
    assert max(counts.values()) / min(counts.values()) < 1.002


def test_show_prints_the_resolved_width_and_the_parameter_count(capsys):
    main(["show", "vaswani2017", "--set", "vocab_size=100", "ffn=swiglu", "d_ff=auto"])
    out = capsys.readouterr().out
    assert "# d_ff: auto = 1368 for ffn swiglu" in out
    assert f"# parameters: {zoo.build('vaswani2017', vocab_size=100, ffn='swiglu', d_ff='auto').num_parameters():,d}" in out
