"""Initialization by role: every part declares what each of its matrices and tables is for, and
DeepNorm, Fixup and T5's query rule read those roles, never attribute names; a renamed weight
fails at build time instead of silently changing its draw."""

import math

import pytest
import torch
from conftest import PART_IDS, PARTS

import zoo
from zoo.model.assembly import stack_sites
from zoo.model.canonical import canonical_entries
from zoo.model.init import placements
from zoo.specs.registries import registry
from zoo.variants.ffn import ReLUFeedForward

SMALL = {"vocab_size": 20, "d_model": 16, "n_heads": 2, "d_ff": 32, "n_encoder_layers": 2, "n_decoder_layers": 2}


def roles_of(model):
    entries = list(canonical_entries(model))
    return {name: (placed, tensor) for (name, tensor, _), placed in
            zip(entries, placements(model, entries, stack_sites(model.spec)).values(), strict=True)}


@pytest.mark.parametrize("axis, name", PARTS, ids=PART_IDS)
def test_every_matrix_and_table_of_every_part_has_a_role(axis, name):
    extra = {"position": {"name": "learned", "token_types": 2}} if (axis, name) == ("position", "learned") else {}
    model = zoo.build("pre.sinusoidal.fused.relu", seed=0, embedding_dim=8, output_transform=True,
                      **{**SMALL, axis: name, **extra})
    undeclared = [n for n, (placed, tensor) in roles_of(model).items() if tensor.dim() >= 2 and placed.role is None]
    assert not undeclared


class Renamed(ReLUFeedForward):
    """The relu feed-forward with its last layer renamed: `out` instead of `linear2`."""

    def __init__(self, spec):
        super().__init__(spec)
        self.out = self.linear2
        del self.linear2

    def forward(self, x):
        return self.out(self.dropout(self.act(self.linear1(x))))


class RenamedAndDeclared(Renamed):
    weight_roles = {"linear1.weight": "ffn.input", "out.weight": "ffn.output"}  # noqa: RUF012


@pytest.fixture
def renamed_parts():
    ffn = registry("ffn")
    ffn.register("renamed")(Renamed)
    ffn.register("renamed_declared")(RenamedAndDeclared)
    yield
    del ffn._parts["renamed"], ffn._parts["renamed_declared"]


def test_a_renamed_weight_is_an_error_naming_it_not_a_silently_changed_draw(renamed_parts):
    with pytest.raises(ValueError, match=r"Renamed at encoder\.layers\.0\.ffn holds out\.weight but declares no role"):
        zoo.build("fixup.sinusoidal.fused.renamed", seed=0, **SMALL)


@pytest.mark.parametrize("norm", ["fixup", "deepnorm"])
def test_placements_treat_a_declared_role_as_they_treat_the_builtin_weight(renamed_parts, norm):
    """Renamed and declared, the last layer is drawn as relu's `linear2` is: the same placement
    gain (Fixup: zero; DeepNorm: beta), so the same bound of its uniform draw."""
    renamed = zoo.build(f"{norm}.sinusoidal.fused.renamed_declared", seed=0, **SMALL).state_dict()
    builtin = zoo.build(f"{norm}.sinusoidal.fused.relu", seed=0, **SMALL).state_dict()
    for layer in ("encoder.layers.0", "decoder.layers.1"):
        ours, theirs = renamed[f"{layer}.ffn.out.weight"], builtin[f"{layer}.ffn.linear2.weight"]
        if norm == "fixup":
            assert not ours.any() and not theirs.any()
        else:
            assert ours.abs().max() < theirs.abs().max() * 1.2 and theirs.abs().max() < ours.abs().max() * 1.2
            fan = ours.size(0) + ours.size(1)
            assert ours.abs().max() < math.sqrt(6 / fan), "beta < 1 shrinks the draw"
        assert torch.equal(renamed[f"{layer}.ffn.linear1.weight"], builtin[f"{layer}.ffn.linear1.weight"])


def test_a_role_declared_for_a_weight_the_part_lacks_is_named(renamed_parts):
    class Overdeclared(RenamedAndDeclared):
        weight_roles = {**RenamedAndDeclared.weight_roles, "linear3.weight": "ffn.output"}  # noqa: RUF012

    registry("ffn").register("overdeclared")(Overdeclared)
    try:
        with pytest.raises(ValueError, match=r"Overdeclared at encoder\.layers\.0\.ffn declares roles for "
                                             r"\['linear3\.weight'\], which it does not hold"):
            zoo.build("post.sinusoidal.fused.overdeclared", seed=0, **SMALL)
    finally:
        del registry("ffn")._parts["overdeclared"]


def test_t5s_query_rule_is_read_from_the_role():
    scaled = zoo.build("pre.t5.fused.relu", seed=0, **SMALL)
    unscaled = zoo.build("pre.t5.fused.relu", seed=0, scale_scores=False, **SMALL)
    d_head = SMALL["d_model"] // SMALL["n_heads"]
    for name, (placed, tensor) in roles_of(unscaled).items():
        if placed.role == "attention.query":
            assert torch.allclose(tensor, roles_of(scaled)[name][1] * d_head**-0.5)
