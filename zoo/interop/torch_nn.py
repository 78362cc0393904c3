"""Interop with torch.nn.Transformer: the proof that the zoo's parts are the textbook math.

`from_torch` takes the usual wrapper of the PyTorch tutorials,
logits = generator(transformer(pe(src_embedding(src)), pe(tgt_embedding(tgt)), masks)),
and returns a zoo model with those weights that computes the same logits.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.model.canonical import canonical_state, load_canonical_state
from zoo.model.kinds import EncoderDecoder, build
from zoo.specs.catalog import entering, merge_fields
from zoo.specs.model_spec import ModelSpec


def _activation(layer: nn.Module) -> str:
    act = layer.activation
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU) and act.approximate == "none"):
        return "gelu"
    raise InteropError(f"from_torch supports relu and exact gelu activations, got {act!r}")


def _attention(mha: nn.MultiheadAttention, prefix: str) -> dict[str, Tensor]:
    if not mha._qkv_same_embed_dim or mha.in_proj_bias is None:
        raise InteropError(f"{prefix}: from_torch needs attention with one packed, biased in_proj")
    q, k, v = mha.in_proj_weight.chunk(3)
    qb, kb, vb = mha.in_proj_bias.chunk(3)
    return {
        f"{prefix}.q.weight": q, f"{prefix}.k.weight": k, f"{prefix}.v.weight": v,
        f"{prefix}.q.bias": qb, f"{prefix}.k.bias": kb, f"{prefix}.v.bias": vb,
        f"{prefix}.out.weight": mha.out_proj.weight, f"{prefix}.out.bias": mha.out_proj.bias,
    }


def _module(module: nn.Module, prefix: str) -> dict[str, Tensor]:
    return {f"{prefix}.{name}": param for name, param in module.named_parameters()}


def _check_layout(transformer: nn.Transformer) -> tuple[str, str]:
    layers = [*transformer.encoder.layers, *transformer.decoder.layers]
    first = layers[0]
    if not first.self_attn.batch_first:
        raise InteropError("from_torch needs torch.nn.Transformer(batch_first=True)")
    for layer in layers:
        if layer.norm_first != first.norm_first or _activation(layer) != _activation(first):
            raise InteropError("from_torch needs every layer to share norm_first and the activation")
        if layer.norm1.eps != 1e-5 or layer.linear1.bias is None or layer.norm1.bias is None:
            raise InteropError("from_torch supports layer_norm_eps=1e-5 and bias=True, as torch's defaults")
    return ("pre" if first.norm_first else "post"), _activation(first)


def from_torch(
    transformer: nn.Transformer,
    src_embedding: nn.Embedding,
    tgt_embedding: nn.Embedding,
    generator: nn.Linear,
    *,
    position: str = "sinusoidal",
    scale_embeddings: bool = False,
    **overrides: Any,
) -> EncoderDecoder:
    """A zoo model with the weights of a torch.nn.Transformer wrapper; `overrides` set other
    spec fields the wrapper does not show, such as pad_id, bos_id, eos_id or max_len."""
    norm, ffn = _check_layout(transformer)
    encoder_layer = transformer.encoder.layers[0]
    if generator.bias is None:
        raise InteropError("from_torch needs a generator Linear with a bias (the zoo's bias=True)")
    fields = {
        "src_vocab_size": src_embedding.num_embeddings,
        "tgt_vocab_size": tgt_embedding.num_embeddings,
        "d_model": transformer.d_model,
        "n_heads": transformer.nhead,
        "d_ff": encoder_layer.linear1.out_features,
        "n_encoder_layers": len(transformer.encoder.layers),
        "n_decoder_layers": len(transformer.decoder.layers),
        "dropout": encoder_layer.dropout.p,
        "norm": norm,
        "position": position,
        "ffn": ffn,
        "final_norm": transformer.encoder.norm is not None,
        "scale_embeddings": scale_embeddings,
        "embedding_norm": False,
        "tie_embeddings": False,
        "bias": True,
    }
    spec = ModelSpec.model_validate(merge_fields(entering(fields), entering(overrides)))
    state = {
        "encoder.embed.tokens.weight": src_embedding.weight,
        "decoder.embed.tokens.weight": tgt_embedding.weight,
        **_module(generator, "generator"),
    }
    for stack in ("encoder", "decoder"):
        final = getattr(transformer, stack).norm
        if final is not None:
            state.update(_module(final, f"{stack}.norm"))
    for i, layer in enumerate(transformer.encoder.layers):
        p = f"encoder.layers.{i}"
        state.update(_attention(layer.self_attn, f"{p}.self_attn"))
        state.update(_module(layer.norm1, f"{p}.self_attn_residual.norm"))
        state.update(_module(layer.norm2, f"{p}.ffn_residual.norm"))
        state.update(_module(layer.linear1, f"{p}.ffn.linear1") | _module(layer.linear2, f"{p}.ffn.linear2"))
    for i, layer in enumerate(transformer.decoder.layers):
        p = f"decoder.layers.{i}"
        state.update(_attention(layer.self_attn, f"{p}.self_attn"))
        state.update(_attention(layer.multihead_attn, f"{p}.cross_attn"))
        state.update(_module(layer.norm1, f"{p}.self_attn_residual.norm"))
        state.update(_module(layer.norm2, f"{p}.cross_attn_residual.norm"))
        state.update(_module(layer.norm3, f"{p}.ffn_residual.norm"))
        state.update(_module(layer.linear1, f"{p}.ffn.linear1") | _module(layer.linear2, f"{p}.ffn.linear2"))
    model = build(spec, seed=0)
    expected = canonical_state(model).keys()
    if expected != state.keys():
        missing, extra = sorted(expected - state.keys()), sorted(state.keys() - expected)
        raise InteropError(f"from_torch could not map every weight: missing {missing[:3]}, unmatched {extra[:3]}")
    load_canonical_state(model, state)
    return model.to(generator.weight.device).train(transformer.training)
