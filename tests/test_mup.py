"""muP (zoo.specs.parametrization, zoo.model.mup): every part declares how it scales or is refused
in one line; at its base width a muP model is its standard self; away from it the output
multiplier, the scores' scale, the tables' std, the router's draw and Adam's per-layer rates move
with width as Yang et al. 2022 prescribe."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import PART_IDS, PARTS, TINY, tiny
from torch import nn

import zoo
from zoo.errors import ConfigError
from zoo.model.mup import rate_multipliers
from zoo.parts import FeedForwardBase
from zoo.specs.experiment import ExperimentSpec, validate_experiment
from zoo.specs.ladder import mup_at, widened
from zoo.specs.parametrization import part_problem, score_scale
from zoo.trainer.optim import make_optimizer
from zoo.variants.ffn import ReLUFeedForward

PRE = "pre.sinusoidal.fused.relu"


def with_part(axis: str, name: str) -> dict:
    """A spec's fields with one part in place (tiny MoE: two experts)."""
    return {axis: {"name": "moe", "experts": 2} if name == "moe" else name}


@pytest.mark.parametrize("axis, name", PARTS, ids=PART_IDS)
def test_every_part_declares_its_scaling_or_is_refused_in_one_line(axis, name):
    part = zoo.registry(axis).get(name)
    problem = part_problem(axis, name, part)
    if problem is None:
        spec = tiny(PRE, parametrization="mup", mup_base_width=8, **with_part(axis, name))
        assert spec.parametrization == "mup"
    else:
        assert "\n" not in problem and f"{axis} {name}" in problem
        with pytest.raises(ConfigError, match=f"parametrization mup: {axis} {name}"):
            tiny(PRE, parametrization="mup", mup_base_width=8, **with_part(axis, name))


def test_a_part_without_a_declaration_is_refused_and_a_derived_part_inherits_its_parents():
    class Undeclared(FeedForwardBase):
        pass

    class Derived(ReLUFeedForward):
        pass

    assert "declares no scaling with width" in part_problem("ffn", "undeclared", Undeclared)
    assert part_problem("ffn", "derived", Derived) is None


@pytest.mark.parametrize("fields, text", [
    ({"parametrization": "mup"}, "parametrization mup needs mup_base_width"),
    ({"mup_base_width": 8}, "mup_base_width 8 is read under parametrization mup only"),
    ({"parametrization": "mup", "mup_base_width": 0}, "mup_base_width"),
    ({"parametrization": "mup", "mup_base_width": 8, "scale_scores": False}, "attn.scale_scores false"),
    ({"parametrization": "mup", "mup_base_width": 8, "embedding_dim": 4}, "embeddings.dim"),
    ({"parametrization": "mup", "mup_base_width": 8, "qk_norm": "l2"}, "attn.qk_norm l2"),
    ({"parametrization": "mupp"}, "'standard' or 'mup'"),
])
def test_bad_parametrizations_are_one_line_naming_the_field(fields, text):
    with pytest.raises(ConfigError, match=text) as caught:
        tiny(PRE, **fields)
    assert "\n" not in str(caught.value)


def test_mup_refuses_an_optimizer_whose_updates_follow_the_gradients_size():
    with pytest.raises(ConfigError, match=r"train.optimizer sgd: parametrization mup .* choices: adam, adamw"):
        validate_experiment({"model": {"parametrization": "mup", "mup_base_width": 16},
                                 "train": {"optimizer": {"name": "sgd"}}})


@pytest.mark.parametrize("axis, name", [p for p in PARTS if p != ("norm_type", "scalenorm")],
                         ids=[i for i, p in zip(PART_IDS, PARTS) if p != ("norm_type", "scalenorm")])
def test_at_its_base_width_a_mup_model_is_its_standard_self(axis, name):
    standard = tiny(PRE, **with_part(axis, name))
    mup = standard.replace(parametrization="mup", mup_base_width=standard.d_model)
    src, tgt = torch.randint(3, TINY["vocab_size"], (2, 5)), torch.randint(3, TINY["vocab_size"], (2, 4))
    a, b = zoo.build(standard, seed=0).eval(), zoo.build(mup, seed=0).eval()
    assert torch.equal(a(src, tgt), b(src, tgt))
    assert set(rate_multipliers(b)) == {1.0}


def wide(name: str = "pre.t5.fused.moe", width: int = 64, **fields) -> tuple[zoo.ModelSpec, zoo.ModelSpec]:
    """(standard, muP) at `width`, grown from TINY's d_model 16 by the ladder's rule."""
    base = zoo.recipe(tiny(name, **fields))
    return (widened(base, width).sized(19, 19), mup_at(base, width, base).sized(19, 19))


def test_the_output_multiplier_and_the_tables_scale_with_the_base_width():
    standard, mup = wide(scale_output=False)
    m = mup.d_model / mup.mup_base_width
    a, b = zoo.build(standard, seed=0), zoo.build(mup, seed=0)
    assert a.generator.scale == 1.0 and b.generator.scale == pytest.approx(1 / m)
    assert b.decoder.embed.scale == pytest.approx(math.sqrt(16)) and a.decoder.embed.scale == pytest.approx(8.0)
    assert b.decoder.embed.init_std == pytest.approx(16**-0.5)
    assert b.decoder.embed.position.init_std == pytest.approx(16**-0.5)  # T5's bias table: an input weight
    assert b.decoder.embed.tokens.weight.detach().std() == pytest.approx(16**-0.5, rel=0.1)


