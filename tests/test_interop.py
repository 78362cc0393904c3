"""The zoo's parts are the textbook math: torch.nn.Transformer's weights give its logits."""

import math

import pytest
import torch
from conftest import padded_batch
from torch import nn

import zoo
from zoo.interop import from_torch

VOCAB, D, HEADS, LAYERS, D_FF = 23, 32, 4, 2, 64


class TutorialSeq2Seq(nn.Module):
    """The usual wrapper of the PyTorch tutorials, written out independently of the zoo."""

    def __init__(self, norm_first: bool, activation: str, scale: bool):
        super().__init__()
        self.transformer = nn.Transformer(
            D, HEADS, LAYERS, LAYERS, D_FF, dropout=0.1, activation=activation, batch_first=True, norm_first=norm_first
        )
        self.src_embedding, self.tgt_embedding = nn.Embedding(VOCAB, D), nn.Embedding(VOCAB, D)
        self.generator = nn.Linear(D, VOCAB)
        self.scale = math.sqrt(D) if scale else 1.0
        position = torch.arange(100).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, D, 2) * (-math.log(10000.0) / D))
        self.register_buffer("pe", torch.zeros(100, D))
        self.pe[:, 0::2] = torch.sin(position * div_term)
        self.pe[:, 1::2] = torch.cos(position * div_term)

    def forward(self, src, tgt, pad=0):
        s = self.src_embedding(src) * self.scale + self.pe[: src.size(1)]
        t = self.tgt_embedding(tgt) * self.scale + self.pe[: tgt.size(1)]
        causal = torch.triu(torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool), diagonal=1)
        out = self.transformer(
            s, t, tgt_mask=causal, src_key_padding_mask=src == pad,
            tgt_key_padding_mask=tgt == pad, memory_key_padding_mask=src == pad,
        )
        return self.generator(out)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("scale", [False, True])
def test_from_torch_reproduces_the_reference(norm_first, activation, scale):
    torch.manual_seed(0)
    reference = TutorialSeq2Seq(norm_first, activation, scale).eval()
    model = from_torch(
        reference.transformer, reference.src_embedding, reference.tgt_embedding, reference.generator,
        scale_embeddings=scale,
    ).eval()
    switches = [*([] if norm_first else ["final_norm=true"]), *([] if scale else ["scale_embeddings=false"])]
    assert model.spec.name == ".".join([f"{'pre' if norm_first else 'post'}.sinusoidal.fused.{activation}",
                                        *(["+".join(switches)] if switches else [])])
    assert model.spec.uses_final_norm and model.spec.dropout == 0.1
    src_lengths, tgt_lengths = [9, 4, 7, 2], [8, 3, 6, 5]
    src, tgt = padded_batch(src_lengths, VOCAB, seed=1), padded_batch(tgt_lengths, VOCAB, seed=2)
    with torch.no_grad():
        expected, actual = reference(src, tgt), model(src, tgt)
    for row, length in enumerate(tgt_lengths):
        torch.testing.assert_close(actual[row, :length], expected[row, :length], atol=1e-5, rtol=0)
    per_head = zoo.convert(model, attention="per_head")
    with torch.no_grad():
        torch.testing.assert_close(per_head(src, tgt)[0, :8], expected[0, :8], atol=1e-5, rtol=0)


def test_parameter_count_matches_the_torch_wrapper():
    transformer = nn.Transformer(256, 4, 2, 2, 512, batch_first=True)
    torch_count = sum(p.numel() for p in transformer.parameters()) + 2 * 5000 * 256 + (256 * 5000 + 5000)
    model = zoo.build(
        "torch-transformer", vocab_size=5000, d_model=256, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=512
    )
    for attention in zoo.registry("attention").names():
        assert zoo.convert(model, attention=attention).num_parameters() == torch_count


def test_unsupported_torch_layouts_are_refused():
    embedding, generator = nn.Embedding(VOCAB, D), nn.Linear(D, VOCAB)
    with pytest.raises(ValueError, match="batch_first=True"):
        from_torch(nn.Transformer(D, HEADS, 1, 1, D_FF), embedding, embedding, generator)
    tanh_gelu = nn.Transformer(D, HEADS, 1, 1, D_FF, activation=nn.GELU(approximate="tanh"), batch_first=True)
    with pytest.raises(ValueError, match="relu and exact gelu"):
        from_torch(tanh_gelu, embedding, embedding, generator)
    with pytest.raises(ValueError, match="layer_norm_eps=1e-5"):
        from_torch(nn.Transformer(D, HEADS, 1, 1, D_FF, layer_norm_eps=1e-6, batch_first=True), embedding, embedding, generator)
