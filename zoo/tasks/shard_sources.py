"""The documents of a corpus to prepare, read as a stream (never the whole corpus in memory):
text files (a document a line, or documents ended by a separator line), a folder whose files are
documents, JSON lines with a text field, Parquet and Arrow files (through Hugging Face `datasets`,
from local files, offline), and a parallel corpus in any format the `parallel` task reads."""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from zoo.errors import DataError, MissingData
from zoo.tasks.shard_store import file_sha256

TABLES = {".parquet": "parquet", ".arrow": "arrow"}
JSON_LINES = (".jsonl", ".ndjson")


@dataclass(frozen=True)
class Document:
    text: str
    source: Path
    """The file it came from: named when the document is a problem."""


@dataclass(frozen=True)
class Reading:
    """How documents are cut from text: `separator` ends a document at a line of exactly it; a
    JSON-lines or table row's text is in `field`; only files ending in `suffix` are read from a folder."""

    separator: str | None = None
    field: str = "text"
    suffix: str | None = None


def source_files(sources: list[str], suffix: str | None) -> list[tuple[Path, bool]]:
    """(file, whether a folder held it) of every file the sources name: a file itself, a folder's
    files (subfolders included, hidden ones not, sorted by path; only those ending in `suffix` when
    given). A text file of a folder is a document; a text file named itself, a document a line."""
    files: list[tuple[Path, bool]] = []
    for source in map(Path, sources):
        if source.is_file():
            files.append((source, False))
        elif source.is_dir():
            inside = sorted(path for path in source.rglob("*") if path.is_file()
                            and not any(part.startswith(".") for part in path.relative_to(source).parts)
                            and (suffix is None or path.name.endswith(suffix)))
            if not inside:
                raise DataError(f"{source}: no file{'' if suffix is None else f' ending in {suffix!r}'} to read")
            files += [(path, True) for path in inside]
        else:
            raise MissingData(f"{source}: no such file or folder")
    return files


def kind_of(path: Path) -> str:
    name = path.name.removesuffix(".gz")
    ext = Path(name).suffix
    return TABLES.get(ext) or ("jsonl" if ext in JSON_LINES else "text")


def text_lines(path: Path) -> Iterator[str]:
    """A text file's lines without their ends (`\\r\\n` read as `\\n`), gzipped or not; a byte
    that is not UTF-8 is named with its line."""
    raw = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115 - closed below
    with raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="\n") as handle:
        number = 0
        try:
            for number, line in enumerate(handle, 1):  # noqa: B007 - number names the line of a decoding error
                yield line.removesuffix("\n").removesuffix("\r")
        except UnicodeDecodeError:
            raise DataError(f"{path}:{number + 1}: not UTF-8 text; re-encode the file as UTF-8") from None


def file_documents(path: Path, reading: Reading, whole: bool) -> Iterator[str]:
    """The documents of one file: its rows (JSON lines, tables), its separated parts, its lines,
    or (`whole`: a file of a folder, no separator) the file itself."""
    kind = kind_of(path)
    if kind in ("parquet", "arrow"):
        yield from table_texts(path, kind, reading.field)
    elif kind == "jsonl":
        for number, line in enumerate(text_lines(path), 1):
            if line.strip():
                yield json_text(line, reading.field, path, number)
    elif reading.separator is not None:
        current: list[str] = []
        for line in text_lines(path):
            if line == reading.separator:
                yield "\n".join(current)
                current = []
            else:
                current.append(line)
        yield "\n".join(current)
    elif whole:
        yield "\n".join(text_lines(path))
    else:
        yield from text_lines(path)


def json_text(line: str, field: str, path: Path, number: int) -> str:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{number}: not a JSON object ({err.msg})") from None
    text = row.get(field) if isinstance(row, dict) else None
    if not isinstance(text, str):
        keys = ", ".join(row) if isinstance(row, dict) else type(row).__name__
        raise DataError(f"{path}:{number}: no text field {field!r} (the row holds {keys}); name it with --field")
    return text


def table_texts(path: Path, kind: str, field: str) -> Iterator[str]:
    """The `field` of each row of a Parquet or Arrow file, streamed by Hugging Face `datasets` from
    the local file (no hub, no network)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        import datasets
    except ImportError:
        raise DataError(f"{path}: reading {kind} needs Hugging Face datasets: pip install 'zoo[data]'") from None
    rows = datasets.load_dataset(kind, data_files=[str(path)], split="train", streaming=True)
    if field not in (rows.column_names or [field]):
        raise DataError(f"{path}: no text column {field!r} (it holds {', '.join(rows.column_names)}); name it with --field")
    for row in rows:
        text = row[field]
        yield text if isinstance(text, str) else ""


def documents(files: list[tuple[Path, bool]], reading: Reading) -> Iterator[Document]:
    """Every document of the files in order, stripped of blank space at its ends; empty ones are
    left out (a blank line, an empty row)."""
    for path, in_folder in files:
        for text in file_documents(path, reading, whole=in_folder):
            text = text.strip()
            if text:
                yield Document(text, path)


def provenance(files: list[Path]) -> list[dict[str, object]]:
    """Each source file as named, with its size and SHA-256: what the store was made from."""
    return [{"path": str(path), "size": path.stat().st_size, "sha256": file_sha256(path)} for path in files]


def parallel_documents(data_dir: str, stem: str, pair: tuple[str, str], fmt: str) -> Iterator[tuple[str, str]]:
    """The sentence pairs of one split of a parallel corpus, in any format the `parallel` task reads."""
    from zoo.tasks.corpus import read_split

    yield from read_split(data_dir, stem, *pair, fmt)
