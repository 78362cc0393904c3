"""Reading a parallel corpus from disk in a registered format (zoo.tasks.formats: aligned
`STEM.SRC` / `STEM.TGT` files, `STEM.tsv`, `STEM.jsonl`); each file may be gzipped (`.gz`).

A line is what ends in `\\n` (a `\\r` before it is dropped): Unicode line separators, form feeds
and other control characters inside a sentence stay in it, so one stray U+2028 in web-scraped text
never splits a sentence and misaligns every later pair. Every failure names the file, and the line
where there is one.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator

from zoo.errors import ConfigError, DataError, MissingData
from zoo.files import content_digest, human_bytes, regular_file
from zoo.near_paths import near_split
from zoo.specs.registries import describe_unknown, registry


def readable_bytes() -> int:
    """The most text a corpus file may hold, inflated: a 32nd of the host's available memory.
    Reading it into lines peaks at 5.2 times its bytes (measured on Multi30k's German text
    repeated to 200 MB: UTF-8 bytes, the decoded text and the lines at once), its token ids take
    about as much again, and a split is a pair of files: 2 x 10 / 32 leaves a third of the memory.
    An eighth let a 2.6 MB gzip file inflate to 2.7 GB and end in a MemoryError."""
    from zoo.model.size_checks import available_bytes

    return available_bytes("cpu") // 32


def read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed for `.gz`, at most readable_bytes() of them: a gzip file
    that inflates past memory (a few MB can hold gigabytes) is refused while it is read, never
    read whole. A truncated or fake gzip file is a DataError."""
    limit = readable_bytes()
    try:
        regular_file(path, "a corpus file", DataError)
        if path.suffix != ".gz":
            if path.stat().st_size > limit:
                raise DataError(f"{path}: {human_bytes(path.stat().st_size)}, more than the {human_bytes(limit)} of "
                                "text this machine's memory can hold with its tokens; use a sample of it")
            return path.read_bytes()
        with gzip.open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise DataError(f"{path}: not a readable gzip file (truncated or not gzip: {err})") from None
    if len(data) > limit:
        raise DataError(f"{path}: inflates to more than {human_bytes(limit)}, more text than this machine's memory "
                        f"can hold with its tokens ({human_bytes(path.stat().st_size)} compressed); use a sample of it")
    return data


BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark some editors write at a file's start: not text of its first line."""


def read_text(path: Path) -> str:
    """The file's UTF-8 text, without a byte-order mark at its start; anything else is a DataError
    that names the file, the line and the column."""
    data = read_bytes(path).removeprefix(BOM)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataError(f"{path}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x} at column {column}); "
                        "re-encode the file as UTF-8") from None


def read_lines(path: Path) -> list[str]:
    """The file's lines (read_text's): split at `\\n` alone, each without its `\\r\\n` or `\\n` ending."""
    lines = read_text(path).split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line starts no line of its own
    return [line.removesuffix("\r") for line in lines]


def find(data_dir: Path, name: str) -> Path | None:
    for candidate in (data_dir / name, data_dir / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def in_order(fmt: str) -> list[Any]:
    """The format `fmt` names, or with auto every registered format in its order."""
    formats = registry("format")
    names = sorted(formats.names(), key=lambda name: formats.get(name).order) if fmt == "auto" else [fmt]
    return [formats.get(name) for name in names]


def located(data_dir: str | Path, stem: str, src: str, tgt: str, fmt: str = "auto") -> tuple[Any, list[Path]]:
    """The format of one split (the one named, or with auto the first whose files exist) and its files."""
    tried = []
    for found in in_order(fmt):
        files = found.files(Path(data_dir), stem, src, tgt)
        if files:
            return found, files
        tried.append(" and ".join(f"{name}[.gz]" for name in found.names(stem, src, tgt)))
    raise MissingData(f"task.data_dir {str(data_dir)!r}: no {' or '.join(tried)} for split {stem!r}"
                      f"{near_split(data_dir, stem)}")


def split_files(data_dir: str | Path, stem: str, src: str, tgt: str, fmt: str = "auto") -> list[Path]:
    """The files that hold one split."""
    return located(data_dir, stem, src, tgt, fmt)[1]


def read_split(data_dir: str | Path, stem: str, src: str, tgt: str, fmt: str = "auto") -> list[tuple[str, str]]:
    """The (source, target) sentence pairs of one split; pairs with an empty side are dropped. A
    split left with no pair is an error that names its files."""
    return read_split_counted(data_dir, stem, src, tgt, fmt)[0]


def read_split_counted(data_dir: str | Path, stem: str, src: str, tgt: str,
                       fmt: str = "auto") -> tuple[list[tuple[str, str]], int]:
    """read_split's pairs, and how many pairs with an empty side it dropped (a run's data summary says so)."""
    found, files = located(data_dir, stem, src, tgt, fmt)
    pairs = found.pairs(files, src, tgt)
    kept = [(s.strip(), t.strip()) for s, t in pairs if s.strip() and t.strip()]
    if not kept:
        raise DataError(f"{' and '.join(map(str, files))}: split {stem!r} holds no sentence pair with text on both sides")
    return kept, len(pairs) - len(kept)


def format_name(fmt: str) -> str:
    """A task's `format`: auto, or a registered corpus format (zoo.tasks.formats)."""
    if fmt != "auto" and fmt not in registry("format"):
        raise ConfigError(describe_unknown("format", fmt, ["auto", *registry("format").names()]))
    return fmt


FormatName = Annotated[str, AfterValidator(format_name)]


def cached_digest(path: Path) -> str:
    """A content digest of a data file as stored (compressed or not), read once per process while
    the file's size and modification time stay the same (zoo.files.content_digest)."""
    return content_digest(path, "a corpus file", DataError)
