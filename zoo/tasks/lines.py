"""Plain text documents: `lm` trains a decoder-only language model on them and `mlm` an encoder by
masked-token prediction (BERT's 15%, of which 80% become <mask>, 10% a random token and 10% stay).
A split is `SPLIT.txt[.gz]` in `data_dir`, or `SPLIT.LANG[.gz]` so that one side of a parallel
corpus serves, one document a line or documents ended by a separator line; or a folder `SPLIT/`
of files, a document each (zoo.tasks.documents). Tokenizer, vocabulary and split settings are
`parallel`'s."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any, ClassVar

import torch
from pydantic import Field, PositiveInt, model_validator
from pydantic_core import PydanticCustomError
from torch import Tensor

from zoo.errors import ConfigError
from zoo.specs.registries import registry
from zoo.tasks.base import EpochOrder, Task, TaskParams, held_out_part, pad_rows, step_generator
from zoo.tasks.documents import cached_documents, split_document_files
from zoo.tasks.mask_vocab import TokenizerMask, WithMask
from zoo.tasks.packing import Rows, offsets_tensor, packed
from zoo.tasks.pretrained_tokenizer import PretrainedCodec, folder_files, tokenizer_mask_id, tokenizer_special_ids
from zoo.tasks.summary import mean_length, unknown_share
from zoo.tasks.text import TokenizerName, codec_from_state, train_codec, unk_id


class LinesParams(TaskParams):
    data_dir: str = Field(description="the folder of the text files; relative paths start at the working directory")
    lang: str | None = Field(None, description="read SPLIT.LANG[.gz] (one side of a parallel corpus); null: "
                                               "SPLIT.txt[.gz]")
    train_split: str = "train"
    valid_split: str = "valid"
    test_split: str | None = Field("test", description="evaluated once at the end; null for none")
    tokenizer: TokenizerName = "bpe"
    tokenizer_dir: str | None = Field(None, description="a pretrained model's tokenizer folder (tokenizer.json, "
                                      "tokenizer_config.json): its vocabulary and special ids, each document its bos, "
                                      "ids and eos, instead of learning one (tokenizer, vocab_size, min_frequency "
                                      "unused); train.init_from a folder with a tokenizer sets it")
    vocab_size: int = Field(8000, ge=8, description="the most tokens of the vocabulary")
    min_frequency: PositiveInt = Field(2, description="pieces seen fewer times in training become <unk>")
    lowercase: bool = False
    max_tokens: PositiveInt = Field(128, description="longer training documents (bos and eos counted) are left out "
                                                     "and counted in the run's data line; lm's pack keeps them all")
    train_sentences: PositiveInt | None = Field(None, description="only the first N training documents")
    test_size: PositiveInt | None = Field(None, description="only the first N test documents; default all")
    separator: str | None = Field(None, description="a line of exactly this text ends a document, which keeps its "
                                                    "line breaks (<|endoftext|>, say); null: a document a line")
    folders: bool = Field(False, description="each split is a folder SPLIT/ in data_dir whose files (subfolders "
                                             "included, sorted by path) are its documents, each read whole")
    suffix: str | None = Field(None, description="with folders: only the files whose names end so (.py, say)")

    @model_validator(mode="after")
    def _one_way_to_documents(self) -> LinesParams:
        if self.folders and (self.separator is not None or self.lang is not None):
            raise PydanticCustomError("documents", "folders reads a folder of files a split, so {given} has nothing to "
                                      "read; give one", {"given": "separator" if self.separator is not None else "lang"})
        if self.suffix is not None and not self.folders:
            raise PydanticCustomError("documents", "suffix picks the files of a folder of documents; it needs folders: "
                                      "true")
        if self.separator is not None and (not self.separator.strip() or "\n" in self.separator):
            raise PydanticCustomError("documents", "separator {separator}: a whole line of text (not blank, no line "
                                      "break)", {"separator": repr(self.separator)})
        return self


class TextLines(Task):
    """Lines of text in one vocabulary; training batches walk the training lines in a new random
    order each epoch, a pure function of (seed, step); held-out lines keep the files' order."""

    Params = LinesParams
    generates = False

    def __init__(self, params: LinesParams, seed: int, state: dict[str, Any] | None = None):
        super().__init__(params, seed)
        p = params
        train = self._split(p.train_split)[: p.train_sentences]
        if state is not None:
            codec = codec_from_state(state["vocab"])
        elif p.tokenizer_dir is not None:
            codec = PretrainedCodec.from_folder(p.tokenizer_dir, target=True, documents=True)
        else:
            codec = train_codec(p.tokenizer, train, p.vocab_size, p.min_frequency, p.lowercase)
        self.codec, self.src_vocab = codec, self.wrap(codec)
        self.pad_id = self.special_ids_for(p)["pad_id"]
        self.tgt_vocab = self.src_vocab
        encoded = list(map(codec.encode, train))
        self.train_lines, self.train_too_long = self.training_rows(encoded)
        self.order = EpochOrder(self.seed, len(self.train_lines))

    def training_rows(self, documents: list[list[int]]) -> tuple[list[list[int]], int]:
        """The encoded training documents that fit in max_tokens, a row each, and how many did not."""
        limit = self.params.max_tokens
        rows = [ids for ids in documents if len(ids) <= limit]
        if not rows:
            raise ConfigError(f"task.max_tokens {limit}: no training document is that short (the shortest holds "
                              f"{min(map(len, documents))} tokens, bos and eos counted); raise it"
                              + (", or pack the documents into rows (task.pack), which keeps them all"
                                 if "pack" in type(self.params).model_fields else ""))
        return rows, len(documents) - len(rows)

    def wrap(self, codec):
        return codec

    def state(self) -> dict[str, Any]:
        return {"vocab": self.codec.state()}

    @classmethod
    def special_ids_for(cls, params: LinesParams) -> dict[str, int]:
        return cls.special_ids if params.tokenizer_dir is None else tokenizer_special_ids(params.tokenizer_dir)

    @classmethod
    def splits(cls, params: LinesParams) -> tuple[str, ...]:
        return ("valid",) if params.test_split is None else ("valid", "test")

    @classmethod
    def data_files(cls, params: LinesParams) -> list[Path]:
        stems = [params.train_split, params.valid_split, *([params.test_split] if params.test_split else [])]
        tokenizer = folder_files(params.tokenizer_dir) if params.tokenizer_dir is not None else []
        return [*(path for stem in stems for path in split_document_files(params, stem)), *tokenizer]

    def _split(self, stem: str) -> tuple[str, ...]:
        p = self.params
        return cached_documents(p.data_dir, stem, p.lang, p.separator, p.folders, p.suffix)

    def summary(self, eval_size: int) -> dict[str, float | int]:
        p = self.params
        unknown = unk_id(self.codec)
        shares = {} if unknown is None else {
            f"{split}_unknown_share": unknown_share(rows, unknown)
            for split, rows in (("train", self.train_lines), ("valid", self.held_out(eval_size, "valid")))}
        return {**super().summary(eval_size), "train_examples": len(self.train_lines),
                "train_too_long": self.train_too_long, "max_tokens": p.max_tokens, **shares,
                "mean_tokens": mean_length(self.train_lines)}

    def longest_training(self) -> tuple[int, int]:
        longest = max(map(len, self.train_lines))
        return self.example_lengths(longest)

    train_offsets: list[int] | None = None
    """Each training row's offset in the document it begins in, where rows are packed (lm's pack)."""

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        numbers = self.order.rows(step, batch_size)
        src, tgt = self.examples(pad_rows([self.train_lines[i] for i in numbers], self.pad_id),
                                 step_generator(self.seed, step, stream=2))
        return Rows(src, tgt, offsets_tensor(self.train_offsets, numbers))

    def held_out_rows(self, size: int, split: str = "valid") -> int:
        stem, count = held_out_part(self.params, size, split)
        return len(self._split(stem)[:count])

    def held_out_bytes(self, size: int, split: str = "valid") -> int:
        stem, count = held_out_part(self.params, size, split)
        return sum(len(document.encode()) for document in self._split(stem)[:count])

    def eval_batches(self, size: int, batch_size: int, split: str = "valid") -> list[tuple[Tensor, Tensor]]:
        """The first lines of the split, shortest first; masked (mlm) by a draw that depends on the
        split alone, so every run and seed is scored on the same masks."""
        self.check_split(split)
        ids = self.held_out(size, split)
        draws = zlib.crc32(held_out_part(self.params, size, split)[0].encode()) % 65521  # small for step_generator
        return [self.examples(pad_rows(ids[start : start + batch_size], self.pad_id),
                              step_generator(draws, start, stream=3))
                for start in range(0, len(ids), batch_size)]

    def held_out(self, size: int | None, split: str) -> list[list[int]]:
        """The split's first lines, encoded, shortest first: the rows eval_batches batches."""
        stem, count = held_out_part(self.params, size, split)
        return sorted(map(self.codec.encode, self._split(stem)[:count]), key=len)

    def examples(self, ids: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """(source, target) rows of a batch of encoded lines (bos ... eos, right-padded)."""
        raise NotImplementedError

    def example_lengths(self, length: int) -> tuple[int, int]:
        raise NotImplementedError


class LmParams(LinesParams):
    pack: int | None = Field(
        None, ge=2, description="rows of this many tokens (2 or more: a row's first token is read, never scored) "
                          "cut from the documents joined end to end (each bos ... eos): "
                          "attention spans them (GPT-2, nanoGPT), or with model.documents separate or masked stops "
                          "at each one's bos; the held-out documents likewise, the last row shorter; null: a row a "
                          "document"
    )


@registry("task").register("lm")
class LanguageModeling(TextLines):
    """Next-token prediction over each line (or each packed row): the source is the row's first
    token (the start token of a line), the target the row, so a decoder-only model reads the row
    and is scored on every token after its first."""

    Params = LmParams
    next_token = True
    scores_text = True
    kinds: ClassVar[tuple[str, ...]] = ("decoder",)

    def training_rows(self, documents: list[list[int]]) -> tuple[list[list[int]], int]:
        """With pack, every document joined end to end and cut into rows, a long one across
        several (nanoGPT, litgpt): max_tokens leaves none out."""
        pack = self.params.pack
        if pack is None:
            return super().training_rows(documents)
        rows, self.train_offsets = packed(documents, pack, keep_rest=False)
        self.longest_document_tokens = max(map(len, documents))
        if not rows:
            raise ConfigError(f"task.pack {pack}: the training documents hold {sum(map(len, documents))} tokens, "
                              "fewer than one row")
        return rows, 0

    def held_out(self, size: int | None, split: str) -> list[list[int]]:
        """The split's lines, or with `pack` the rows its lines pack into, in the files' order."""
        return super().held_out(size, split) if self.params.pack is None else self.packed_held_out(size, split)[0]

    def packed_held_out(self, size: int | None, split: str) -> tuple[list[list[int]], list[int]]:
        """The rows the split's first documents pack into, and each row's offset in its document."""
        stem, count = held_out_part(self.params, size, split)
        return packed([self.codec.encode(line) for line in self._split(stem)[:count]], self.params.pack, keep_rest=True)

    def eval_batches(self, size: int, batch_size: int, split: str = "valid") -> list[tuple[Tensor, Tensor]]:
        """With `pack`, the packed rows in the files' order, each batch with its rows' offsets."""
        if self.params.pack is None:
            return super().eval_batches(size, batch_size, split)
        self.check_split(split)
        rows, offsets = self.packed_held_out(size, split)
        return [Rows(*self.examples(pad_rows(rows[start : start + batch_size], self.pad_id), None),
                     offsets_tensor(offsets, range(start, min(start + batch_size, len(rows)))))
                for start in range(0, len(rows), batch_size)]

    def held_out_rows(self, size: int, split: str = "valid") -> int:
        return len(self.held_out(size, split)) if self.params.pack is not None else super().held_out_rows(size, split)

    def longest_document(self) -> int | None:
        return None if self.params.pack is None else self.longest_document_tokens

    def examples(self, ids: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        return ids[:, :1], ids

    def example_lengths(self, length: int) -> tuple[int, int]:
        return 1, length


@registry("task").register("mlm")
class MaskedLanguageModeling(TextLines):
    """BERT's masked-token prediction: 15% of each line's ordinary tokens are chosen; of those 80%
    become <mask>, 10% a random ordinary token, 10% stay. The source is the line so changed, the
    target the chosen tokens (padding elsewhere), so loss and token accuracy count exactly them."""

    shape: ClassVar[str] = "positions"
    CHOSEN, MASKED, RANDOM = 0.15, 0.8, 0.5  # RANDOM: half of what is not masked

    def wrap(self, codec):
        if isinstance(codec, PretrainedCodec):
            return TokenizerMask(codec, tokenizer_mask_id(self.params.tokenizer_dir))
        return WithMask(codec)

    def examples(self, ids: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        vocab = self.src_vocab
        draws = torch.rand(3, *ids.shape, generator=generator)
        chosen = vocab.ordinary(ids) & (draws[0] < self.CHOSEN)
        masked = chosen & (draws[1] < self.MASKED)
        randomized = chosen & ~masked & (draws[2] < self.RANDOM)
        src = torch.where(masked, vocab.mask_id, torch.where(randomized, vocab.random_ids(ids.shape, generator), ids))
        return src, torch.where(chosen, ids, self.pad_id)

    def example_lengths(self, length: int) -> tuple[int, int]:
        return length, length