def test_attention_scales_scores_by_one_over_the_head_width_past_the_base():
    base = zoo.recipe(tiny(PRE))
    heads_held = base.replace(parametrization="mup", mup_base_width=16, d_model=64)  # d_head 4 -> 16
    assert heads_held.d_head == 16 and score_scale(heads_held) == pytest.approx(math.sqrt(4) / 16)
    counted = mup_at(base, 64, base)  # heads grow in count, each keeping width 4
    assert counted.d_head == 4 and score_scale(counted) == pytest.approx(4**-0.5) == score_scale(base)


def test_the_router_draws_a_readouts_std_and_hidden_matrices_train_at_one_over_m():
    standard, mup = wide()
    m = mup.d_model / mup.mup_base_width
    a, b = zoo.build(standard, seed=0), zoo.build(mup, seed=0)
    router_a, router_b = a.decoder.layers[0].ffn.router.weight, b.decoder.layers[0].ffn.router.weight
    assert torch.allclose(router_b, router_a / math.sqrt(m))
    rates = dict(zip(map(id, b.parameters()), rate_multipliers(b), strict=True))
    layer = b.decoder.layers[0]
    assert rates[id(layer.self_attn.qkv.weight if hasattr(layer.self_attn, "qkv") else
                     next(layer.self_attn.parameters()))] == pytest.approx(1 / m)
    assert rates[id(layer.ffn.experts[0].linear1.weight)] == pytest.approx(1 / m)
    assert rates[id(layer.ffn.router.weight)] == pytest.approx(1 / m)
    for base_rate in (b.decoder.embed.tokens.weight, b.generator.weight, b.decoder.embed.position.bias.weight,
                      layer.ffn.experts[0].linear1.bias, b.decoder.norm.weight):
        assert rates[id(base_rate)] == 1.0


def test_the_optimizer_trains_each_parameter_once_at_its_rate_the_base_rate_first():
    _, mup = wide()
    model = zoo.build(mup, seed=0)
    experiment = ExperimentSpec.model_validate({"model": zoo.recipe(mup).model_dump(), "task": {"name": "copy"},
                                                "train": {"optimizer": {"name": "adamw", "lr": 0.01}}})
    optimizer = make_optimizer(model, experiment.train)
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([0.01, 0.01 * 16 / 64])
    held = [id(p) for g in optimizer.param_groups for p in g["params"]]
    assert sorted(held) == sorted(map(id, model.parameters()))
    by_group = {id(p): g["lr"] / 0.01 for g in optimizer.param_groups for p in g["params"]}
    assert [by_group[id(p)] for p in model.parameters()] == pytest.approx(rate_multipliers(model))


def test_a_mup_spec_round_trips_through_its_name_and_keeps_standard_names():
    _, mup = wide()
    assert "parametrization=mup+mup_base_width=16+mup_base_head_width=4" in mup.name
    assert zoo.spec(mup.name, **{k: getattr(mup, k) for k in ("d_model", "n_heads", "d_ff", "src_vocab_size",
                                                                "tgt_vocab_size", "n_encoder_layers",
                                                                "n_decoder_layers", "dropout", "max_len")},
                    n_kv_heads=mup.attn.n_kv_heads, ffn=mup.ffn.model_dump()) == mup
    assert "parametrization" not in tiny(PRE).name


def test_the_ladder_grows_heads_by_their_count_and_refuses_widths_they_cannot_reach():
    base = zoo.recipe(tiny(PRE))
    assert (widened(base, 48).n_heads, widened(base, 48).d_head, widened(base, 48).d_ff) == (12, 4, 96)
    with pytest.raises(ConfigError, match=r"n_heads 4 of d_model 16 grows to 4\.5"):
        widened(base, 18)
    with pytest.raises(ConfigError, match=r"n_kv_heads 2 of d_model 16 grows to 2\.5"):
        widened(base, 20)


def test_a_plain_module_outside_the_roles_trains_at_one_over_m_when_it_is_a_matrix():
    _, mup = wide(PRE)
    model = zoo.build(mup, seed=0)
    rates = dict(zip(map(id, model.parameters()), rate_multipliers(model), strict=True))
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)} | {id(model.generator.weight)}
    assert all(rates[id(p)] == (1.0 if id(p) in tables else pytest.approx(0.25)) for p in matrices)


def test_no_family_expresses_mup_so_to_hf_refuses_it_by_name():
    pytest.importorskip("transformers")
    spec = zoo.spec("llama", vocab_size=64, d_model=32, n_heads=2, d_ff=64, n_decoder_layers=2, max_len=64,
                    parametrization="mup", mup_base_width=16)
    with pytest.raises(ConfigError, match=r"cannot express parametrization 'mup' \(llama: 'standard'\)"):
        zoo.to_hf(zoo.build(spec, seed=0))
