"""Text <-> ids for real corpora: characters, words, or BPE learned on the training split.

Every codec keeps the zoo's ids (0 pad, 1 bos, 2 eos, 3 unk), so the model never needs to know
which one a task uses, and every codec's state is plain data that a checkpoint can hold.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from zoo.errors import CheckpointError, DataError
from zoo.tasks.base import BOS, EOS, PAD, UNK, Vocabulary, text_stays_text

TokenizerName = Literal["char", "word", "bpe"]
WORD = re.compile(r"\w+|[^\w\s]")
"""A word is a run of letters and digits; each punctuation mark is a word of its own."""


def normalize(text: str, lowercase: bool) -> str:
    text = unicodedata.normalize("NFKC", text).strip()
    return text.lower() if lowercase else text


class SplitCodec:
    """Characters or words, the vocabulary being the pieces seen at least `min_frequency` times
    in training, most frequent first, cut at `vocab_size`."""

    def __init__(self, kind: Literal["char", "word"], vocab: Vocabulary, lowercase: bool):
        self.kind, self.vocab, self.lowercase = kind, vocab, lowercase

    @classmethod
    def train(cls, kind: Literal["char", "word"], texts: Iterable[str], vocab_size: int, min_frequency: int,
              lowercase: bool) -> SplitCodec:
        counts = Counter(piece for text in texts for piece in cls.split(kind, normalize(text, lowercase)))
        kept = sorted((piece for piece, n in counts.items() if n >= min_frequency), key=lambda p: (-counts[p], p))
        pieces = kept[: max(vocab_size - 4, 0)]
        return cls(kind, Vocabulary(pieces, joiner="" if kind == "char" else " ", unk=True), lowercase)

    @staticmethod
    def split(kind: str, text: str) -> list[str]:
        return list(text) if kind == "char" else WORD.findall(text)

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        return self.vocab.encode(self.split(self.kind, normalize(text, self.lowercase)))

    def decode(self, ids: Sequence[int]) -> str:
        return self.vocab.decode(ids)

    def piece(self, i: int) -> str:
        return self.vocab.piece(i)

    def state(self) -> dict[str, Any]:
        return {"kind": self.kind, "vocab": self.vocab.state(), "lowercase": self.lowercase}


class BpeCodec:
    """Byte-pair encoding from the `tokenizers` library; words keep a leading ▁ so decoding
    restores the spaces, and punctuation is split off before merging."""

    def __init__(self, tokenizer):
        self.tokenizer = text_stays_text(tokenizer)
        ids = [tokenizer.token_to_id(token) for token in (PAD, BOS, EOS, UNK)]
        if ids != [0, 1, 2, 3]:
            raise DataError(f"a BPE tokenizer must hold <pad>, <bos>, <eos>, <unk> as ids 0-3, got {ids}")

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, min_frequency: int, lowercase: bool) -> BpeCodec:
        from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

        tokenizer = Tokenizer(models.BPE(unk_token=UNK))
        steps = [normalizers.NFKC(), normalizers.Strip()] + ([normalizers.Lowercase()] if lowercase else [])
        tokenizer.normalizer = normalizers.Sequence(steps)
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()])
        tokenizer.decoder = decoders.Metaspace()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                      special_tokens=[PAD, BOS, EOS, UNK], show_progress=False)
        tokenizer.train_from_iterator(texts, trainer)
        return cls(tokenizer)

    @classmethod
    def train_bytes(cls, texts: Iterable[str], vocab_size: int) -> BpeCodec:
        """Byte-level BPE (GPT-2's): merges learned over the UTF-8 bytes of the text, which it keeps
        exactly (no normalization), so every text is covered and <unk> is never produced."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, BOS, EOS, UNK], show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tokenizer.train_from_iterator(texts, trainer)
        return cls(tokenizer)

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return [1, *self.tokenizer.encode(text).ids, 2]

    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        if 2 in ids:
            ids = ids[: ids.index(2)]
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def piece(self, i: int) -> str:
        return self.tokenizer.id_to_token(i)

    def state(self) -> dict[str, Any]:
        return {"kind": "bpe", "tokenizer": self.tokenizer.to_str()}


def train_codec(kind: TokenizerName, texts: Sequence[str], vocab_size: int, min_frequency: int, lowercase: bool):
    if kind == "bpe":
        return BpeCodec.train(texts, vocab_size, min_frequency, lowercase)
    return SplitCodec.train(kind, texts, vocab_size, min_frequency, lowercase)


def codec_from_state(state: dict[str, Any]):
    """The codec (or plain Vocabulary) that `state()` described."""
    kind = state.get("kind", "vocabulary")
    if kind == "bpe":
        from tokenizers import Tokenizer

        return BpeCodec(Tokenizer.from_str(state["tokenizer"]))
    if kind in ("char", "word"):
        return SplitCodec(kind, Vocabulary.from_state(state["vocab"]), state["lowercase"])
    if kind == "vocabulary":
        return Vocabulary.from_state(state)
    if kind == "pretrained":
        from zoo.tasks.pretrained_tokenizer import PretrainedCodec

        return PretrainedCodec.from_state(state)
    raise CheckpointError(f"unknown codec kind {kind!r} in a task state; choices: bpe, char, word, pretrained, vocabulary")


def unk_id(codec) -> int | None:
    """The id that stands for a piece outside the vocabulary: the zoo's codecs keep it at 3; a
    pretrained tokenizer names its own (or has none: byte-level BPE covers every text)."""
    if hasattr(codec, "tokenizer"):
        model = codec.tokenizer.model
        token = getattr(model, "unk_token", None)
        found = codec.tokenizer.token_to_id(token) if token else getattr(model, "unk_id", None)
        return None if found is None else int(found)
    return Vocabulary.unk_id
