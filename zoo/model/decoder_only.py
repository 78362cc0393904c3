"""The decoder-only model (kind `decoder`): ids -> causal stack -> next-token logits, a language
model; a task's pair is one sequence, the source as its prompt."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from zoo.kernels.masks import document_positions, documents_apart, real_tokens, self_mask
from zoo.model.decoding import Decoding
from zoo.model.inputs import check_ids
from zoo.model.zoo_model import AttentionMaps, ZooModel
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import register_kind, registry


def prompt_lengths(spec: ModelSpec, src: Tensor) -> Tensor:
    """Tokens of each right-padded prompt, counted as the model's decoding counts them."""
    return real_tokens(src, spec).sum(1)


def sequences(spec: ModelSpec, src: Tensor, tgt: Tensor) -> Tensor:
    """Each row's source tokens, then its target's tokens after the start, right-padded."""
    pad_id = spec.pad_id
    src_len, tgt_len = prompt_lengths(spec, src), (tgt[:, 1:] != pad_id).sum(1)
    width = int((src_len + tgt_len).max())
    out = torch.full((src.size(0), src.size(1) + tgt.size(1)), pad_id, dtype=src.dtype, device=src.device)
    out[:, : src.size(1)] = src
    after = src_len[:, None] + torch.arange(tgt.size(1) - 1, device=src.device)
    body = tgt[:, 1:]
    out.scatter_(1, after, torch.where(body != pad_id, body, out.gather(1, after)))
    return out[:, :width]


@register_kind
class DecoderOnly(ZooModel):
    """ids -> causal stack -> next-token logits: a language model; `generate(prompt)` returns each
    prompt followed by its continuation."""

    kind = "decoder"
    reads: ClassVar[dict[str, str]] = {"decoder": "source and target"}

    @classmethod
    def frame(cls, spec: ModelSpec, src: Tensor, tgt: Tensor) -> tuple[tuple[Tensor, ...], Tensor]:
        """One sequence, the source then the target after its start; the prompt's positions
        predict nothing (their labels are the pad id), the target's predict the next token. Where
        documents are apart, a document's last position does not predict the next one's start,
        which it cannot see: each document is scored as if alone."""
        sequence = sequences(spec, src, tgt)
        labels = sequence[:, 1:].clone()
        hidden = torch.arange(labels.size(1), device=src.device)[None] < (prompt_lengths(spec, src) - 1)[:, None]
        if documents_apart(spec):
            hidden = hidden | (labels == spec.bos_id)
        return (sequence[:, :-1],), labels.masked_fill(hidden, spec.pad_id)

    @classmethod
    def input_masks(cls, spec: ModelSpec, inputs: tuple[Tensor, ...]) -> tuple[Tensor | None, ...]:
        return (self_mask(inputs[0], spec),)

    @classmethod
    def continues_positions(cls, spec: ModelSpec) -> bool:
        """Under `separate` documents with positions added to the embeddings (learned, sinusoidal):
        a relative scheme computes the same function from any offset, and keeps its rounding."""
        return spec.documents == "separate" and registry("position").get(spec.position.name).absolute()

    @classmethod
    def sequence_lengths(cls, spec: ModelSpec, src_len: int, tgt_len: int) -> tuple[int, int]:
        return 0, src_len + tgt_len - 2

    @classmethod
    def decoding_input(cls, spec: ModelSpec) -> tuple[str, int]:
        return "prompt", spec.tgt_vocab_size

    @classmethod
    def start_columns(cls, spec: ModelSpec, input_len: int) -> int:
        return input_len

    @classmethod
    def joined(cls, spec: ModelSpec, inputs: Tensor, generated: Tensor) -> Tensor:
        """Each prompt followed by its continuation (as transformers returns them), right-padded to
        the longest row (generated ids are never the pad id, so what is not padding is the row)."""
        if inputs.size(0) == 0:
            return inputs.clone()
        lengths, new = prompt_lengths(spec, inputs).tolist(), (generated != spec.pad_id).sum(1).tolist()
        rows = [torch.cat([inputs[i, :n], generated[i, :g]]) for i, (n, g) in enumerate(zip(lengths, new, strict=True))]
        out = torch.full((len(rows), max(map(len, rows))), spec.pad_id, dtype=torch.long, device=inputs.device)
        for i, row in enumerate(rows):
            out[i, : len(row)] = row
        return out

    @classmethod
    def continuations(cls, spec: ModelSpec, src: Tensor, decoded: Tensor) -> list[list[int]]:
        return [row[n:] for row, n in zip(decoded.tolist(), prompt_lengths(spec, src).tolist(), strict=True)]

    def forward(self, ids: Tensor, padding: tuple[Tensor | None] | None = None, head: bool = True,
                offsets: Tensor | None = None) -> Tensor:
        """Logits (B, T, vocab): position t predicts token t + 1. `padding` is (mask,) built on
        the host, as the encoder-decoder's is (with the documents' mask where they are apart);
        `head` as there. `offsets` (B,), on the host, where `continues_positions`: the positions
        each packed row's first document had reached before the row (zoo.tasks.packing)."""
        if padding is None:
            check_ids("ids", ids, self.spec.tgt_vocab_size)
            padding = self.input_masks(self.spec, (ids,))
        positions = document_positions(ids, self.spec, offsets)
        if offsets is not None and positions.numel():  # the furthest position, read back once (a sync on a GPU)
            self.decoder.prepare_positions(int(positions.max()) + 1)
        hidden = self.decoder(ids, padding[0], positions=positions)[0]
        return self.generator(hidden) if head else hidden

    def attention_maps(self, ids: Tensor) -> AttentionMaps:
        check_ids("ids", ids, self.spec.tgt_vocab_size)
        maps = self.decoder(ids, self_mask(ids, self.spec), positions=document_positions(ids, self.spec),
                            need_weights=True)[1]
        return AttentionMaps(encoder=[], decoder_self=[m["self"] for m in maps], decoder_cross=[])

    def start_decoding(self, inputs: Tensor, use_cache: bool = True, beams: int = 1) -> tuple[Tensor, Decoding]:
        prompt = inputs.repeat_interleave(beams, dim=0)
        last = (real_tokens(prompt, self.spec).sum(1) - 1).clamp(min=0)  # rows are right-padded
        return prompt, Decoding(self.decoder.new_cache() if use_cache else None, own_positions=True, first=last)
