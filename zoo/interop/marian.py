"""Marian (Junczys-Dowmunt et al. 2018) as transformers' MarianMTModel holds it (the OPUS-MT
models): BART's post-norm layers, fixed sinusoids laid out as halves (all sines, then all
cosines), no embedding norm, a fixed final_logits_bias; decoding starts from the pad id. The
sinusoid tables are computed, not trained: from_hf checks them against the zoo's. Pegasus (Zhang
et al. 2020, PegasusForConditionalGeneration) is Marian's layout in pre-norm, with a LayerNorm
after each stack; M2M100 (Fan et al. 2021) and NLLB (NLLB team 2022), M2M100ForConditionalGeneration,
are Pegasus's with fairseq's sinusoids (`spacing: tensor2tensor`), read from the row after the pad
id (`offset`), and no logits bias."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from zoo.errors import InteropError
from zoo.interop.bart import LAYERS, shared_config, shared_fields
from zoo.interop.family import Family, register
from zoo.specs.choices import validate_choice
from zoo.specs.model_spec import ModelSpec


def spec_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    return {**shared_fields(model, "Marian"), "src_vocab_size": c.vocab_size,
            "tgt_vocab_size": c.decoder_vocab_size or c.vocab_size,
            "position": {"name": "sinusoidal", "layout": "halves"}, "embedding_norm": False}


def config(spec: ModelSpec):
    from transformers import MarianConfig

    return MarianConfig(vocab_size=spec.src_vocab_size, decoder_vocab_size=spec.tgt_vocab_size,
                        share_encoder_decoder_embeddings=spec.embeddings.share, **shared_config(spec))


def computed(spec: ModelSpec) -> dict[str, Tensor]:
    from zoo.variants.positions import sinusoid_table

    table = sinusoid_table(spec.max_len, spec.d_model, layout="halves")
    return {f"model.{stack}.embed_positions.weight": table for stack in ("encoder", "decoder")}


def pegasus_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    return {**shared_fields(model, "Pegasus"), "src_vocab_size": c.vocab_size, "tgt_vocab_size": c.vocab_size,
            "position": {"name": "sinusoidal", "layout": "halves"}, "embedding_norm": False, "norm": "pre",
            "final_norm": True}


def pegasus_config(spec: ModelSpec):
    from transformers import PegasusConfig

    return PegasusConfig(vocab_size=spec.tgt_vocab_size, **shared_config(spec))


def fairseq_positions(pad_id: int) -> dict[str, Any]:
    return {"name": "sinusoidal", "layout": "halves", "spacing": "tensor2tensor", "offset": pad_id + 1}


def m2m100_fields(model: nn.Module) -> dict[str, Any]:
    c = model.config
    if c.pad_token_id != 1:
        raise InteropError(f"M2M100 with pad_token_id {c.pad_token_id} has no zoo spec: its sinusoid table keeps 2 rows "
                           "before the first position whatever the pad id, fairseq's layout for pad id 1, which is the "
                           "one the zoo reads")
    return {**pegasus_fields(model), "position": fairseq_positions(c.pad_token_id), "output_bias": "none"}


def m2m100_config(spec: ModelSpec):
    from transformers import M2M100Config

    if spec.position != validate_choice("position", fairseq_positions(spec.pad_id)):
        raise InteropError("M2M100 reads fairseq's sinusoids from the row after its pad id")
    return M2M100Config(vocab_size=spec.tgt_vocab_size, **shared_config(spec))


def m2m100_computed(spec: ModelSpec) -> dict[str, Tensor]:
    """fairseq's tables, max_len + offset rows, the pad id's row zero."""
    from zoo.variants.positions import sinusoid_table

    offset = spec.position.offset if spec.position.name == "sinusoidal" else 2
    table = sinusoid_table(spec.max_len + offset, spec.d_model, layout="halves", spacing="tensor2tensor")
    table[spec.pad_id] = 0.0
    return {f"model.{stack}.embed_positions.weights": table for stack in ("encoder", "decoder")}


STACK_NORMS = LAYERS.derive(top={"{stack}.norm.*": "model.{stack}.layer_norm.*"})
"""Pegasus and M2M100: BART's layers and a final norm on each stack."""
MARIAN = register(Family("marian", "MarianMTModel", spec_fields, config, LAYERS, computed))
PEGASUS = register(Family("pegasus", "PegasusForConditionalGeneration", pegasus_fields, pegasus_config, STACK_NORMS,
                          computed))
M2M100 = register(Family("m2m100", "M2M100ForConditionalGeneration", m2m100_fields, m2m100_config, STACK_NORMS,
                         m2m100_computed))
