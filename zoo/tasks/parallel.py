"""A real parallel corpus from files (Multi30k, IWSLT, your own): train, valid and test splits,
tokenized by characters, words or BPE learned on the training split, scored by corpus BLEU."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import Field, PositiveInt
from torch import Tensor

from zoo.errors import ConfigError
from zoo.specs.registries import registry
from zoo.tasks.base import EpochOrder, Task, TaskParams, held_out_part, in_batches, pad_rows
from zoo.tasks.corpus import FormatName, read_split_counted, split_files
from zoo.tasks.pretrained_tokenizer import PretrainedCodec, folder_files, tokenizer_special_ids
from zoo.tasks.summary import mean_length, unknown_share
from zoo.tasks.text import TokenizerName, codec_from_state, normalize, train_codec, unk_id
from zoo.tasks.token_batches import TokenPlan


class ParallelParams(TaskParams):
    data_dir: str = Field(description="the folder of the corpus files; relative paths start at the working directory")
    src_lang: str = Field("de", description="source files are SPLIT.SRC_LANG[.gz]")
    tgt_lang: str = Field("en", description="target files are SPLIT.TGT_LANG[.gz]")
    train_split: str = "train"
    valid_split: str = "valid"
    test_split: str | None = Field("test", description="evaluated once at the end; null for none")
    format: FormatName = Field("auto", description="a registered corpus format (zoo show format NAME): pair, "
                                                    "tsv, jsonl; auto: the first whose files exist")
    tokenizer: TokenizerName = "bpe"
    tokenizer_dir: str | None = Field(None, description="a pretrained model's tokenizer folder (tokenizer.json, "
                                      "tokenizer_config.json): its vocabulary and special ids for both sides, "
                                      "instead of learning one (tokenizer, vocab_size, min_frequency unused)")
    source_prefix: str = Field("", description="text put before every source sentence (T5's task prefix)")
    vocab_size: int = Field(8000, ge=8, description="the most tokens of each side's vocabulary")
    shared_vocab: bool = Field(False, description="one vocabulary learned on both sides (a decoder-only model needs one)")
    min_frequency: PositiveInt = Field(2, description="pieces seen fewer times in training become <unk>")
    lowercase: bool = False
    max_tokens: PositiveInt = Field(128, description="longer training pairs (bos and eos counted) are left out")
    train_sentences: PositiveInt | None = Field(None, description="only the first N training pairs")
    test_size: PositiveInt | None = Field(None, description="only the first N test pairs; default all")


@lru_cache(maxsize=8)
def cached_split(data_dir: str, stem: str, src: str, tgt: str, fmt: str) -> tuple[tuple[tuple[str, str], ...], int]:
    """Each split is read once per process, however many tasks (runs, tests) use it: its pairs,
    and how many pairs with an empty side were dropped."""
    pairs, dropped = read_split_counted(data_dir, stem, src, tgt, fmt)
    return tuple(pairs), dropped


@registry("task").register("parallel")
class Parallel(Task):
    """Sentence pairs from files. Training batches walk the training split in a new random order
    each epoch, a pure function of (seed, step); the held-out sets keep the files' sentences."""

    Params = ParallelParams
    text_metric = True
    scores_text = True
    token_batches = True

    def __init__(self, params: ParallelParams, seed: int, state: dict[str, Any] | None = None):
        super().__init__(params, seed)
        p = params
        train = self._split(p.train_split)[: p.train_sentences]
        self.src_vocab, self.tgt_vocab = self._codecs(train, state)
        self.pad_id = self.tgt_vocab.ids["pad_id"] if isinstance(self.tgt_vocab, PretrainedCodec) else self.special_ids["pad_id"]
        encoded = [(self.encode_source(s), self.tgt_vocab.encode(t)) for s, t in train]
        self.train_pairs = [(s, t) for s, t in encoded if max(len(s), len(t)) <= p.max_tokens]
        if not self.train_pairs:
            shortest = min(max(len(s), len(t)) for s, t in encoded)
            raise ConfigError(f"task.max_tokens {p.max_tokens}: no training pair is that short (the shortest "
                              f"pair's longer side holds {shortest} tokens, bos and eos counted)")
        self.order = EpochOrder(self.seed, len(self.train_pairs))
        self._plans: dict[tuple[int, int], TokenPlan] = {}

    def _codecs(self, train: Sequence[tuple[str, str]], state: dict[str, Any] | None):
        """(source codec, target codec): those a checkpoint holds, a pretrained tokenizer's, or learned
        on the training split (one for both sides when shared_vocab)."""
        p = self.params
        if state is not None:
            if p.shared_vocab and p.tokenizer_dir is None:
                return (codec_from_state(state["src_vocab"]),) * 2
            return codec_from_state(state["src_vocab"]), codec_from_state(state["tgt_vocab"])
        if p.tokenizer_dir is not None:
            return tuple(PretrainedCodec.from_folder(p.tokenizer_dir, target) for target in (False, True))

        def learn(texts: list[str]):
            return train_codec(p.tokenizer, texts, p.vocab_size, p.min_frequency, p.lowercase)

        sources, targets = [s for s, _ in train], [t for _, t in train]
        return (learn(sources + targets),) * 2 if p.shared_vocab else (learn(sources), learn(targets))

    @classmethod
    def special_ids_for(cls, params: ParallelParams) -> dict[str, int]:
        return cls.special_ids if params.tokenizer_dir is None else tokenizer_special_ids(params.tokenizer_dir)

    def encode_source(self, text: str) -> list[int]:
        return self.src_vocab.encode(self.params.source_prefix + text)

    def _padded(self, pairs: list[tuple[list[int], list[int]]]) -> tuple[Tensor, Tensor]:
        return pad_rows([s for s, _ in pairs], self.pad_id), pad_rows([t for _, t in pairs], self.pad_id)

    def longest_training(self) -> tuple[int, int]:
        return max(len(s) for s, _ in self.train_pairs), max(len(t) for _, t in self.train_pairs)

    @classmethod
    def splits(cls, params: ParallelParams) -> tuple[str, ...]:
        return ("valid",) if params.test_split is None else ("valid", "test")

    @classmethod
    def data_files(cls, params: ParallelParams) -> list[Path]:
        stems = [params.train_split, params.valid_split, *([params.test_split] if params.test_split else [])]
        tokenizer = folder_files(params.tokenizer_dir) if params.tokenizer_dir is not None else []
        return [*(file for stem in stems
                  for file in split_files(params.data_dir, stem, params.src_lang, params.tgt_lang, params.format)),
                *tokenizer]

    def _split(self, stem: str) -> tuple[tuple[str, str], ...]:
        p = self.params
        return cached_split(p.data_dir, stem, p.src_lang, p.tgt_lang, p.format)[0]

    def summary(self, eval_size: int) -> dict[str, float | int]:
        p = self.params
        read = self._split(p.train_split)[: p.train_sentences]
        valid = [(self.encode_source(s), self.tgt_vocab.encode(t)) for s, t in self._split(p.valid_split)[:eval_size]]
        sides = {"source": (self.src_vocab, 0), "target": (self.tgt_vocab, 1)}
        return {
            **super().summary(eval_size), "train_examples": len(self.train_pairs),
            "train_too_long": len(read) - len(self.train_pairs), "max_tokens": p.max_tokens,
            "train_empty": cached_split(p.data_dir, p.train_split, p.src_lang, p.tgt_lang, p.format)[1],
            **{f"{split}_{side}_unknown_share": unknown_share([pair[i] for pair in pairs], unk_id(codec))
               for split, pairs in (("train", self.train_pairs), ("valid", valid)) for side, (codec, i) in sides.items()
               if unk_id(codec) is not None},
            **{f"mean_{side}_tokens": mean_length([pair[i] for pair in self.train_pairs]) for side, (_, i) in sides.items()},
        }

    def train_batch(self, step: int, batch_size: int) -> tuple[Tensor, Tensor]:
        rows = [self.train_pairs[i] for i in self.order.rows(step, batch_size)]
        return self._padded(rows)

    def token_batch(self, step: int, budget: int, multiple: int = 1) -> tuple[Tensor, Tensor]:
        if (budget, multiple) not in self._plans:
            lengths = [max(len(s), len(t)) for s, t in self.train_pairs]
            sides = [(len(s), len(t)) for s, t in self.train_pairs]
            self._plans[budget, multiple] = TokenPlan(lengths, self.seed, budget, multiple, sides)
        rows = [self.train_pairs[i] for i in self._plans[budget, multiple].rows(step)]
        return self._padded(rows)

    def held_out_rows(self, size: int, split: str = "valid") -> int:
        stem, count = held_out_part(self.params, size, split)
        return len(self._split(stem)[:count])

    def _held_out(self, size: int | None, split: str) -> list[tuple[list[int], str]]:
        """(source ids, target text) of the first `size` pairs of the split, shortest source first
        (less padding when decoding)."""
        self.check_split(split)
        stem, count = held_out_part(self.params, size, split)
        pairs = self._split(stem)[:count]
        return sorted(((self.encode_source(s), t) for s, t in pairs), key=lambda pair: len(pair[0]))

    def eval_batches(self, size: int, batch_size: int, split: str = "valid") -> list[tuple[Tensor, Tensor]]:
        pairs = self._held_out(size, split)
        src, tgt = self._padded([(ids, self.tgt_vocab.encode(t)) for ids, t in pairs])
        return in_batches(src, tgt, batch_size)

    def held_out_bytes(self, size: int, split: str = "valid") -> int:
        """The targets' bytes: the text a translation's loss scores."""
        stem, count = held_out_part(self.params, size, split)
        return sum(len(target.encode()) for _, target in self._split(stem)[:count])

    def references(self, size: int, split: str = "valid") -> list[str]:
        return [normalize(t, self.params.lowercase) for _, t in self._held_out(size, split)]
