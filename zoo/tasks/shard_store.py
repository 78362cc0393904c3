"""A corpus as memory-mapped token shards (`zoo data prepare` writes them): what a task reads
instead of text, so memory does not grow with the corpus.

A store is a folder: `index.json` (what every file holds: documents, tokens, UTF-8 bytes, size
and SHA-256), the tokenizer that made the ids, and for each split and stream (`text` for a
language model; `src` and `tgt` for a translation, document i of each being one pair) numbered
shards. A shard is two raw little-endian files: `.bin`, the documents' ids end to end (each one
bos ... eos) in the smallest unsigned integer type that holds the vocabulary, and `.docs`, two
uint64 a document: where its ids end in the shard, and its text's UTF-8 bytes (bits per byte
divides by them). A document never spans two shards.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from zoo.errors import DataError
from zoo.files import read_json

FORMAT = "zoo-shards/1"
INDEX = "index.json"
DOC_FIELDS = 2
"""Per document in a .docs file: the end of its ids in the shard's .bin, its UTF-8 bytes."""
STREAMS = {"documents": ("text",), "pairs": ("src", "tgt")}
"""The streams of a store of each corpus: documents (a language model's), or sentence pairs."""


def dtype_for(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds every id of the vocabulary."""
    for name in ("uint16", "uint32"):
        if vocab_size - 1 <= np.iinfo(name).max:
            return np.dtype(name).newbyteorder("<")
    raise DataError(f"a vocabulary of {vocab_size} tokens: ids past {np.iinfo('uint32').max} fit no shard type "
                    "(uint16 holds 65,536 tokens, uint32 4,294,967,296)")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def largest_id(path: Path, dtype: np.dtype) -> int:
    """The largest id of a shard, read a bounded block at a time (not mapped: see Stream._ids)."""
    largest, block = 0, (1 << 22) * dtype.itemsize
    with open(path, "rb") as handle:
        while data := handle.read(block):
            largest = max(largest, int(np.frombuffer(data, dtype=dtype).max()))
    return largest


def shard_name(split: str, stream: str, number: int) -> str:
    return f"{split}.{stream}.{number:05d}"


@dataclass(frozen=True)
class Stream:
    """One split's documents of one stream, across its shards, read through memory maps: the
    whole of it is never in memory, only the pages a batch touches."""

    folder: Path
    shards: tuple[dict[str, Any], ...]
    dtype: np.dtype

    @cached_property
    def _docs(self) -> list[np.memmap]:
        return [np.memmap(self.folder / shard["docs_file"], dtype="<u8", mode="r").reshape(-1, DOC_FIELDS)
                for shard in self.shards]

    @cached_property
    def _files(self) -> list[int]:
        return [os.open(self.folder / shard["file"], os.O_RDONLY) for shard in self.shards]

    def _ids(self, shard: int, offset: int, count: int) -> np.ndarray:
        """Ids of one shard by a positioned read: only what a batch asks is read, and nothing stays
        mapped into the process (pages a memory map touched would count as its own, growing with
        the corpus over a long run; nanoGPT makes a new map every batch for that reason)."""
        size = self.dtype.itemsize
        data = os.pread(self._files[shard], count * size, offset * size)
        if len(data) != count * size:
            raise DataError(f"{self.folder / self.shards[shard]['file']}: shorter than its index says")
        return np.frombuffer(data, dtype=self.dtype)

    @cached_property
    def token_starts(self) -> np.ndarray:
        """Where each shard's ids start in the stream, and its end."""
        return np.concatenate([[0], np.cumsum([shard["tokens"] for shard in self.shards])]).astype(np.int64)

    @cached_property
    def document_starts(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum([shard["documents"] for shard in self.shards])]).astype(np.int64)

    @property
    def tokens(self) -> int:
        return int(self.token_starts[-1])

    @property
    def documents(self) -> int:
        return int(self.document_starts[-1])

    def read(self, start: int, length: int) -> np.ndarray:
        """`length` ids of the stream from `start`, across shard ends where the span crosses one."""
        if start < 0 or start + length > self.tokens:
            raise DataError(f"ids {start} to {start + length} of a stream of {self.tokens}")
        pieces, position, end = [], start, start + length
        while position < end:
            shard = int(np.searchsorted(self.token_starts, position, side="right")) - 1
            offset = position - int(self.token_starts[shard])
            take = min(end, int(self.token_starts[shard + 1])) - position
            pieces.append(self._ids(shard, offset, take))
            position += take
        return np.concatenate(pieces) if len(pieces) != 1 else pieces[0]

    def document_span(self, number: int) -> tuple[int, int, int]:
        """(start, end) of document `number`'s ids in the stream, and its UTF-8 bytes."""
        shard = int(np.searchsorted(self.document_starts, number, side="right")) - 1
        local = number - int(self.document_starts[shard])
        docs = self._docs[shard]
        begin = int(docs[local - 1, 0]) if local else 0
        base = int(self.token_starts[shard])
        return base + begin, base + int(docs[local, 0]), int(docs[local, 1])

    def first_documents(self, count: int | None) -> tuple[int, int, int]:
        """(documents, tokens, bytes) of the first `count` documents (all when None)."""
        count = self.documents if count is None else min(count, self.documents)
        tokens = self.document_span(count - 1)[1] if count else 0
        total, left = 0, count
        for docs in self._docs:
            if left <= 0:
                break
            total += int(docs[:left, 1].sum())
            left -= len(docs)
        return count, tokens, total

    def longest_document(self) -> int:
        """The most ids of one document (bos and eos counted), from the .docs files alone."""
        longest = 0
        for docs in self._docs:
            if len(docs):
                ends = docs[:, 0].astype(np.int64)
                longest = max(longest, int(ends[0]), int(np.diff(ends).max(initial=0)))
        return longest

    def offsets_in_documents(self, positions: np.ndarray) -> list[int]:
        """Each stream position's distance from the start of the document it lies in (a shard holds
        whole documents; its .docs file, their ends)."""
        shards = np.searchsorted(self.token_starts, positions, side="right") - 1
        out = []
        for position, shard in zip(positions.tolist(), shards.tolist(), strict=True):
            local = position - int(self.token_starts[shard])
            ends = self._docs[shard][:, 0]
            inside = int(np.searchsorted(ends, local, side="right"))
            out.append(local - (int(ends[inside - 1]) if inside else 0))
        return out

    def document(self, number: int) -> np.ndarray:
        start, end, _ = self.document_span(number)
        return self.read(start, end - start)


