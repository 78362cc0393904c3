"""Weights shared across depth (share_layers) and factorized embeddings (embedding_dim)."""

import torch
from conftest import TINY, padded_batch
from invariants import away_from_init

import zoo
from zoo.model.size_checks import exact_parameters

SRC, TGT = padded_batch([7, 4], 19, seed=1), padded_batch([5, 6], 19, seed=2)


def test_shared_layers_are_one_block_applied_at_every_depth():
    sizes = {**TINY, "n_encoder_layers": 3, "n_decoder_layers": 2}
    shared = away_from_init(zoo.build("pre.sinusoidal.fused.relu", seed=0, share_layers=True, **sizes)).eval()
    assert len(shared.encoder.layers) == 1 and len(shared.encoder.applied()) == 3
    apart = zoo.build("pre.sinusoidal.fused.relu", seed=0, **sizes).eval()
    with torch.no_grad():  # every layer a copy of the one shared block: the same function
        for stack in ("encoder", "decoder"):
            for layer in getattr(apart, stack).layers:
                layer.load_state_dict(getattr(shared, stack).layers[0].state_dict())
        apart.load_state_dict({k: v for k, v in shared.state_dict().items() if ".layers." not in k}, strict=False)
    torch.testing.assert_close(shared(SRC, TGT), apart(SRC, TGT), rtol=0, atol=1e-6)
    one = zoo.build("pre.sinusoidal.fused.relu", seed=0, **{**sizes, "n_encoder_layers": 1, "n_decoder_layers": 1})
    assert shared.num_parameters() == one.num_parameters() == exact_parameters(shared.spec, buffers=False)


def test_factorized_embeddings_project_a_narrow_table_and_a_tied_output_reads_through_it():
    model = away_from_init(zoo.build("pre.sinusoidal.fused.relu", seed=0, embedding_dim=8, tie_embeddings=True,
                                     **TINY)).eval()
    embed = model.decoder.embed
    assert embed.tokens.weight.shape == (19, 8) and embed.project.weight.shape == (16, 8)
    assert model.generator.weight is embed.tokens.weight and model.generator.project.weight.shape == (8, 16)
    hidden = torch.randn(2, 3, 16)
    torch.testing.assert_close(model.generator(hidden),
                               model.generator.project(hidden) @ embed.tokens.weight.T + model.generator.bias)
    full = zoo.build("pre.sinusoidal.fused.relu", seed=0, tie_embeddings=True, **TINY)
    # two tables of 19 x 8 instead of 19 x 16, two input projections 8 x 16 and one output projection 16 x 8
    assert full.num_parameters() - model.num_parameters() == 2 * 19 * 8 - 3 * 8 * 16
    assert exact_parameters(model.spec, buffers=False) == model.num_parameters()
