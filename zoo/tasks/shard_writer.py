"""Shards written one document at a time, in a state that a rerun of an interrupted preparation
takes back: each open shard's files are cut back to the sizes of the last commit and appended to
from there, so the bytes are those of a run never interrupted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from zoo.tasks.shard_store import FORMAT, file_sha256, shard_name


class ShardWriter:
    """The shards of one split's stream: a shard closes after the document that brings it to
    `shard_tokens` ids, so a document never spans two."""

    def __init__(self, folder: Path, split: str, stream: str, dtype: np.dtype, shard_tokens: int,
                 state: dict[str, Any] | None = None):
        self.folder, self.split, self.stream, self.dtype, self.shard_tokens = folder, split, stream, dtype, shard_tokens
        state = state or {"closed": [], "open": None}
        self.closed: list[dict[str, Any]] = list(state["closed"])
        self.open = dict(state["open"]) if state["open"] else None
        self._files = None
        if self.open:  # a commit's open shard: cut back to what that commit counted
            for name, size in ((self.open["file"], self.open["size"]), (self.open["docs_file"], self.open["docs_size"])):
                with open(folder / name, "r+b") as handle:
                    handle.truncate(size)

    def add(self, documents: list[list[int]], text_bytes: list[int]) -> None:
        for ids, size in zip(documents, text_bytes, strict=True):
            if self.open is None:
                name = shard_name(self.split, self.stream, len(self.closed))
                self.open = {"file": f"{name}.bin", "docs_file": f"{name}.docs", "documents": 0, "tokens": 0,
                             "bytes": 0, "size": 0, "docs_size": 0}
                for file in (self.open["file"], self.open["docs_file"]):
                    (self.folder / file).write_bytes(b"")
            ids_bytes = np.asarray(ids, dtype=self.dtype).tobytes()
            self.open["tokens"] += len(ids)
            self.open["documents"] += 1
            self.open["bytes"] += size
            row = np.array([[self.open["tokens"], size]], dtype="<u8").tobytes()
            self._append(self.open["file"], ids_bytes, "size")
            self._append(self.open["docs_file"], row, "docs_size")
            if self.open["tokens"] >= self.shard_tokens:
                self.close_open()

    def _append(self, name: str, data: bytes, size_key: str) -> None:
        handles = self._handles()
        handles[name].write(data)
        self.open[size_key] += len(data)

    def _handles(self) -> dict[str, Any]:
        if self._files is None or set(self._files) != {self.open["file"], self.open["docs_file"]}:
            self._close_handles()
            self._files = {name: open(self.folder / name, "ab")  # noqa: SIM115 - held open across documents
                           for name in (self.open["file"], self.open["docs_file"])}
        return self._files

    def _close_handles(self) -> None:
        for handle in (self._files or {}).values():
            handle.close()
        self._files = None

    def flush(self) -> None:
        for handle in (self._files or {}).values():
            handle.flush()

    def close_open(self) -> None:
        """Close the open shard: its files' SHA-256 go into its record."""
        self._close_handles()
        shard = dict(self.open)
        shard["sha256"] = file_sha256(self.folder / shard["file"])
        shard["docs_sha256"] = file_sha256(self.folder / shard["docs_file"])
        self.closed.append(shard)
        self.open = None

    def finish(self) -> dict[str, Any]:
        """The stream's entry of the index: its totals and its shards."""
        if self.open is not None:
            self.close_open()
        return {"documents": sum(s["documents"] for s in self.closed), "tokens": sum(s["tokens"] for s in self.closed),
                "bytes": sum(s["bytes"] for s in self.closed), "shards": self.closed}

    def state(self) -> dict[str, Any]:
        self.flush()
        return {"closed": list(self.closed), "open": dict(self.open) if self.open else None}



def store_index(corpus: str, dtype: np.dtype, vocab_size: int, special_ids: dict[str, int], tokenizer: Path,
                splits: dict[str, dict[str, Any]], **more: Any) -> dict[str, Any]:
    """The index of a store whose shards are written (`splits`: each stream's ShardWriter.finish())
    and whose tokenizer (a codec's state as JSON) is the file `tokenizer` beside them."""
    return {"format": FORMAT, "corpus": corpus, "dtype": dtype.str, "vocab_size": vocab_size, "special_ids": special_ids,
            "splits": splits, "tokenizer": {"file": tokenizer.name, "size": tokenizer.stat().st_size,
                                            "sha256": file_sha256(tokenizer)}, **more}