@dataclass(frozen=True)
class ShardStore:
    """A prepared store, its index read and checked against what the folder holds."""

    folder: Path
    index: dict[str, Any]

    @classmethod
    def open(cls, folder: str | Path, verify: bool = True) -> ShardStore:
        """The store in `folder`; with `verify`, every file's size and SHA-256 are checked against
        the index first (a damaged shard is named, never read)."""
        folder = Path(folder)
        if not (folder / INDEX).is_file():
            hint = " (its preparation did not finish: run zoo data prepare again)" if (folder / "progress.json").exists() \
                else ""
            raise DataError(f"{folder}: no {INDEX}: not a token store written by zoo data prepare{hint}")
        index = read_json(folder / INDEX, "a token store's index", error=DataError)
        if not isinstance(index, dict) or index.get("format") != FORMAT:
            found = index.get("format") if isinstance(index, dict) else None
            raise DataError(f"{folder / INDEX}: format {found!r}, not {FORMAT!r}")
        store = cls(folder, index)
        if dtype_for(store.vocab_size).itemsize > store.dtype.itemsize:
            raise DataError(f"{folder / INDEX}: a vocabulary of {store.vocab_size} tokens does not fit its shards' "
                            f"{store.dtype.name} (ids up to {np.iinfo(store.dtype).max})")
        if verify:
            problems = store.problems()
            if problems:
                many = len(problems) > 1
                raise DataError(f"{folder}: {len(problems)} file{'s' if many else ''} of the token store "
                                f"{'do' if many else 'does'} not match its index: {'; '.join(problems[:5])}"
                                f"{'; ...' if len(problems) > 5 else ''}")
        return store

    @property
    def corpus(self) -> str:
        """documents or pairs (STREAMS)."""
        return self.index["corpus"]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.index["dtype"])

    @property
    def vocab_size(self) -> int:
        return int(self.index["vocab_size"])

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.index["splits"])

    @cached_property
    def _streams(self) -> dict[tuple[str, str], Stream]:
        return {}

    def stream(self, split: str, stream: str = "text") -> Stream:
        """One split's stream, made once (its shards' files are opened once)."""
        if split not in self.index["splits"]:
            raise DataError(f"{self.folder}: no split {split!r}; the store holds {', '.join(self.splits)}")
        if (split, stream) not in self._streams:
            self._streams[split, stream] = Stream(self.folder, tuple(self.index["splits"][split][stream]["shards"]),
                                                  self.dtype)
        return self._streams[split, stream]

    def files(self) -> list[dict[str, Any]]:
        """Every file the index describes: {"file", "size", "sha256"}."""
        found = [self.index["tokenizer"]]
        for split in self.index["splits"].values():
            for stream in split.values():
                for shard in stream["shards"]:
                    found += [{"file": shard["file"], "size": shard["size"], "sha256": shard["sha256"]},
                              {"file": shard["docs_file"], "size": shard["docs_size"], "sha256": shard["docs_sha256"]}]
        return found

    def problems(self) -> list[str]:
        """Each file that is missing, of another size, or whose SHA-256 is not the index's; and each
        id past the vocabulary (read shard by shard, a bounded block at a time)."""
        found = []
        for entry in self.files():
            path = self.folder / entry["file"]
            if not path.is_file():
                found.append(f"{entry['file']} is missing")
            elif path.stat().st_size != entry["size"]:
                found.append(f"{entry['file']} holds {path.stat().st_size} bytes, the index says {entry['size']}")
            elif file_sha256(path) != entry["sha256"]:
                found.append(f"{entry['file']}: its SHA-256 is not the index's (the file changed after it was written)")
        if found:
            return found
        for split in self.splits:
            for name in self.index["splits"][split]:
                for shard in self.stream(split, name).shards:
                    largest = largest_id(self.folder / shard["file"], self.dtype)
                    if largest >= self.vocab_size:
                        found.append(f"{shard['file']} holds id {largest}, past the vocabulary of {self.vocab_size}")
        return found

    def summary(self) -> dict[str, Any]:
        """Per split: documents, tokens and UTF-8 bytes of each stream."""
        return {split: {stream: {key: part[key] for key in ("documents", "tokens", "bytes")}
                        for stream, part in streams.items()} for split, streams in self.index["splits"].items()}

    def tokenizer_text(self) -> str:
        return (self.folder / self.index["tokenizer"]["file"]).read_text(encoding="utf-8")


CONTENT = ("format", "corpus", "dtype", "vocab_size", "special_ids", "splits", "tokenizer")
"""What of an index is the store's content (the rest: provenance, how it was made)."""


def content_digest(index: dict[str, Any]) -> str:
    """A digest of the store's content: its index's CONTENT, whose entries hold every file's SHA-256."""
    content = {key: index.get(key) for key in CONTENT}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:32]


def index_text(index: dict[str, Any]) -> str:
    """The index as written: keys sorted, so the same store is always the same bytes."""
    return json.dumps(index, indent=1, sort_keys=True) + "\n"
