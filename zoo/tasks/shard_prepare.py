"""`zoo data prepare`: a corpus in, a token store out (zoo.tasks.shard_store).

Documents are split by a hash of their text (of a pair's source), so a document never sits in two
splits, identical copies included; a parallel corpus keeps its own splits, and a training pair
whose source is also held out is left out. The tokenizer is learned on the training split alone
(BPE, or byte-level BPE), or is a transformers tokenizer folder. Documents are encoded in batches
(`encode_batch`), in worker processes when asked, in order, so the bytes written are a function of
the input and the settings alone: run twice, the same bytes. Every batch ends with a commit (the
open shards' sizes and the documents consumed, in progress.json): run again after an interruption,
it cuts the open shards back to the commit and goes on from there.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from zoo.errors import DataError
from zoo.files import FolderLock, atomic_write, read_json
from zoo.provenance import zoo_commit
from zoo.tasks.pretrained_tokenizer import PretrainedCodec
from zoo.tasks.shard_sources import Reading, documents, parallel_documents, provenance, source_files
from zoo.tasks.shard_store import INDEX, STREAMS, ShardStore, dtype_for, index_text
from zoo.tasks.shard_writer import ShardWriter, store_index
from zoo.tasks.text import BpeCodec, codec_from_state, unk_id

PROGRESS, CODEC = "progress.json", "codec.json"


@dataclass(frozen=True)
class PrepareSettings:
    """What decides the bytes of a store (workers and batch size do not)."""

    tokenizer: Literal["bpe", "bytes"] = "bpe"
    vocab_size: int = 8000
    tokenizer_dir: str | None = None
    valid_share: float = 0.005
    test_share: float = 0.005
    reading: Reading = field(default_factory=Reading)
    pair: tuple[str, str] | None = None
    format: str = "auto"
    parallel_splits: tuple[str, str, str] = ("train", "valid", "test")
    shard_tokens: int = 100_000_000
    max_unknown: float = 0.001

    @property
    def corpus(self) -> str:
        """pairs with a language pair (a parallel corpus), else documents."""
        return "documents" if self.pair is None else "pairs"


def split_of(text: str, settings: PrepareSettings) -> str:
    """train, valid or test by the first 8 bytes of the text's SHA-256, read as a share of 2^64."""
    share = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little") / 2**64
    return "valid" if share < settings.valid_share else "test" if share < settings.valid_share + settings.test_share \
        else "train"


def encode_documents(codec, texts: list[str]) -> list[list[int]]:
    """Each text as the store keeps it: bos, its ids, eos (a pretrained tokenizer's own bos and eos)."""
    tokenizer = codec.tokenizer
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)  # ids without offsets: less memory
    if isinstance(codec, PretrainedCodec):
        bos, eos = codec.ids["bos_id"], codec.ids["eos_id"]
        encodings = encode(texts, add_special_tokens=False)
    else:
        bos, eos = 1, 2
        encodings = encode(texts)
    return [[bos, *encoding.ids, eos] for encoding in encodings]


def special_ids(codec) -> dict[str, int]:
    return dict(codec.ids) if isinstance(codec, PretrainedCodec) else {"pad_id": 0, "bos_id": 1, "eos_id": 2}


_WORKER_CODEC = None


def _start_worker(state: str) -> None:
    global _WORKER_CODEC
    _WORKER_CODEC = codec_from_state(json.loads(state))


def _encode_in_worker(texts: list[str]) -> list[list[int]]:
    return encode_documents(_WORKER_CODEC, texts)


class Preparation:
    """One preparation of `sources` into `out`, resumable."""

    def __init__(self, sources: list[str], out: str | Path, settings: PrepareSettings, command: str | None = None,
                 workers: int = 1, batch_documents: int = 256, progress: bool = True):
        self.sources, self.out, self.settings = list(sources), Path(out), settings
        self.command = command if command is not None else " ".join(sys.argv)
        self.workers, self.batch_documents, self.show_progress = workers, batch_documents, progress
        if settings.pair is not None:
            if len(self.sources) != 1:
                raise DataError("a parallel corpus is one folder of split files and a language pair (--pair de-en)")
            from zoo.tasks.corpus import split_files

            self.files = [(path, False) for stem in settings.parallel_splits
                          for path in split_files(self.sources[0], stem, *settings.pair, settings.format)]
        else:
            self.files = source_files(self.sources, settings.reading.suffix)

    def job(self, made_from: list[dict[str, Any]]) -> str:
        """What the store is a function of: the settings and the sources' contents."""
        return hashlib.sha256(json.dumps({"settings": asdict(self.settings), "sources": made_from},
                                         sort_keys=True).encode()).hexdigest()

    def run(self) -> dict[str, Any]:
        """The store's index; a store already prepared from the same input is left as it is."""
        self.out.mkdir(parents=True, exist_ok=True)
        with FolderLock(self.out, what="a preparation"):
            made_from = provenance([path for path, _ in self.files])
            job = self.job(made_from)
            if (self.out / INDEX).exists():
                index = ShardStore.open(self.out, verify=False).index
                if index.get("job") != job:
                    raise DataError(f"{self.out}: holds a token store of other input or settings; remove it, or give "
                                    "another --out")
                return index
            progress = self._progress(job)
            codec = self._codec(progress is not None)
            dtype = dtype_for(len(codec))
            writers = {(split, stream): ShardWriter(self.out, split, stream, dtype, self.settings.shard_tokens,
                                                    (progress or {}).get("writers", {}).get(f"{split}.{stream}"))
                       for split in ("train", "valid", "test") for stream in STREAMS[self.settings.corpus]}
            counts = (progress or {}).get("counts", {"consumed": 0, "unknown": {}, "ids": {}, "overlap": 0})
            if progress is None:  # from here on, a rerun resumes: no file is written before this commit
                self._commit(job, counts, writers)
            self._write(codec, writers, counts, job)
            index = self._index(codec, dtype, writers, counts, job, made_from)
            self._check_unknown(counts, final=True)
            atomic_write(self.out / INDEX, index_text(index))
            (self.out / PROGRESS).unlink(missing_ok=True)
            return index

    def _progress(self, job: str) -> dict[str, Any] | None:
        path = self.out / PROGRESS
        if not path.exists():
            others = [p.name for p in self.out.iterdir() if p.name not in (".lock", CODEC)]
            if others:
                raise DataError(f"{self.out}: not empty ({', '.join(sorted(others)[:3])}); a store is prepared into a "
                                "new or empty folder")
            return None
        progress = read_json(path, "a preparation's progress", error=DataError)
        if not isinstance(progress, dict) or progress.get("job") != job:
            raise DataError(f"{path}: an unfinished preparation of other input or settings; remove {self.out}, or give "
                            "another --out")
        return progress

    def _codec(self, resuming: bool):
        """The tokenizer: the one this preparation already learned (codec.json), a transformers
        folder's, or learned now on the training split."""
        path = self.out / CODEC
        if path.exists() and resuming:
            return codec_from_state(read_json(path, "a store's tokenizer", error=DataError))
        s = self.settings
        if s.tokenizer_dir is not None:
            codec = PretrainedCodec.from_folder(s.tokenizer_dir, target=True)
        else:
            texts = self._training_texts()
            codec = BpeCodec.train_bytes(texts, s.vocab_size) if s.tokenizer == "bytes" else \
                BpeCodec.train(texts, s.vocab_size, 2, False)
        atomic_write(path, json.dumps(codec.state(), sort_keys=True))
        return codec

    def _training_texts(self) -> Iterator[str]:
        for split, texts, _ in self._documents():
            if split == "train":
                yield from texts

    def _documents(self) -> Iterator[tuple[str, tuple[str, ...], Path]]:
        """(split, texts of each stream, file) of every document, in order."""
        s = self.settings
        if s.pair is None:
            for document in documents(self.files, s.reading):
                yield split_of(document.text, s), (document.text,), document.source
            return
        stems = dict(zip(("train", "valid", "test"), s.parallel_splits))
        held_out = {hashlib.sha256(src.encode()).digest() for split in ("valid", "test")
                    for src, _ in parallel_documents(self.sources[0], stems[split], s.pair, s.format)}
        for split, stem in stems.items():
            for pair in parallel_documents(self.sources[0], stem, s.pair, s.format):
                if split == "train" and hashlib.sha256(pair[0].encode()).digest() in held_out:
                    yield "overlap", pair, Path(self.sources[0])
                else:
                    yield split, pair, Path(self.sources[0])

    def _write(self, codec, writers: dict[tuple[str, str], ShardWriter], counts: dict[str, Any], job: str) -> None:
        bar = self._bar()
        pool = multiprocessing.get_context("spawn").Pool(self.workers, _start_worker, (json.dumps(codec.state()),)) \
            if self.workers > 1 else None
        try:
            encode, unknown, pad = self._encoder(codec, pool), unk_id(codec), special_ids(codec)["pad_id"]
            for batch in self._batches(counts["consumed"]):
                read = self._add_batch(batch, encode, writers, counts, unknown, pad)
                counts["consumed"] += len(batch)
                self._check_unknown(counts, final=False)
                self._commit(job, counts, writers)
                bar.update(read)
        finally:
            bar.close()
            if pool is not None:
                pool.terminate()

    def _commit(self, job: str, counts: dict[str, Any], writers: dict[tuple[str, str], ShardWriter]) -> None:
        """What a rerun takes back: the documents consumed, the counts, every shard's sizes."""
        atomic_write(self.out / PROGRESS, json.dumps(
            {"job": job, "counts": counts,
             "writers": {f"{split}.{stream}": w.state() for (split, stream), w in writers.items()}}, sort_keys=True))

    def _encoder(self, codec, pool):
        """texts -> their documents' ids: here, or split among the worker processes (in order)."""
        if pool is None:
            return lambda texts: encode_documents(codec, texts)
        share = -(-self.batch_documents // self.workers)

        def encode(texts: list[str]) -> list[list[int]]:
            parts = pool.map(_encode_in_worker, [texts[i : i + share] for i in range(0, len(texts), share)])
            return [ids for part in parts for ids in part]
        return encode

    def _batches(self, skip: int) -> Iterator[list[tuple[str, tuple[str, ...], Path]]]:
        """The documents after the first `skip`, `batch_documents` at a time."""
        batch = []
        for number, document in enumerate(self._documents()):
            if number < skip:
                continue
            batch.append(document)
            if len(batch) == self.batch_documents:
                yield batch
                batch = []
        if batch:
            yield batch

    def _add_batch(self, batch, encode, writers, counts: dict[str, Any], unknown: int | None, pad: int) -> int:
        """Encode and write one batch of documents; the UTF-8 bytes of text it read (the bar's unit)."""
        streams, read = STREAMS[self.settings.corpus], 0
        for position, stream in enumerate(streams):
            encoded = encode([texts[position] for _, texts, _ in batch])
            for (split, texts, source), ids in zip(batch, encoded, strict=True):
                size = len(texts[position].encode("utf-8"))
                read += size
                if split == "overlap":
                    continue
                writers[split, stream].add([ids], [size])
                counts["ids"][split] = counts["ids"].get(split, 0) + len(ids)
                counts["pad"] = counts.get("pad", 0) + ids.count(pad)
                missing = ids.count(unknown) if unknown is not None else 0
                if missing:
                    counts["unknown"][split] = counts["unknown"].get(split, 0) + missing
                    files = counts.setdefault("unknown_files", {})
                    files[str(source)] = files.get(str(source), 0) + missing
        counts["overlap"] += sum(split == "overlap" for split, _, _ in batch)
        return read

    def _check_unknown(self, counts: dict[str, Any], final: bool) -> None:
        """A tokenizer that maps more than max_unknown of a split's ids to <unk> does not cover the
        text: refused as soon as 10,000 ids show it, naming the file that held the most."""
        for split, missing in counts["unknown"].items():
            total = counts["ids"][split]
            if (final or total >= 10_000) and missing / total > self.settings.max_unknown:
                files = counts.get("unknown_files", {})
                worst = max(files, key=files.get) if files else "the sources"
                raise DataError(f"{worst}: the tokenizer does not cover the text: {missing} of {total} ids of split "
                                f"{split!r} ({missing / total:.1%}) are <unk>, more than the {self.settings.max_unknown:.1%} "
                                "allowed (--max-unknown); learn one on this corpus, or use --tokenizer bytes")

    def _bar(self):
        from tqdm import tqdm

        total = sum(path.stat().st_size for path, _ in self.files)
        return tqdm(total=total, unit="B", unit_scale=True, desc="prepare", disable=not self.show_progress,
                    dynamic_ncols=True)

    def _index(self, codec, dtype, writers, counts, job, made_from) -> dict[str, Any]:
        splits = {}
        for split in ("train", "valid", "test"):
            splits[split] = {stream: writers[split, stream].finish() for stream in STREAMS[self.settings.corpus]}
        empty = [split for split, streams in splits.items() if not next(iter(streams.values()))["documents"]]
        if "train" in empty:
            raise DataError(f"{', '.join(self.sources)}: no training document with text (an empty corpus, or every "
                            "document held out)")
        if empty:
            shares = {"valid": "--valid-share", "test": "--test-share"}
            raise DataError(f"{', '.join(self.sources)}: split {empty[0]!r} holds no document; raise "
                            f"{shares[empty[0]]} (a corpus of few documents needs a larger share)")
        return store_index(self.settings.corpus, dtype, len(codec), special_ids(codec), self.out / CODEC, splits, job=job,
                           pad_in_documents=counts.get("pad", 0), left_out={"held_out_sources": counts["overlap"]},
                           provenance={"sources": made_from, "command": self.command, "zoo_commit": zoo_commit(),
                                       "settings": asdict(self.settings)})
